"""idem's slices as Apache Spark tasks.

The driver plans the slices, publishes the module beside the table once
(:func:`idem.publish_module`), and runs one task per slice; each task is an
ordinary idempotent :func:`idem.run` on an executor, naming the module by
its digest (``sha256:<hex>``, read back from the table's ``_idem/modules/``
and checked; the bytes never travel inside the task closure). Each task
commits its own slice through idem's commit protocol, so the table and its
object store are the only coordination: a retried task, a speculative twin
and the tasks of a lost executor run the same run again, and find it
committed (a memo hit, or an output that is unchanged) instead of writing
it twice.

What comes back is a DataFrame with a row per slice (the attempt whose
result Spark kept) and, in ``attempts``, every attempt that logged an
outcome in the table's run log, so that a twin that committed and one that
found the slice unchanged are both visible.

Executors need the ``idem`` package in the Python they run
(``spark.pyspark.python``, an environment shipped with ``--archives``, or a
cluster library) and access to the table's store (for S3: the ``AWS_*``
variables, e.g. through ``spark.executorEnv.*``).
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import time
import uuid
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Tuple

import idem
from idem import InputError, Limits, StorageError

__all__ = ["run_slices", "backfill", "OUTCOME_SCHEMA"]

# The slice keywords a slice spec may hold (those of idem.run), and the
# per-slice logical date.
_SLICE_KEYS = (
    "input",
    "partition",
    "files",
    "slice_id",
    "table_version",
    "iceberg_snapshot",
    "table_slice",
    "delta_version",
    "delta_slice",
    "logical_date",
)

# The run options every slice shares (keywords of idem.run).
_RUN_KEYS = (
    "mode",
    "key",
    "params",
    "batch_rows",
    "expect",
    "audit_module",
    "audit_params",
    "force",
    "sign_key",
    "lineage",
    "lineage_namespace",
)

OUTCOME_SCHEMA = (
    "slice STRING, outcome STRING, version BIGINT, run_key STRING, output_digest STRING, "
    "rows BIGINT, seconds DOUBLE, error_kind STRING, error STRING, attempt INT, "
    "executor STRING, manifest STRING, attempts ARRAY<STRUCT<attempt: INT, outcome: STRING, version: BIGINT>>"
)
"""The outcome DataFrame's columns: ``outcome`` is ``committed``,
``unchanged``, ``memo``, ``up-to-date``, ``missing`` (a date without input,
``error_kind`` ``input``) or ``failed`` (then ``error_kind`` is the CLI's kind:
``check``, ``input``, ``guest`` or ``storage``, and ``error`` its message);
``attempt`` is the Spark attempt number whose result was kept;
``attempts`` lists every attempt the run log recorded for the slice."""


def _slice_name(spec: Mapping[str, Any]) -> str:
    """How a slice is named in the outcomes before it ran (its id once it
    has: the partition, the slice id, or the files)."""
    for k in ("partition", "slice_id", "table_slice", "delta_slice"):
        if spec.get(k):
            return str(spec[k])
    if spec.get("files"):
        return ",".join(os.path.basename(os.fspath(f)) for f in spec["files"])
    return str(spec.get("input", "?"))


def _check_specs(slices: Sequence[Mapping[str, Any]]) -> List[dict]:
    if isinstance(slices, (str, bytes)) or not isinstance(slices, Sequence):
        raise InputError("slices takes a list of slice specs (dicts of idem.run's slice keywords)")
    if not slices:
        raise InputError("slices is empty: give at least one slice spec")
    out = []
    for i, s in enumerate(slices):
        if not isinstance(s, Mapping):
            raise InputError(f"slice {i} is a {type(s).__name__}, not a dict of slice keywords")
        if s.get("next"):
            raise InputError(
                f"slice {i} is a next=True range: its objects depend on when the task runs, so a retried "
                "or speculative task would take another range; run append-only sources with idem.run in order"
            )
        unknown = sorted(set(s) - set(_SLICE_KEYS) - {"next"})
        if unknown:
            raise InputError(f"slice {i} has keywords idem.run's slices do not take: {unknown} (known: {list(_SLICE_KEYS)})")
        out.append(dict(s))
    return out


def _is_digest(module: Any) -> bool:
    """Whether ``module`` names a published module (checked: a malformed
    ``sha256:`` name is refused here, not in every task)."""
    if not (isinstance(module, str) and module.startswith("sha256:")):
        return False
    if len(module) != 71 or any(c not in "0123456789abcdef" for c in module[7:]):
        raise InputError(f"module {module!r} must be sha256: and 64 lowercase hex digits (what idem.publish_module returned)")
    return True


def _module_ref(module: Any, table: str, limits: Optional[Limits]) -> str:
    """The module as tasks name it: its digest, published beside the table
    (a ``sha256:`` name is used as it is; each task checks it is there)."""
    if _is_digest(module):
        return module
    return idem.publish_module(module, table, limits=limits)


_LIMIT_FIELDS = (
    "max_memory_mb",
    "max_output_mb",
    "max_output_rows",
    "max_output_batch_rows",
    "max_input_batch_mb",
    "deadline_ms",
    "fuel",
    "max_module_mb",
    "compile_deadline_ms",
    "cache_dir",
)


def _limit_fields(limits: Optional[Limits]) -> Optional[dict]:
    """Limits as plain values, to travel to the executors (which make their
    own :class:`idem.Limits` of them; ``cache_dir`` is then a folder on
    each executor)."""
    if limits is None:
        return None
    if not isinstance(limits, Limits):
        raise InputError(f"limits must be an idem.Limits, not {type(limits).__name__}")
    return {k: getattr(limits, k) for k in _LIMIT_FIELDS}


def _task(
    module: str,
    table: str,
    options: dict,
    limits: Optional[dict],
    origin: str,
    max_failures: int,
):
    """The function each task runs over its partition: one (index, slice
    spec) pair (the specs travel as the RDD's data, not in the closure)."""

    def run(rows: Iterator[Tuple[int, dict]]) -> Iterator[tuple]:
        for index, spec in rows:
            yield (index,) + _run_one(module, table, spec, options, limits, f"{origin}:{index}", max_failures)

    return run


def _run_one(
    module: str,
    table: str,
    spec: dict,
    options: dict,
    limits: Optional[dict],
    origin: str,
    max_failures: int,
) -> tuple:
    """One slice's run in a task: its outcome row, or a raised
    :class:`idem.StorageError` for Spark to retry."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    # The executor's address when Spark was given one (SPARK_LOCAL_IP),
    # else its host name; and the Python worker's pid.
    executor = f"{os.environ.get('SPARK_LOCAL_IP') or socket.gethostname()}:{os.getpid()}"
    label = f"{origin}:{attempt}:{executor}"
    started = time.monotonic()
    try:
        own = None if limits is None else Limits(**limits)
        r = idem.run(module, table, **spec, **options, origin=label, limits=own)
    except StorageError as e:
        # Worth a retry (an unreachable store, a lost race): Spark's own
        # task retry runs it again, elsewhere if need be, until its
        # last attempt, which reports it.
        if attempt + 1 < max_failures:
            raise
        return _failed(spec, e, started, attempt, executor)
    except idem.IdemError as e:
        return _failed(spec, e, started, attempt, executor)
    return (
        r.slice or _slice_name(spec),
        r.outcome,
        r.version,
        r.run_key,
        r.output_digest,
        r.rows_out,
        time.monotonic() - started,
        None,
        None,
        attempt,
        executor,
        r.manifest,
    )


def _failed(spec: Mapping[str, Any], e: "idem.IdemError", started: float, attempt: int, executor: str) -> tuple:
    # A date without input is `missing` (as in idem.backfill's results).
    outcome = "missing" if isinstance(e, idem.PartitionMissing) else "failed"
    return (_slice_name(spec), outcome, None, None, None, 0, time.monotonic() - started,
            e.kind, str(e), attempt, executor, None)


def _attempts(table: str, origin: str, since_ms: int) -> dict:
    """Every attempt of this job the table's run log recorded, by task
    index: (attempt, outcome, version), in the order they ended."""
    out: dict = {}
    try:
        entries = idem.log(table, since_ms=since_ms)
    except idem.IdemError:
        return out
    for e in entries:
        if not e.origin or not e.origin.startswith(origin + ":"):
            continue
        parts = e.origin[len(origin) + 1 :].split(":")
        try:
            index, attempt = int(parts[0]), int(parts[1])
        except (IndexError, ValueError):
            continue
        out.setdefault(index, []).append((attempt, e.outcome, e.version))
    return out


def run_slices(
    spark: Any,
    module: Any,
    table: str,
    slices: Sequence[Mapping[str, Any]],
    *,
    mode: Optional[str] = None,
    key: Any = None,
    params: Any = None,
    batch_rows: int = 8192,
    expect: Optional[Sequence[str]] = None,
    audit_module: Any = None,
    audit_params: Any = None,
    force: bool = False,
    sign_key: Any = None,
    lineage: Optional[str] = None,
    lineage_namespace: Optional[str] = None,
    limits: Optional[Limits] = None,
    job_name: Optional[str] = None,
) -> Any:
    """Run ``slices`` (each a dict of :func:`idem.run`'s slice keywords:
    ``input``, ``partition``, ``files``, ``delta_version``, ...,
    ``logical_date``) through ``module`` into ``table`` as Spark tasks, one
    slice per task, and return the outcome DataFrame (:data:`OUTCOME_SCHEMA`),
    already computed: reading it twice runs nothing twice.

    ``module`` is a path or URL (published beside ``table`` by the driver
    first) or a ``sha256:<hex>`` digest already published. The run options
    are :func:`idem.run`'s, the same for every slice. A slice that fails is
    a row (``outcome`` ``failed``); a :class:`idem.StorageError` is raised
    for Spark to retry the task until its last attempt
    (``spark.task.maxFailures``), which reports it as a row.

    With ``lineage`` (a receiver every executor reaches: an HTTP endpoint,
    or a folder they share), every task's run emits its OpenLineage events
    there, each naming this job (a run id made here) as its parent; the
    retries and twins of a slice share its run id.
    """
    specs = [_absolute_paths(spec) for spec in _check_specs(slices)]
    table = _absolute(idem._text(table, "table"))
    # Checked on the driver, as idem.run checks them, before any task runs.
    idem._publish(
        mode, key, params, None, batch_rows, expect, audit_module, audit_params, sign_key, lineage, lineage_namespace
    )
    # Checked here, not by every task.
    if lineage is not None and not lineage.startswith(("file://", "http://", "https://")):
        raise InputError(f"lineage must be file:///DIR or http(s)://HOST/api/v1/lineage, not {lineage!r}")
    limit_fields = _limit_fields(limits)
    if job_name is not None and (not isinstance(job_name, str) or ":" in job_name or len(job_name) > 128):
        raise InputError(f"job_name must be text without ':' of at most 128 characters, not {job_name!r}")
    _is_digest(module), _is_digest(audit_module)
    sc = _context(spark)
    # The modules travel by digest (the audit module too).
    ref = _module_ref(module, table, limits)
    if audit_module is not None:
        audit_module = _module_ref(audit_module, table, limits)
    options = {
        "mode": mode,
        "key": key,
        "params": params,
        "batch_rows": batch_rows,
        "expect": expect,
        "audit_module": audit_module,
        "audit_params": audit_params,
        "force": force,
        # A path every executor reads (a secret mounted on each).
        "sign_key": None if sign_key is None else _absolute(idem._text(sign_key, "sign_key")),
        "lineage": lineage,
        "lineage_namespace": lineage_namespace,
    }
    if lineage is not None:
        # The job is the parent run of every task's run.
        options["_lineage_parent"] = (str(uuid.uuid4()), f"spark {job_name or 'job'} {table}")
    # Every attempt labels its run-log entry with the job (unique per call,
    # named by job_name) and its task.
    origin = f"spark:{sc.applicationId}:{job_name or 'job'}-{uuid.uuid4().hex[:12]}"
    since_ms = int(time.time() * 1000) - 600_000
    task = _task(ref, table, options, limit_fields, origin, _max_failures(sc))
    sc.setJobDescription(f"idem: {len(specs)} slices of {table}")
    # One element per partition (parallelize cuts n elements into n
    # consecutive ranges of one), and so one slice per task.
    rows = sc.parallelize(list(enumerate(specs)), len(specs)).mapPartitions(task).collect()
    # Read once the job has ended: a twin Spark is killing may still log
    # within spark.python.task.killTimeout (2 s), after this read.
    attempts = _attempts(table, origin, since_ms)
    full = [row[1:] + ([_attempt_row(a) for a in attempts.get(row[0], [])],) for row in sorted(rows)]
    return spark.createDataFrame(full, OUTCOME_SCHEMA)


def _context(spark: Any) -> Any:
    """The SparkContext (a classic session: tasks are RDD partitions)."""
    try:
        return spark.sparkContext
    except Exception as e:  # Spark Connect has no SparkContext
        raise InputError(
            f"idem.spark needs a classic SparkSession (it runs slices as RDD tasks), not {type(spark).__name__}: {e}"
        ) from None


def _max_failures(sc: Any) -> int:
    """How many attempts Spark gives a task: local[N] gives 1 (local[N,F]
    gives F); a cluster spark.task.maxFailures (default 4)."""
    master = sc.master or ""
    if master.startswith("local"):
        inside = master[master.find("[") + 1 : master.rfind("]")] if "[" in master else ""
        parts = inside.split(",")
        return int(parts[1]) if len(parts) == 2 and parts[1].strip().isdigit() else 1
    return int(sc.getConf().get("spark.task.maxFailures", "4"))


def _absolute(location: str) -> str:
    """A local path made absolute on the driver (executors resolve relative
    paths against their own working folders); URLs as they are."""
    if "://" in location or location.startswith("sha256:"):
        return location
    return os.path.abspath(location)


def _absolute_paths(spec: dict) -> dict:
    out = dict(spec)
    if isinstance(out.get("input"), (str, os.PathLike)):
        out["input"] = _absolute(os.fspath(out["input"]))
    if out.get("files") is not None and not isinstance(out["files"], (str, bytes)):
        out["files"] = [_absolute(os.fspath(f)) for f in out["files"]]
    return out


def _attempt_row(a: Tuple[int, str, Optional[int]]) -> dict:
    return {"attempt": a[0], "outcome": a[1], "version": a[2]}


def backfill(
    spark: Any,
    module: Any,
    input: str,
    table: str,
    start: str,
    end: str,
    *,
    column: str = "date",
    **options: Any,
) -> Any:
    """The daily partitions ``column=start`` to ``column=end`` (both
    included) of the dataset ``input``, one Spark task each, with the
    same slices, run keys and commits as ``idem backfill`` (each date's
    logical date is the date). Returns :func:`run_slices`' DataFrame."""
    unknown = sorted(set(options) - set(_RUN_KEYS) - {"limits", "job_name"})
    if unknown:
        raise InputError(
            f"backfill does not take {unknown} (the cluster runs one task per slice: its executors "
            f"and cores set how many at once); it takes {sorted(_RUN_KEYS) + ['job_name', 'limits']}"
        )
    return run_slices(
        spark,
        module,
        table,
        [{"input": input, "partition": f"{column}={d}", "logical_date": d} for d in _dates(start, end)],
        **options,
    )


def _dates(start: str, end: str) -> List[str]:
    try:
        a, b = _dt.date.fromisoformat(start), _dt.date.fromisoformat(end)
    except (TypeError, ValueError) as e:
        raise InputError(f"start and end must be dates YYYY-MM-DD: {e}") from None
    if b < a:
        raise InputError(f"end {end} is before start {start}")
    return [(a + _dt.timedelta(days=i)).isoformat() for i in range((b - a).days + 1)]
