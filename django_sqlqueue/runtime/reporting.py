"""How a finished attempt is told, in one table: its log line, its signal and what the watchers
(outcomes.py: metrics, the dashboard's rollup, JSON logs) hear, by how the attempt ended.

Everything here runs after the exit's fenced UPDATE said the row is ours, so each attempt is
told once; an attempt whose lease was lost before its outcome was written is told as such,
and nothing else is sent for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.dispatch import Signal

from .. import outcomes, signals
from ..rows import ClaimedJob

logger = logging.getLogger("django_sqlqueue")


def job_label(job: ClaimedJob) -> str:
    return f"Job {job.reference} {job.name} attempt {job.attempts}/{job.max_attempts}"


@dataclass(frozen=True)
class Telling:
    """What is said of an attempt that ended one way."""

    #: The level of its log line (successes at DEBUG: one line per job is a large share of
    #: a short job's cost; runtime/activity_log.py sums them up at INFO).
    level: int
    #: The line, with `label`, `millis`, `error`, `worker`, `status` to fill in.
    message: str
    #: What watchers hear (outcomes.OUTCOMES).
    outcome: str
    signal: Signal | None = None
    #: The level of the traceback's own line, if one is logged.
    traceback_level: int | None = None


#: By how the attempt ended: the job's new status, or "lost" for recovery's.
TELLINGS: dict[str, Telling] = {
    "completed": Telling(
        logging.DEBUG,
        "%(label)s completed in %(millis).1f ms",
        outcomes.COMPLETED,
        signals.job_completed,
    ),
    "failed": Telling(
        logging.WARNING,
        "%(label)s failed in %(millis).1f ms (%(error)s); will retry",
        outcomes.FAILED,
        signals.job_failed,
        traceback_level=logging.INFO,
    ),
    "dead": Telling(
        logging.ERROR,
        "%(label)s is dead after %(millis).1f ms: %(error)s",
        outcomes.DEAD,
        signals.job_dead,
        traceback_level=logging.ERROR,
    ),
    "cancelled": Telling(logging.WARNING, "%(label)s cancelled while running", outcomes.CANCELLED),
    "lost:failed": Telling(
        logging.WARNING,
        "Job %(id)s (%(name)s) recovered from worker %(worker)s: failed",
        outcomes.LOST,
    ),
    "lost:dead": Telling(
        logging.WARNING,
        "Job %(id)s (%(name)s) recovered from worker %(worker)s: dead",
        outcomes.LOST,
        signals.job_dead,
    ),
    "lost:cancelled": Telling(
        logging.WARNING,
        "Job %(id)s (%(name)s) recovered from worker %(worker)s: cancelled",
        outcomes.CANCELLED,
    ),
}

#: An attempt that ended but whose lease was lost first: its outcome was not written.
LEASE_LOST = {
    "completed": "%(label)s finished in %(millis).1f ms but its lease was lost; its result "
    "was discarded",
    "failed": "%(label)s failed in %(millis).1f ms but its lease was lost; the failure was "
    "not recorded",
    "cancelled": "%(label)s stopped after a cancel, but its lease was lost",
}


def tell(
    job: ClaimedJob,
    ended: str,
    duration: float | None = None,
    *,
    error: str = "",
    traceback: str = "",
    result: Any = None,
) -> None:
    """Say that `job`'s attempt ended as `ended` (a key of TELLINGS), once its exit was
    written: the log line, the watchers, the signal."""
    telling = TELLINGS[ended]
    if logger.isEnabledFor(telling.level):
        logger.log(telling.level, telling.message, _fields(job, duration, error))
        if traceback and telling.traceback_level is not None:
            logger.log(telling.traceback_level, "%s traceback:\n%s", job_label(job), traceback)
    outcomes.attempt_ended(job, telling.outcome, duration, error)
    if telling.signal is not None:
        said = {"result": result} if telling.signal is signals.job_completed else {"error": error}
        signals.send(telling.signal, job, **said)


def tell_lease_lost(job: ClaimedJob, ended: str, duration: float | None = None) -> None:
    """Say that `job`'s attempt ended as `ended` but its outcome was not written."""
    logger.warning(LEASE_LOST[ended], _fields(job, duration, ""))


def _fields(job: ClaimedJob, duration: float | None, error: str) -> dict[str, Any]:
    return {
        "label": job_label(job),
        "millis": (duration or 0.0) * 1000,
        "error": error,
        "id": job.id,
        "reference": job.reference,
        "name": job.name,
        "worker": job.lease_owner,
    }
