"""Airflow DAG: the idem pipeline of an idem.toml, once per logical date.

One task per stage, each after the stage it reads (`from`), running

    idem pipeline run IDEM_TOML --logical-date DAY --stage STAGE --json

DAY is the run's data interval start ({{ data_interval_start | ds }}): the
day that has ended, with a daily data-interval timetable.

Every stage is idempotent (its run key pins the module, the input slice and
the upstream table version), so Airflow may retry or rerun any task, or
clear a whole DAG run, without duplicating a row: a rerun that finds its
work committed is a memo hit and commits nothing.

idem's exit code decides between retry and fail:
  0    ok (committed, unchanged or memo)
  4    a store or commit failed: transient, retry
  1    a check failed (expectation, audit module): fail, no retry
  2    bad input or usage (malformed Parquet, a missing partition): fail
  3    the sandbox refused the module or the guest failed: fail
  else killed (SIGKILL, OOM) or interrupted: retry; nothing half-done
       is ever visible, the retry finishes it

Configure with environment variables (or edit the constants):
  IDEM_BIN       the idem binary (default: idem on PATH)
  IDEM_PIPELINE  the pipeline file (default: idem.toml beside this file)
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from datetime import datetime, timedelta

from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.timetables.interval import CronDataIntervalTimetable

IDEM = os.environ.get("IDEM_BIN", "idem")
PIPELINE = os.environ.get(
    "IDEM_PIPELINE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "idem.toml")
)
# Exit codes that no retry can fix.
NO_RETRY = {
    1: "a check failed (expectation or audit module): nothing was published",
    2: "bad input or usage: fix the input or the pipeline file",
    3: "the sandbox refused the module or the guest failed: fix the transform",
}


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
    """Run one stage for the day; raise as the exit code says."""
    if not day:
        raise AirflowFailException(
            "this DAG run has no data interval (a manual run without a logical date): "
            "trigger it with a logical date, the day to process"
        )
    cmd = [IDEM, "pipeline", "run", PIPELINE, "--logical-date", day, "--json", "-q"]
    if stage != WHOLE:
        cmd += ["--stage", stage]
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(p.stdout)
    print(p.stderr)
    if p.returncode == 0:
        result = json.loads(p.stdout)
        return {
            s["stage"]: {"status": s["status"], "version": s["version"]}
            for d in result["dates"]
            for s in d["stages"]
        }
    if p.returncode in NO_RETRY:
        raise AirflowFailException(f"idem exit {p.returncode}: {NO_RETRY[p.returncode]}")
    raise AirflowException(f"idem exit {p.returncode}: transient or killed; retrying is safe")


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
