"""Type stubs of idem's native module (the package's own functions are
typed in idem/__init__.py)."""

from typing import Any, Dict, List, Optional

ENGINE_VERSION: str

class IdemError(Exception):
    kind: str
    exit_code: int

class CheckFailed(IdemError): ...
class InputError(IdemError): ...
class PartitionMissing(InputError): ...
class GuestError(IdemError): ...
class StorageError(IdemError): ...

class Limits:
    max_memory_mb: Optional[int]
    max_output_mb: Optional[int]
    max_output_rows: Optional[int]
    max_output_batch_rows: Optional[int]
    max_input_batch_mb: Optional[int]
    deadline_ms: Optional[int]
    fuel: Optional[int]
    max_module_mb: Optional[int]
    compile_deadline_ms: Optional[int]
    cache_dir: Optional[str]
    def __init__(
        self,
        *,
        max_memory_mb: Optional[int] = None,
        max_output_mb: Optional[int] = None,
        max_output_rows: Optional[int] = None,
        max_output_batch_rows: Optional[int] = None,
        max_input_batch_mb: Optional[int] = None,
        deadline_ms: Optional[int] = None,
        fuel: Optional[int] = None,
        max_module_mb: Optional[int] = None,
        compile_deadline_ms: Optional[int] = None,
        cache_dir: Optional[str] = None,
    ) -> None: ...

class RunResult:
    outcome: str
    version: Optional[int]
    slice: Optional[str]
    run_key: Optional[str]
    output_digest: Optional[str]
    manifest: Optional[str]
    manifest_digest: Optional[str]
    envelope: Optional[str]
    envelope_digest: Optional[str]
    rows_in: Optional[int]
    rows_out: Optional[int]
    drift: Optional[str]
    raced: bool
    timings_ms: Dict[str, int]
    source: Optional[str]
    through: Optional[str]

class BackfillSlice:
    date: str
    slice: str
    outcome: str
    version: Optional[int]
    rows_in: int
    rows_out: int
    seconds: float
    error_kind: Optional[str]
    error: Optional[str]

class BackfillResult:
    slices: List[BackfillSlice]
    failed: int
    ok: bool

class Verification:
    manifest: str
    matched: bool
    output_digest: Optional[str]
    reason: Optional[str]
    notes: List[str]

class AuditSlice:
    slice: str
    version: int
    proof: str
    detail: str

class AuditReport:
    table: str
    proven: bool
    slices: List[AuditSlice]

class StoredRun:
    location: str
    digest: str
    json: str
    run_key: str
    slice: str
    output_digest: str
    rows_in: int
    rows_out: int
    held: str
    held_version: Optional[int]

class LogEntry:
    at_ms: int
    slice: str
    run_key: str
    manifest_digest: str
    output_digest: str
    outcome: str
    version: Optional[int]
    rows: int
    timings_ms: Dict[str, int]
    origin: Optional[str]
    params: Optional[str]

class Change:
    field: str
    before: str
    after: str

class Explanation:
    run_key: str
    slice: str
    memo: bool
    current_version: Optional[int]
    current_run_key: Optional[str]
    same_run_key: bool
    changes: List[Change]

class StageResult:
    stage: str
    slice: str
    outcome: str
    version: Optional[int]
    rows_in: int
    rows_out: int
    seconds: float
    error_kind: Optional[str]
    error: Optional[str]
    reads_table: Optional[str]
    reads_version: Optional[int]

class PipelineResult:
    pipeline: str
    logical_date: str
    stages: List[StageResult]
    ok: bool
    def raise_for_failure(self) -> None: ...

def pipeline_run(
    file: str,
    logical_date: str,
    stage: Optional[str] = None,
    limits: Optional[Limits] = None,
    lineage: Optional[str] = None,
    lineage_namespace: Optional[str] = None,
) -> PipelineResult: ...
def run(args: Dict[str, Any], limits: Optional[Limits] = None) -> RunResult: ...
def explain(args: Dict[str, Any], limits: Optional[Limits] = None) -> Explanation: ...
def compare(a: str, b: str, table: Optional[str] = None) -> Explanation: ...
def backfill(args: Dict[str, Any], limits: Optional[Limits] = None) -> BackfillResult: ...
def verify(
    manifest: str, limits: Optional[Limits] = None, allow_engine: bool = False, keys: List[str] = ...
) -> Verification: ...
def audit(
    table: str,
    slice: Optional[str] = None,
    replay: bool = False,
    limits: Optional[Limits] = None,
    keys: List[str] = ...,
) -> AuditReport: ...
def show(run: str, table: Optional[str] = None) -> StoredRun: ...
def log(table: str, since_ms: int = 0) -> List[LogEntry]: ...
def publish_module(module: str, table: str, limits: Optional[Limits] = None) -> str: ...
