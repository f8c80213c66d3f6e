"""The Airflow test's hook around `idem.pipeline_run` (on PYTHONPATH, so
Python imports it at start-up): logs every call to $CALLS, and makes the
first call of stage $FAIL_STAGE for date $FAIL_DATE fail inside its
commit with a storage error (idem's own fault hook,
IDEM_FAULT_FAIL=commit-read: the output's data files are written, the
table cannot be read to commit them), as a store that fails for a moment
would. Every call runs the real idem."""

import os


def _wrap():
    import idem

    real = idem.pipeline_run

    def pipeline_run(file, logical_date, *, stage=None, limits=None):
        with open(os.environ["CALLS"], "a") as f:
            f.write(f"{logical_date} {stage}\n")
        first = (logical_date, stage) == (os.environ["FAIL_DATE"], os.environ["FAIL_STAGE"])
        if first:
            try:
                os.mkdir(os.environ["MARK"])
            except FileExistsError:
                first = False
        if not first:
            return real(file, logical_date, stage=stage, limits=limits)
        os.environ["IDEM_FAULT_FAIL"] = "commit-read"
        try:
            return real(file, logical_date, stage=stage, limits=limits)
        finally:
            del os.environ["IDEM_FAULT_FAIL"]

    idem.pipeline_run = pipeline_run


if os.environ.get("CALLS"):
    _wrap()
