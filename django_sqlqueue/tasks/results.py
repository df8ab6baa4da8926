"""How a job's row reads as a django.tasks `TaskResult`: pure functions, no framework import.

The framework knows one run of a task; a job may be requeued and run again. A result
describes the job's current run: the last `attempts` spent entries of its history (requeue
resets `attempts` to 0 and keeps the history). An attempt handed back at shutdown
("released") was not spent and is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from ..attempts import WORKER_LOST, AttemptOutcome
from ..rows import to_datetime
from ..states import FINISHED, Status, status_after_failure

#: Framework status (`TaskResultStatus` values) of each job status.
FRAMEWORK_STATUS: Mapping[str, str] = {
    Status.WAITING: "READY",  # waits for other jobs (a workflow): not started yet
    Status.PENDING: "READY",
    Status.FAILED: "READY",  # a retry is scheduled
    Status.RUNNING: "RUNNING",
    Status.COMPLETED: "SUCCESSFUL",
    Status.DEAD: "FAILED",
    Status.CANCELLED: "FAILED",
}

#: Exception class paths of entries written before attempts recorded their exception.
LEGACY_OUTCOME_EXCEPTIONS: Mapping[str, str] = {
    AttemptOutcome.LOST.value: WORKER_LOST,
    AttemptOutcome.TIMEOUT.value: "django_sqlqueue.exceptions.JobTimeout",
    AttemptOutcome.RETRY.value: "django_sqlqueue.exceptions.Retry",
    AttemptOutcome.DISCARD.value: "django_sqlqueue.exceptions.Discard",
    AttemptOutcome.UNKNOWN.value: "django_sqlqueue.exceptions.UnknownJobError",
    AttemptOutcome.BAD_RESULT.value: "builtins.TypeError",
}


@dataclass(frozen=True)
class ErrorFields:
    exception_class_path: str
    traceback: str


@dataclass(frozen=True)
class ResultFields:
    """Everything a TaskResult holds besides its task, id, arguments and backend."""

    status: str
    enqueued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    last_attempted_at: datetime | None
    errors: list[ErrorFields]
    worker_ids: list[str]
    return_value: Any = None


def exception_class_path(entry: Mapping[str, Any]) -> str:
    """The dotted path of the exception that ended a failed attempt, as the worker recorded it.

    Entries written before the path was recorded fall back to what their outcome implies.
    """
    recorded = entry.get("exception")
    if recorded:
        return str(recorded)
    return LEGACY_OUTCOME_EXCEPTIONS.get(str(entry.get("outcome") or ""), "builtins.Exception")


def current_run(history: Sequence[Mapping[str, Any]], spent: int) -> list[Mapping[str, Any]]:
    """The last `spent` entries that spent an attempt, oldest first."""
    released = AttemptOutcome.RELEASED.value
    entries = [entry for entry in history if entry.get("outcome") != released]
    return entries[len(entries) - spent :] if spent > 0 else []


def _when(value: Any) -> datetime | None:
    """A history timestamp (ISO text) as a datetime; None if missing or unreadable."""
    if isinstance(value, str):
        value = parse_datetime(value)
    return to_datetime(value) if isinstance(value, datetime) else None


def result_fields(
    *,
    status: str,
    attempts: int,
    history: Sequence[Mapping[str, Any]],
    enqueued_at: datetime,
    last_started_at: datetime | None,
    finished_at: datetime | None,
    result: Any = None,
    running_worker: str = "",
) -> ResultFields:
    """The TaskResult fields of a job in `status` after `attempts` attempts.

    A running job's current attempt is not in its history yet: `running_worker` holds it,
    and `last_started_at` is when it started. That keeps `len(worker_ids)`, which the
    framework reads as `TaskContext.attempt`, equal to the job's real attempt number.
    """
    running = status == Status.RUNNING
    entries = current_run(history, attempts - 1 if running else attempts)
    worker_ids = [str(entry.get("worker") or "") for entry in entries]
    if running:
        worker_ids.append(running_worker)
    errors = [
        ErrorFields(
            exception_class_path=exception_class_path(entry),
            traceback=str(entry.get("traceback") or entry.get("error") or ""),
        )
        for entry in entries
        if entry.get("outcome") != AttemptOutcome.COMPLETED.value
    ]
    # Attempt start times as the worker recorded them; the row's own `started_at` (the
    # latest claim) stands in for the attempt in progress, or a start that went unrecorded.
    latest = last_started_at if attempts else None
    starts = [_when(entry.get("started_at")) for entry in entries]
    first_started = starts[0] if starts else None
    last_started = latest if running or not starts else starts[-1]
    return ResultFields(
        status=FRAMEWORK_STATUS[status],
        enqueued_at=enqueued_at,
        started_at=first_started or latest,
        finished_at=finished_at if status in FINISHED else None,
        last_attempted_at=last_started or latest,
        errors=errors,
        worker_ids=worker_ids,
        return_value=result if status == Status.COMPLETED else None,
    )


def status_after(outcome: AttemptOutcome, attempts: int, max_attempts: int) -> str:
    """The job status a recorded outcome led to (the rule transitions.fail applies)."""
    if outcome is AttemptOutcome.COMPLETED:
        return Status.COMPLETED
    return status_after_failure(attempts, max_attempts, gives_up=outcome.gives_up)


def run_after(run_at: datetime, enqueued_at: datetime) -> datetime | None:
    """`Task.run_after` of a stored job: when it may next run.

    `enqueue()` stores a task without `run_after` to run at its enqueue time, to the
    microsecond, and any `run_after` as given, past or future; so a `run_at` equal to the
    enqueue time reads back as None, and any other as itself. Once a retry, a requeue or a
    shutdown's hand-back has moved `run_at`, the task's `run_after` is that new time.
    """
    return None if run_at == enqueued_at else run_at
