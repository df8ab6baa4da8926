"""A handler deaf to its timeout or to its cancel costs its worker process.

Called from the worker's threads (the heartbeat for timeouts, the watch for cancels), when
the handler has ignored the interrupt for its grace: the attempt is recorded, if the database
takes it, and the process ends at once — whatever happens, since a process stuck in such a
handler is of no use. The supervisor replaces it, and recovers the job if its record failed.
"""

from __future__ import annotations

import logging
import time

from .. import outcomes
from ..attempts import AttemptOutcome
from ..rows import ClaimedJob
from . import transitions
from .watch import exit_process

logger = logging.getLogger("django_sqlqueue")

#: Exit status of a worker whose handler would not stop at its timeout or cancel.
EXIT_HUNG = 70


class HardStops:
    """JobWorker's last resort; it reads the worker's running job and deadline."""

    worker_id: str
    alias: str
    current: ClaimedJob | None
    current_deadline: float | None

    def stop_if_hung(self) -> None:
        """Called from the heartbeat thread: a handler deaf to its timeout costs its process."""
        job, deadline = self.current, self.current_deadline
        if job is None or deadline is None or time.monotonic() < deadline:
            return
        logger.error(
            "Job %s %s ignored its timeout; failing it and replacing worker %s",
            job.id,
            job.name,
            self.worker_id,
        )
        end_process(job, "timeout", self.alias)

    def stop_deaf_handler(self, job: ClaimedJob) -> None:
        """Called from the watch thread: a handler deaf to its cancel costs its process."""
        logger.error(
            "Job %s %s ignored its cancel; stopping it and replacing worker %s",
            job.id,
            job.name,
            self.worker_id,
        )
        end_process(job, "cancel", self.alias)


#: What the attempt of a handler deaf to its timeout or its cancel is recorded with.
DEAF_ERRORS = {
    "timeout": "Timed out, and the handler did not stop; its worker process was replaced.",
    "cancel": "Cancelled while running; the handler did not stop, so its worker was replaced.",
}


def record_deaf(job: ClaimedJob, what: str, alias: str) -> bool:
    """Record the attempt of a handler deaf to its `what` ("timeout" or "cancel") as timed
    out, or stopped, and report it; False if the database did not take it (the job is then
    recovered as lost once its process has gone)."""
    error = DEAF_ERRORS[what]
    try:
        if what == "timeout":
            status = transitions.fail(job, error, outcome=AttemptOutcome.TIMEOUT, alias=alias)
            outcome = status.value if status is not None else None
        else:
            stopped = transitions.stop(job, error, alias=alias)
            outcome = outcomes.CANCELLED if stopped else None
        if outcome is not None:
            outcomes.attempt_ended(job, outcome, None, error)
            outcomes.flush()
        return True
    except Exception as exc:
        logger.error("Job %s: could not record its %s (%s)", job.id, what, exc)
        return False


def end_process(job: ClaimedJob, what: str, alias: str) -> None:
    """Record how the attempt ended if the database takes it, then end the process at once,
    whatever happened (the supervisor recovers a job it sees running at the exit)."""
    try:
        record_deaf(job, what, alias)
    finally:
        exit_process(EXIT_HUNG)
