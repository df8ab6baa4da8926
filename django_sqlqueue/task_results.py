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

from .claimed import to_datetime
from .states import FINISHED, Status

#: Framework status (`TaskResultStatus` values) of each job status.
FRAMEWORK_STATUS: Mapping[str, str] = {
    Status.PENDING: "READY",
    Status.FAILED: "READY",  # a retry is scheduled
    Status.RUNNING: "RUNNING",
    Status.COMPLETED: "SUCCESSFUL",
    Status.DEAD: "FAILED",
    Status.CANCELLED: "FAILED",
}

#: History outcomes that did not spend an attempt.
NOT_SPENT = frozenset({"released"})


class WorkerLost(Exception):
    """Stands in a TaskError for an attempt whose worker died: the task raised nothing."""


#: Exception class paths for attempts that ended without a traceback to read one from.
OUTCOME_EXCEPTIONS: Mapping[str, str] = {
    "lost": f"{__name__}.WorkerLost",
    "timeout": "django_sqlqueue.exceptions.JobTimeout",
    "retry": "django_sqlqueue.exceptions.Retry",
    "discard": "django_sqlqueue.exceptions.Discard",
    "unknown": "django_sqlqueue.exceptions.UnknownJobError",
    "bad_result": "builtins.TypeError",
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
    """The dotted path of the exception that ended a failed attempt, as the framework names it.

    The history keeps `error` as `QualName: message` and the formatted traceback, whose
    last exception line reads `module.QualName: message` (bare `QualName` for builtins).
    """
    error = str(entry.get("error") or "")
    qualname = error.split(":", 1)[0].strip()
    if qualname and " " not in qualname:
        for line in reversed(str(entry.get("traceback") or "").splitlines()):
            if not line or line[0].isspace():
                continue
            head = line.split(":", 1)[0].strip()
            if head == qualname:
                return f"builtins.{qualname}"
            if head.endswith(f".{qualname}"):
                return head
    outcome = str(entry.get("outcome") or "")
    if outcome in OUTCOME_EXCEPTIONS:
        return OUTCOME_EXCEPTIONS[outcome]
    if qualname and " " not in qualname:
        return f"builtins.{qualname}"
    return "builtins.Exception"


def current_run(history: Sequence[Mapping[str, Any]], spent: int) -> list[Mapping[str, Any]]:
    """The last `spent` entries that spent an attempt, oldest first."""
    entries = [entry for entry in history if entry.get("outcome") not in NOT_SPENT]
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
        if entry.get("outcome") != "completed"
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


def status_after(outcome_kind: str, goes_dead: bool, attempts: int, max_attempts: int) -> str:
    """The job status a recorded outcome led to (as services.complete/fail decide it)."""
    if outcome_kind == "completed":
        return Status.COMPLETED
    if goes_dead or attempts >= max_attempts:
        return Status.DEAD
    return Status.FAILED


def run_after(run_at: datetime, enqueued_at: datetime) -> datetime | None:
    """`Task.run_after` of a stored job: when it may next run, if later than its enqueue."""
    return run_at if run_at > enqueued_at else None
