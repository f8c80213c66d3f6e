"""Airflow DAG: the idem pipeline of an idem.toml, once per logical date.

One task per stage, each after the stage it reads (`from`), each calling

    idem.pipeline_run(IDEM_TOML, DAY, stage=STAGE)

in the task's own process through the `idem` Python package (the library
the `idem` command is built on; no subprocess). DAY is the run's data
interval start ({{ data_interval_start | ds }}): the day that has ended,
with a daily data-interval timetable.

Every stage is idempotent (its run key pins the module, the input slice and
the upstream table version), so Airflow may retry or rerun any task, or
clear a whole DAG run, without duplicating a row: a rerun that finds its
work committed is a memo hit and commits nothing.

idem's exception decides between retry and fail:
  idem.StorageError   a store or commit failed: transient, retry
  idem.CheckFailed    a check failed (expectation, audit module): fail, no retry
  idem.InputError     bad input or pipeline file (malformed Parquet, a missing
                      partition): fail, no retry
  idem.GuestError     the sandbox refused the module or the guest failed: fail
A worker killed mid-run (SIGKILL, OOM) fails the task as any crash does, and
Airflow retries it: nothing half-done is ever visible, the retry finishes it.

Configure with an environment variable (or edit the constant):
  IDEM_PIPELINE  the pipeline file (default: idem.toml beside this file)
"""

from __future__ import annotations

import os
import tomllib
from datetime import datetime, timedelta

from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.timetables.interval import CronDataIntervalTimetable

PIPELINE = os.environ.get(
    "IDEM_PIPELINE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "idem.toml")
)


# The task that stands for the whole pipeline when the file cannot be read
# (it then fails with idem's own error message).
WHOLE = "_whole_pipeline"


def stages(path: str) -> list[tuple[str, str | None]]:
    """(stage, the stage it reads from) in run order."""
    try:
        with open(path, "rb") as f:
            return [(s["name"], s.get("from")) for s in tomllib.load(f).get("stage", [])]
    except (OSError, tomllib.TOMLDecodeError, KeyError):
        return [(WHOLE, None)]


def run_stage(stage: str, day: str | None) -> dict:
    """Run one stage for the day; raise as idem's exception says."""
    # Imported here: the scheduler parses this file without needing idem.
    import idem

    if not day:
        raise AirflowFailException(
            "this DAG run has no data interval (a manual run without a logical date): "
            "trigger it with a logical date, the day to process"
        )
    try:
        result = idem.pipeline_run(PIPELINE, day, stage=None if stage == WHOLE else stage)
        for s in result.stages:
            print(f"{s.stage} {s.slice}: {s.outcome} (version {s.version}, {s.rows_out} rows)")
        result.raise_for_failure()
    except idem.StorageError as e:
        raise AirflowException(f"idem {e.kind} failure (exit {e.exit_code}), retrying is safe: {e}") from e
    except idem.IdemError as e:
        raise AirflowFailException(f"idem {e.kind} failure (exit {e.exit_code}): {e}") from e
    return {
        "date": day,
        "stages": {s.stage: {"status": s.outcome, "version": s.version} for s in result.stages},
    }


with DAG(
    dag_id="idem_pipeline",
    start_date=datetime(2026, 10, 1),
    # A data interval per day: the run for day D starts once D is over, and
    # processes D (its data_interval_start), not the day just begun. (Airflow
    # 3's plain "@daily" would trigger at D 00:00 with logical date D.)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    catchup=False,
    max_active_runs=4,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=1)},
    doc_md=__doc__,
) as dag:
    tasks = {}
    for name, upstream in stages(PIPELINE):

        @task(task_id=name)
        def stage_task(data_interval_start=None, _name: str = name) -> dict:
            day = data_interval_start.strftime("%Y-%m-%d") if data_interval_start else None
            return run_stage(_name, day)

        tasks[name] = stage_task()
        # A stage waits for the stage it reads, not for unrelated ones.
        if upstream in tasks:
            tasks[upstream] >> tasks[name]
