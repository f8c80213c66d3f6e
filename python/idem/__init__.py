"""idem: run data transforms compiled to WebAssembly in a deterministic
sandbox, and commit their output to a Delta Lake or Iceberg table only when
it is new. Retries, reruns and backfills are harmless by construction.

The same library as the ``idem`` command line, called in this process (no
subprocess): ``idem.run(...)`` is ``idem run ...``, with the same run keys,
manifests, commits and error messages. Every call releases the GIL while it
works.

Errors are exceptions of one class per kind of the CLI's exit codes, each
with ``kind`` and ``exit_code``: :class:`CheckFailed` (1), :class:`InputError`
(2), :class:`GuestError` (3), :class:`StorageError` (4, worth a retry); all
derive from :class:`IdemError`. :class:`PartitionMissing` is the
:class:`InputError` of a slice whose partition does not exist.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple, Union

from . import _idem
from ._idem import (
    AuditReport,
    AuditSlice,
    BackfillResult,
    BackfillSlice,
    Change,
    CheckFailed,
    Explanation,
    GuestError,
    IdemError,
    InputError,
    Limits,
    LogEntry,
    PartitionMissing,
    PipelineResult,
    RunResult,
    StageResult,
    StorageError,
    StoredRun,
    Verification,
)

__all__ = [
    "run",
    "backfill",
    "explain",
    "verify",
    "audit",
    "show",
    "log",
    "pipeline_run",
    "publish_module",
    "Limits",
    "PipelineResult",
    "StageResult",
    "RunResult",
    "BackfillResult",
    "BackfillSlice",
    "Verification",
    "AuditReport",
    "AuditSlice",
    "StoredRun",
    "LogEntry",
    "Explanation",
    "Change",
    "IdemError",
    "CheckFailed",
    "InputError",
    "PartitionMissing",
    "GuestError",
    "StorageError",
]

__version__ = _idem.ENGINE_VERSION

PathLike = Union[str, "os.PathLike[str]"]
Params = Union[None, str, Mapping[str, Any]]


def _params(params: Params, what: str = "params") -> str:
    """Params as the JSON text the run spec hashes (a mapping, or JSON text)."""
    if params is None:
        return "{}"
    if isinstance(params, str):
        return params
    if isinstance(params, Mapping):
        return json.dumps(params)
    raise InputError(f"{what} must be a mapping or JSON text, not {type(params).__name__}")


def _strings(values: Union[None, str, Iterable[str]], what: str) -> list:
    """A list of strings; one string alone is refused (a common slip)."""
    if values is None:
        return []
    if isinstance(values, str):
        raise InputError(f"{what} takes a list of strings, not one string: {what}=[{values!r}]")
    if not isinstance(values, Iterable):
        raise InputError(f"{what} takes a list of strings, not {type(values).__name__}")
    return [_text(v, what) for v in values]


def _text(value: Any, what: str) -> str:
    """A path or URL (str or os.PathLike) as text."""
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise InputError(f"{what} must be a path or URL, not {type(value).__name__}: {value!r}")


def _maybe_text(value: Any, what: str) -> Optional[str]:
    return None if value is None else _text(value, what)


def _count(value: Any, what: str, high: int = 2**63 - 1, low: int = 0) -> int:
    """An integer from `low` to `high` (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{what} must be an integer, not {type(value).__name__}: {value!r}")
    if not low <= value <= high:
        raise InputError(f"{what} must be from {low} to {high}, not {value}")
    return value


def _maybe_count(value: Any, what: str, high: int = 2**63 - 1) -> Optional[int]:
    return None if value is None else _count(value, what, high)


def _keys(key: Union[None, str, Sequence[str]]) -> list:
    """Merge keys: comma-separated text or a list of them, as `--key`."""
    parts = [key] if isinstance(key, str) else _strings(key, "key")
    return [k for p in parts for k in p.split(",") if k]


def _publish(
    mode: Optional[str],
    key: Union[None, str, Sequence[str]],
    params: Params,
    logical_date: Optional[str],
    batch_rows: int,
    expect: Optional[Sequence[str]],
    audit_module: Optional[PathLike],
    audit_params: Params,
    sign_key: Optional[PathLike] = None,
    lineage: Optional[str] = None,
    lineage_namespace: Optional[str] = None,
    _lineage_parent: Optional[Tuple[str, str]] = None,
    *,
    schema: Union[None, str, Sequence[Mapping[str, str]]] = None,
    max_rejects: int = 0,
    wap: Union[bool, str] = False,
    on_schema_change: str = "fail",
    sides: Optional[Mapping[str, Any]] = None,
) -> dict:
    if audit_params is not None and audit_module is None:
        raise InputError("audit_params needs audit_module (the audit transform they are for)")
    for value, what in ((lineage, "lineage"), (lineage_namespace, "lineage_namespace")):
        if value is not None and not isinstance(value, str):
            raise InputError(f"{what} must be text, not {type(value).__name__}: {value!r}")
    if lineage_namespace is not None and lineage is None:
        raise InputError("lineage_namespace needs lineage (the receiver the events go to)")
    if not isinstance(wap, (bool, str)):
        raise InputError(f"wap must be True or a branch name, not {type(wap).__name__}: {wap!r}")
    return {
        "wap": wap is True,
        "wap_branch": wap if isinstance(wap, str) else None,
        "sign_key": _maybe_text(sign_key, "sign_key"),
        "lineage": lineage,
        "lineage_namespace": lineage_namespace,
        "lineage_parent": _lineage_parent if lineage is not None else None,
        "mode": mode,
        "key": _keys(key),
        "params": _params(params),
        "logical_date": logical_date,
        "batch_rows": _count(batch_rows, "batch_rows", 2**32 - 1),
        "expect": _strings(expect, "expect"),
        "audit_module": _maybe_text(audit_module, "audit_module"),
        "audit_params": _params(audit_params, "audit_params"),
        "schema": _schema(schema),
        "max_rejects": _count(max_rejects, "max_rejects"),
        "on_schema_change": _policy(on_schema_change),
        "sides": _sides(sides),
    }


def _sides(sides: Any) -> list:
    """``sides={"customers": "lake/dim_customers"}`` (a table at its current
    version, pinned when the run starts), ``("lake/dim", 7)`` for version 7,
    or a Parquet file or folder: as ``--side NAME=TABLE[@VERSION]``, each a
    (name, location, version) triple (the location taken as it is)."""
    if sides is None:
        return []
    if not isinstance(sides, Mapping):
        raise InputError(
            f"sides must be a mapping of name to table, e.g. {{'customers': 'lake/dim'}}, not {type(sides).__name__}"
        )
    out = []
    for name, where in sides.items():
        if not isinstance(name, str):
            raise InputError(f"sides: a side input's name is text, not {name!r}")
        version = None
        if isinstance(where, tuple) and len(where) == 2:
            where, version = where[0], _count(where[1], f"sides[{name!r}]'s version")
        out.append((name, _text(where, "sides"), version))
    return out


def _policy(policy: Any) -> str:
    """``on_schema_change``: ``"fail"`` or ``"append-new-columns"``."""
    if policy in ("fail", "append-new-columns"):
        return policy
    raise InputError(
        f"on_schema_change must be 'fail' or 'append-new-columns', not {policy!r}"
    )


def _schema(schema: Any) -> Optional[str]:
    """Text inputs' columns (``--schema``): JSON text, or a list of
    ``{"name": ..., "type": ...}`` mappings."""
    if schema is None or isinstance(schema, str):
        return schema
    if isinstance(schema, (list, tuple)) and all(isinstance(c, Mapping) for c in schema):
        return json.dumps([dict(c) for c in schema])
    raise InputError(
        "schema must be JSON text or a list of {'name': ..., 'type': ...}, not "
        f"{type(schema).__name__}: {schema!r}"
    )


def _either(new: Any, old: Any, new_name: str, old_name: str) -> Tuple[Any, str]:
    """A keyword under its format-neutral name or its former Delta one, and
    the name it was given under."""
    if new is not None and old is not None:
        raise InputError(f"give {new_name} (formerly {old_name}), not both")
    return (old, old_name) if new is None else (new, new_name)


def _slice(
    input: Any,
    partition: Optional[str],
    files: Any,
    slice_id: Optional[str],
    pin: Tuple[Any, Any, Any, Any, Any],
    next: bool,
    max_objects: Any,
    max_bytes: Any,
) -> dict:
    table_version, delta_version, iceberg_snapshot, table_slice, delta_slice = pin
    if not next and (max_objects != 100 or max_bytes is not None):
        raise InputError("max_objects and max_bytes are for next=True (an append-only input)")
    delta_version, version_name = _either(table_version, delta_version, "table_version", "delta_version")
    delta_slice, _ = _either(table_slice, delta_slice, "table_slice", "delta_slice")
    if iceberg_snapshot is not None:
        iceberg_snapshot = _count(iceberg_snapshot, "iceberg_snapshot (a snapshot id)", 2**63 - 1, -(2**63))
    if iceberg_snapshot is not None and delta_version is not None:
        raise InputError("give the input table's table_version or its iceberg_snapshot, not both")
    return {
        "iceberg_snapshot": iceberg_snapshot,
        "input": _maybe_text(input, "input"),
        "partition": partition,
        "files": _strings(files, "files"),
        "slice_id": slice_id,
        "delta_version": _maybe_count(delta_version, version_name),
        "delta_slice": delta_slice,
        "next": bool(next),
        "max_objects": _count(max_objects, "max_objects"),
        "max_bytes": _maybe_count(max_bytes, "max_bytes"),
    }


def _run_args(
    module: Any, table: Any, slice_args: dict, publish: dict, force: bool, origin: Optional[str] = None
) -> dict:
    if origin is not None and not isinstance(origin, str):
        raise InputError(f"origin must be text, not {type(origin).__name__}")
    return {
        "module": _text(module, "module"),
        "table": _text(table, "table"),
        **slice_args,
        "publish": publish,
        "force": bool(force),
        "origin": origin,
    }


def run(
    module: PathLike,
    table: str,
    *,
    input: Optional[str] = None,
    partition: Optional[str] = None,
    files: Optional[Sequence[PathLike]] = None,
    slice_id: Optional[str] = None,
    table_version: Optional[int] = None,
    iceberg_snapshot: Optional[int] = None,
    table_slice: Optional[str] = None,
    delta_version: Optional[int] = None,
    delta_slice: Optional[str] = None,
    next: bool = False,
    max_objects: int = 100,
    max_bytes: Optional[int] = None,
    mode: Optional[str] = None,
    key: Union[None, str, Sequence[str]] = None,
    params: Params = None,
    logical_date: Optional[str] = None,
    batch_rows: int = 8192,
    expect: Optional[Sequence[str]] = None,
    audit_module: Optional[PathLike] = None,
    audit_params: Params = None,
    schema: Union[None, str, Sequence[Mapping[str, str]]] = None,
    max_rejects: int = 0,
    wap: Union[bool, str] = False,
    on_schema_change: str = "fail",
    sides: Optional[Mapping[str, Any]] = None,
    force: bool = False,
    origin: Optional[str] = None,
    sign_key: Optional[PathLike] = None,
    lineage: Optional[str] = None,
    lineage_namespace: Optional[str] = None,
    limits: Optional[Limits] = None,
    _lineage_parent: Optional[Tuple[str, str]] = None,
) -> RunResult:
    """One idempotent run of a slice through ``module`` into ``table``
    (``idem run``): executed only when no committed run has its run key,
    committed only when its output is new for the slice.

    The slice is one of: ``input`` (a Parquet dataset root) with
    ``partition="date=2026-10-01"``; ``input`` (a Delta or Iceberg table)
    with ``table_version`` (a Delta version or an Iceberg snapshot's
    sequence number) or ``iceberg_snapshot`` (a snapshot id), and
    ``partition`` or ``table_slice``; ``input`` (an append-only prefix)
    with ``next=True``; or ``files=[...]``. ``delta_version`` and
    ``delta_slice`` are the former names of ``table_version`` and
    ``table_slice``.

    ``mode`` is ``overwrite-partition`` (the default with a partition),
    ``merge`` (with ``key``) or ``append``. ``params`` is a mapping or JSON
    text. ``expect`` holds checks such as ``"not_null(id)"`` or
    ``"rows(1..)"`` that the output must pass before it is published.

    ``module`` is a path or URL, or ``"sha256:<hex>"``: the module
    :func:`publish_module` stored beside ``table``, read from there and
    refused unless it hashes to that digest. ``origin`` labels who runs it
    (a task attempt, say) in the run log (:func:`log`); it is never hashed.
    ``sign_key`` (an Ed25519 PKCS#8 PEM file, ``idem keygen``) signs the
    manifest: its DSSE envelope is stored beside it and named by the commit
    (``RunResult.envelope``); :func:`audit` and :func:`verify` check it
    with ``keys``. ``lineage`` (``file:///DIR`` or
    ``http(s)://HOST/api/v1/lineage``, a bearer token from
    ``$OPENLINEAGE_API_KEY``) receives the run's OpenLineage events (START,
    then COMPLETE or FAIL; jobs in ``lineage_namespace``, default
    ``idem``); a failed delivery is a warning, never a failed run.

    CSV, TSV and JSON-lines inputs (``.csv``, ``.tsv``, ``.jsonl``,
    ``.ndjson``, each maybe ``.gz``, and ``.json.gz``) are read with
    ``schema`` (a list of ``{"name": ..., "type": ...}``, as ``--schema``)
    or a schema inferred from all their rows; ``max_rejects`` bad rows are
    skipped and counted (the manifest's ``rejectedRows``) before one fails
    the run.

    ``on_schema_change="append-new-columns"`` lets output columns the
    table lacks in: appended to it, nullable, in the same commit
    (``--on-schema-change``; the default ``"fail"`` refuses them).

    ``sides={"customers": "lake/dim_customers"}`` gives the transform side
    inputs it reads whole (``ctx.side_input("customers")``): a Delta or
    Iceberg table at its current version, pinned when the run starts
    (``("lake/dim", 7)`` for version 7), or a Parquet
    file or folder, each hashed into the run key (``--side``). A backfill
    pins each table once for every slice.

    ``wap=True`` (or a branch name) on an Iceberg table writes the output
    to a branch (``wap/<slice id>``), audits the branch's rows with
    ``expect`` and ``audit_module``, and fast-forwards ``main`` to it only
    when they pass (``--wap``, ``--wap-branch``).

    Returns a :class:`RunResult`: ``outcome`` is ``committed``,
    ``unchanged``, ``memo`` or ``up-to-date``. Raises :class:`IdemError`
    subclasses, as the CLI exits.
    """
    pin = (table_version, delta_version, iceberg_snapshot, table_slice, delta_slice)
    slice_args = _slice(input, partition, files, slice_id, pin, next, max_objects, max_bytes)
    publish = _publish(
        mode, key, params, logical_date, batch_rows, expect, audit_module, audit_params, sign_key,
        lineage, lineage_namespace, _lineage_parent, schema=schema, max_rejects=max_rejects,
        wap=wap, on_schema_change=on_schema_change, sides=sides,
    )
    return _idem.run(_run_args(module, table, slice_args, publish, force, origin), limits)


def publish_module(module: PathLike, table: str, *, limits: Optional[Limits] = None) -> str:
    """Store ``module`` (a path or URL) beside ``table`` under
    ``_idem/modules/`` once (``idem publish``), after checking that it
    loads, and return its digest ``"sha256:<hex>"``: runs on any machine
    that reaches the table then take ``module="sha256:<hex>"`` and read it
    from there (the bytes never travel with the task)."""
    return _idem.publish_module(_text(module, "module"), _text(table, "table"), limits)


def explain(
    module: Optional[PathLike] = None,
    table: Optional[str] = None,
    *,
    runs: Optional[Sequence[str]] = None,
    input: Optional[str] = None,
    partition: Optional[str] = None,
    files: Optional[Sequence[PathLike]] = None,
    slice_id: Optional[str] = None,
    table_version: Optional[int] = None,
    iceberg_snapshot: Optional[int] = None,
    table_slice: Optional[str] = None,
    delta_version: Optional[int] = None,
    delta_slice: Optional[str] = None,
    next: bool = False,
    max_objects: int = 100,
    max_bytes: Optional[int] = None,
    mode: Optional[str] = None,
    key: Union[None, str, Sequence[str]] = None,
    params: Params = None,
    logical_date: Optional[str] = None,
    batch_rows: int = 8192,
    expect: Optional[Sequence[str]] = None,
    audit_module: Optional[PathLike] = None,
    audit_params: Params = None,
    on_schema_change: str = "fail",
    sides: Optional[Mapping[str, Any]] = None,
    limits: Optional[Limits] = None,
) -> Explanation:
    """Why a run would (not) execute (``idem explain``): the run that
    ``module``, ``table`` and the slice keywords describe is planned (inputs
    hashed, module loaded, nothing executed or written) and compared with
    its slice's current run, field by field. With ``runs=(a, b)``, two
    stored runs (manifest files, ``TABLE#SLICE``, or run keys with
    ``table``) are compared instead.
    """
    if runs is not None:
        pair = _strings(runs, "runs")
        if len(pair) != 2 or module is not None:
            raise InputError("give runs=(a, b) to compare two stored runs, or a module and a slice, not both")
        return _idem.compare(pair[0], pair[1], _maybe_text(table, "table"))
    if module is None or table is None:
        raise InputError("give the planned run's module and table (and its slice), or runs=(a, b)")
    pin = (table_version, delta_version, iceberg_snapshot, table_slice, delta_slice)
    slice_args = _slice(input, partition, files, slice_id, pin, next, max_objects, max_bytes)
    publish = _publish(
        mode, key, params, logical_date, batch_rows, expect, audit_module, audit_params,
        on_schema_change=on_schema_change, sides=sides,
    )
    return _idem.explain(_run_args(module, table, slice_args, publish, False), limits)


def backfill(
    module: PathLike,
    input: str,
    table: str,
    start: str,
    end: str,
    *,
    column: str = "date",
    every: Optional[str] = None,
    hour_column: str = "hour",
    each: Optional[Mapping[str, Sequence[str]]] = None,
    jobs: int = 2,
    skip_missing: bool = False,
    mode: Optional[str] = None,
    key: Union[None, str, Sequence[str]] = None,
    params: Params = None,
    batch_rows: int = 8192,
    expect: Optional[Sequence[str]] = None,
    audit_module: Optional[PathLike] = None,
    audit_params: Params = None,
    schema: Union[None, str, Sequence[Mapping[str, str]]] = None,
    max_rejects: int = 0,
    wap: Union[bool, str] = False,
    on_schema_change: str = "fail",
    sides: Optional[Mapping[str, Any]] = None,
    force: bool = False,
    sign_key: Optional[PathLike] = None,
    lineage: Optional[str] = None,
    lineage_namespace: Optional[str] = None,
    limits: Optional[Limits] = None,
) -> BackfillResult:
    """The daily partitions ``column=start`` to ``column=end`` (both
    included, ``YYYY-MM-DD``) of the dataset ``input``, ``jobs`` at a time
    (``idem backfill``). Hours (``date=D/hour=HH``): ``start`` and ``end``
    as ``2026-10-01T00``, or ``every="1h"``; ``each={"region": ["eu",
    "us"]}`` adds a level below every date or hour. Each slice's ``date``
    is its date and ``slice`` its slice id. One failing slice does not stop the others: the
    result lists every slice (``failed`` counts them, ``ok`` is True when
    none failed; a date without input fails unless ``skip_missing``).
    Ctrl-C lets the running slices finish, starts no more, and raises
    KeyboardInterrupt; running the backfill again finds what committed.
    With ``lineage``, each slice's events name the backfill as their
    parent run.
    """
    if isinstance(wap, str):
        raise InputError("a backfill writes one branch per slice: say wap=True (branches wap/<slice id>), not a name")
    publish = _publish(
        mode, key, params, None, batch_rows, expect, audit_module, audit_params, sign_key,
        lineage, lineage_namespace, schema=schema, max_rejects=max_rejects, wap=wap,
        on_schema_change=on_schema_change, sides=sides,
    )
    args = {
        "module": _text(module, "module"),
        "input": _text(input, "input"),
        "table": _text(table, "table"),
        "start": start,
        "end": end,
        "column": column,
        "every": every,
        "hour_column": hour_column,
        "each": [f"{c}={v if isinstance(v, str) else ','.join(v)}" for c, v in (each or {}).items()],
        "jobs": _count(jobs, "jobs", 64, 1),
        "skip_missing": bool(skip_missing),
        "force": bool(force),
        "publish": publish,
    }
    return _idem.backfill(args, limits)


def verify(
    manifest: str,
    *,
    limits: Optional[Limits] = None,
    allow_engine: bool = False,
    keys: Optional[Sequence[PathLike]] = None,
) -> Verification:
    """Re-run a stored manifest (path or URL, or its signed envelope) and
    compare its output digest (``idem verify``); with ``keys`` (Ed25519
    public key PEM files) a signature by one of them is required. A
    mismatch is a result (``matched`` is False, with ``reason``), not an
    exception."""
    return _idem.verify(_text(manifest, "manifest"), limits, bool(allow_engine), _strings(keys, "keys"))


def audit(
    table: str,
    *,
    slice: Optional[str] = None,
    replay: bool = False,
    limits: Optional[Limits] = None,
    keys: Optional[Sequence[PathLike]] = None,
) -> AuditReport:
    """Prove ``table`` slice by slice, from its commits to the rows it holds
    (``idem audit``); with ``replay``, re-run every manifest too; with
    ``keys`` (Ed25519 public key PEM files), every manifest must be signed
    by one of them. A failed proof is a result (``proven`` is False), not
    an exception."""
    return _idem.audit(_text(table, "table"), slice, bool(replay), limits, _strings(keys, "keys"))


def show(run: str, *, table: Optional[str] = None) -> StoredRun:
    """A stored run (``idem show``): a manifest file, ``TABLE#SLICE``, or a
    run key or manifest digest (8+ hex digits) with ``table``.
    ``json.loads(result.json)`` is the manifest exactly as stored."""
    return _idem.show(_text(run, "run"), _maybe_text(table, "table"))


def log(table: str, *, since_ms: int = 0) -> list:
    """The runs recorded for ``table`` (``idem log``), as :class:`LogEntry`,
    oldest first; with ``since_ms`` (Unix milliseconds) only those that
    ended then or later (older entries are listed, never read)."""
    return _idem.log(_text(table, "table"), _count(since_ms, "since_ms"))


def pipeline_run(
    file: PathLike,
    logical_date: str,
    *,
    stage: Optional[str] = None,
    limits: Optional[Limits] = None,
    lineage: Optional[str] = None,
    lineage_namespace: Optional[str] = None,
) -> PipelineResult:
    """The stages of the pipeline file ``file`` (an ``idem.toml``) for
    ``logical_date`` (a date; for an hourly pipeline, whose first stage's
    partition is ``date/hour``, an hour: ``2026-10-01T07`` or Airflow's
    ``{{ ts }}`` on the hour), or only ``stage`` (``idem pipeline run``), each pinned
    to what the stage before it committed. A stage that fails is a result
    (``ok`` is False; ``result.raise_for_failure()`` raises its exception,
    a :class:`StorageError` first, the failure a retry can fix); a
    pipeline file that cannot be used raises at once. ``lineage`` (and
    ``lineage_namespace``) override the file's ``[pipeline] lineage``; the
    stages' events name the pipeline run as their parent."""
    _publish(None, None, None, None, 8192, None, None, None, None, lineage, lineage_namespace)
    return _idem.pipeline_run(_text(file, "file"), logical_date, stage, limits, lineage, lineage_namespace)
