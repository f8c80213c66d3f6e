"""Airflow DAG: the idem pipeline of an idem.toml, once per logical date.

One task per stage, each after the stage it reads (`from`), each an
`idem.airflow.IdemPipelineOperator`, which calls

    idem.pipeline_run(IDEM_TOML, DAY, stage=STAGE)

in the task's own process through the `idem` Python package (the library
the `idem` command is built on; no subprocess). DAY is the run's data
interval start ({{ data_interval_start | ds }}): the day that has ended,
with a daily data-interval timetable.

Every stage is idempotent (its run key pins the module, the input slice and
the upstream table version), so Airflow may retry or rerun any task, or
clear a whole DAG run, without duplicating a row: a rerun that finds its
work committed is a memo hit and commits nothing.

idem's exception decides between retry and fail, and the task's error is
idem's own message:
  idem.StorageError   a store or commit failed: transient, retried with
                      exponential backoff (1 minute doubling, up to 30, 3 times)
  idem.CheckFailed    a check failed (expectation, audit module): fail, no retry
  idem.InputError     bad input or pipeline file (malformed Parquet, a missing
                      partition): fail, no retry
  idem.GuestError     the sandbox refused the module or the guest failed: fail
A worker killed mid-run (SIGKILL, OOM) fails the task as any crash does, and
Airflow retries it: nothing half-done is ever visible, the retry finishes it.

Configure with environment variables (or edit the constants):
  IDEM_PIPELINE            the pipeline file (default: idem.toml beside this file)
  IDEM_RETRY_DELAY_SECONDS the first retry's delay (default 60)
"""

from __future__ import annotations

import os
import tomllib
from datetime import datetime, timedelta

from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from idem.airflow import IdemPipelineOperator

PIPELINE = os.environ.get(
    "IDEM_PIPELINE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "idem.toml")
)
def _retry_delay() -> timedelta:
    """IDEM_RETRY_DELAY_SECONDS, or a minute when unset or not a number >= 0."""
    try:
        return timedelta(seconds=max(0.0, float(os.environ.get("IDEM_RETRY_DELAY_SECONDS", "60"))))
    except ValueError:
        return timedelta(minutes=1)


RETRY_DELAY = _retry_delay()


def stages(path: str) -> list[tuple[str, str | None]]:
    """(stage, the stage it reads from) in run order; one task for the
    whole pipeline when the file cannot be read (it then fails with idem's
    own message)."""
    try:
        with open(path, "rb") as f:
            return [(s["name"], s.get("from")) for s in tomllib.load(f).get("stage", [])]
    except (OSError, tomllib.TOMLDecodeError, KeyError):
        return [("_whole_pipeline", None)]


with DAG(
    dag_id="idem_pipeline",
    start_date=datetime(2026, 10, 1),
    # A data interval per day: the run for day D starts once D is over, and
    # processes D (its data_interval_start), not the day just begun. (Airflow
    # 3's plain "@daily" would trigger at D 00:00 with logical date D.)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    catchup=False,
    max_active_runs=4,
    default_args={"retry_delay": RETRY_DELAY},
    doc_md=__doc__,
) as dag:
    tasks = {}
    for name, upstream in stages(PIPELINE):
        tasks[name] = IdemPipelineOperator(
            task_id=name,
            pipeline=PIPELINE,
            stage=None if name == "_whole_pipeline" else name,
        )
        # A stage waits for the stage it reads, not for unrelated ones.
        if upstream in tasks:
            tasks[upstream] >> tasks[name]
