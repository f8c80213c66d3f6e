"""Airflow DAG: the idem pipeline of an idem.toml, once per logical date.

One task per stage, in the file's order, each running

    idem pipeline run IDEM_TOML --logical-date {{ ds }} --stage STAGE --json

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


def stage_names(path: str) -> list[str]:
    """The stages of the pipeline file, in run order."""
    try:
        with open(path, "rb") as f:
            return [s["name"] for s in tomllib.load(f).get("stage", [])]
    except (OSError, tomllib.TOMLDecodeError, KeyError):
        # A broken file still yields a DAG whose one task shows idem's error.
        return ["pipeline"]


def run_stage(stage: str, ds: str) -> dict:
    """Run one stage for the logical date; raise as the exit code says."""
    cmd = [IDEM, "pipeline", "run", PIPELINE, "--logical-date", ds, "--json", "-q"]
    if stage != "pipeline":
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
    schedule="@daily",
    catchup=False,
    max_active_runs=4,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=1)},
    doc_md=__doc__,
) as dag:
    previous = None
    for name in stage_names(PIPELINE):

        @task(task_id=name)
        def stage_task(ds: str | None = None, _name: str = name) -> dict:
            return run_stage(_name, ds)

        t = stage_task()
        if previous is not None:
            previous >> t
        previous = t
