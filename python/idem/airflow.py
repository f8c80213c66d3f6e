"""An Airflow operator for idem pipelines: one stage (or every stage) of an
``idem.toml`` for the run's logical date, in the task's own process.

    from idem.airflow import IdemPipelineOperator

    IdemPipelineOperator(task_id="silver", pipeline="/dags/idem.toml", stage="silver")

The date is the run's data interval start (``{{ data_interval_start | ds }}``:
with a data-interval timetable, the day that has just ended), or
``logical_date`` (templated: ``"{{ data_interval_start | ts }}"`` for an
hourly pipeline). A run without either fails without retry, saying so.

idem's exception decides between retry and fail, and the Airflow exception
carries idem's own message:

- :class:`idem.StorageError` (a store or commit failed: transient) retries,
  with exponential backoff: by default 3 retries, 1 minute doubling up to
  30 minutes (any of ``retries``, ``retry_delay``,
  ``retry_exponential_backoff`` and ``max_retry_delay`` may be given);
- every other :class:`idem.IdemError` (a failed check, bad input, a guest
  the sandbox refused or that failed) fails the task without retry.

Every stage is idempotent, so retries, reruns and cleared DAG runs never
duplicate a row. The task returns (to XCom) the date and each stage's
outcome and version.

This module imports Airflow (3.x, ``airflow.sdk``); ``import idem`` does not.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

#: The retry policy a task gets unless it says otherwise.
DEFAULT_RETRIES = 3
DEFAULT_RETRY_DELAY = timedelta(minutes=1)
DEFAULT_MAX_RETRY_DELAY = timedelta(minutes=30)


class IdemPipelineOperator(BaseOperator):
    """Run ``stage`` (``None``: every stage, in order) of the pipeline file
    ``pipeline`` for the run's logical date (see the module's note)."""

    template_fields = ("pipeline", "logical_date")

    def __init__(
        self,
        *,
        pipeline: str,
        stage: Optional[str] = None,
        logical_date: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        # Ours unless the task or the DAG's default_args say otherwise.
        given = kwargs.get("default_args") or {}
        for key, value in (
            ("retries", DEFAULT_RETRIES),
            ("retry_delay", DEFAULT_RETRY_DELAY),
            # A multiplier in Airflow 3.3 (True meant doubling before).
            ("retry_exponential_backoff", 2.0),
            ("max_retry_delay", DEFAULT_MAX_RETRY_DELAY),
        ):
            if key not in kwargs and key not in given:
                kwargs[key] = value
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.stage = stage
        self.logical_date = logical_date

    def execute(self, context: Any) -> dict:
        # Through the package's attribute, so a wrapped pipeline_run is used.
        import idem

        given = self.logical_date
        # A template over a missing interval renders "None".
        if given in ("", "None"):
            given = None
        when = given or _day_of(context.get("data_interval_start"), context.get("dag"))
        if not when:
            raise AirflowFailException(
                "this DAG run has no data interval (a manual run without a logical date): "
                "trigger it with a logical date, the day to process, or give logical_date="
            )
        try:
            result = idem.pipeline_run(self.pipeline, when, stage=self.stage)
            for s in result.stages:
                print(f"{s.stage} {s.slice}: {s.outcome} (version {s.version}, {s.rows_out} rows)")
            result.raise_for_failure()
        except idem.StorageError as e:
            raise AirflowException(f"idem {e.kind} failure (exit {e.exit_code}), retrying is safe: {e}") from e
        except idem.IdemError as e:
            raise AirflowFailException(f"idem {e.kind} failure (exit {e.exit_code}): {e}") from e
        except (AirflowException, AirflowFailException):
            raise
        except Exception as e:  # not idem's verdict: a bug, not worth a retry
            raise AirflowFailException(f"idem failed unexpectedly: {e!r}") from e
        return {
            "date": when,
            "stages": {s.stage: {"status": s.outcome, "version": s.version} for s in result.stages},
        }


def _day_of(start: Any, dag: Any) -> Optional[str]:
    """The date of a data interval start (a datetime) in the DAG's
    timezone (Airflow hands it over in UTC: a Europe/Berlin day starts at
    22:00 UTC the day before), or None."""
    if start is None:
        return None
    tz = getattr(dag, "timezone", None)
    if tz is not None and hasattr(start, "in_timezone"):
        start = start.in_timezone(tz)
    return start.strftime("%Y-%m-%d")
