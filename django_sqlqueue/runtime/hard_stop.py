"""A handler deaf to its timeout or to its cancel costs its worker process.

Called from the worker's threads (the heartbeat for timeouts, the watch for cancels), when
the handler has ignored the interrupt for its grace: the attempt is recorded, if the database
takes it, and the process ends at once — whatever happens, since a process stuck in such a
handler is of no use. The supervisor replaces it, and recovers the job if its record failed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

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
        error = "Timed out, and the handler did not stop; its worker process was replaced."

        def record() -> str | None:
            status = transitions.fail(job, error, outcome=AttemptOutcome.TIMEOUT, alias=self.alias)
            return status.value if status is not None else None

        end_process(job, "timeout", record, error)

    def stop_deaf_handler(self, job: ClaimedJob) -> None:
        """Called from the watch thread: a handler deaf to its cancel costs its process."""
        logger.error(
            "Job %s %s ignored its cancel; stopping it and replacing worker %s",
            job.id,
            job.name,
            self.worker_id,
        )
        reason = "Cancelled while running; the handler did not stop, so its worker was replaced."

        def record() -> str | None:
            stopped = transitions.stop(job, reason, alias=self.alias)
            return outcomes.CANCELLED if stopped else None

        end_process(job, "stop", record, reason)


def end_process(job: ClaimedJob, what: str, record: Callable[[], str | None], error: str) -> None:
    """Record how the attempt ended if the database takes it, then end the process at once,
    whatever happened (the supervisor recovers a job it sees running at the exit)."""
    try:
        outcome = record()
        if outcome is not None:
            outcomes.attempt_ended(job, outcome, None, error)
            outcomes.flush()
    except Exception as exc:
        logger.error("Job %s: could not record its %s (%s)", job.id, what, exc)
    finally:
        exit_process(EXIT_HUNG)
