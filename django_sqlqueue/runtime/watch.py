"""A thread beside the worker loop that watches the running attempt while its handler runs.

- A job that outlasts the claim budget while the worker still holds unstarted jobs of its
  batch: those go back to the queue at once, for idle workers (fair dispatch).
- A job running for more than a second: its progress is written about once a second, and a
  cancel request is noticed; a handler that has not stopped CANCEL_GRACE_SECONDS after the
  request is interrupted, and one deaf to that too costs its process.

A worker running many jobs at once (runworkers --concurrency) has one watch for all its
slots. A slot's thread cannot be interrupted, so for its attempts the watch also keeps the
time limit: past it the handler is asked to stop (`context.cancel_requested`), and one deaf to
that, or to its cancel, for HARD_STOP_GRACE costs the process (`deaf`).

It ticks only while the worker has a batch in hand and sleeps otherwise, so a worker with
nothing to do costs nothing, and a short job costs it no more than a few attribute writes.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import DatabaseError

from ..context import AttemptControl
from ..rows import ClaimedJob
from . import transitions
from .heartbeat import close_quietly

logger = logging.getLogger("django_sqlqueue")

#: Seconds between two looks while a batch is in hand.
TICK = 0.025
#: Seconds between two progress writes / cancel checks of one running attempt.
REPORT_INTERVAL = 1.0
#: Seconds past the cancel grace before a handler that ignores the interrupt costs its process.
HARD_STOP_GRACE = 5.0


@dataclass
class Attempt:
    """The attempt being run, as the watch sees it."""

    job: ClaimedJob
    control: AttemptControl
    began: float
    #: When to hand back the rest of the batch if this attempt still runs (None: nothing held).
    hand_back_at: float | None
    next_report: float = 0.0
    cancel_deadline: float | None = None
    interrupted_at: float | None = None
    #: A slot's attempt (a thread the watch cannot interrupt): its time limit (None: none).
    threaded: bool = False
    timeout_at: float | None = None
    deaf: bool = False


class AttemptWatch(threading.Thread):
    def __init__(
        self,
        alias: str,
        cancel_grace: float,
        hand_back: Callable[[], None],
        interrupt: Callable[[], None],
        hard_stop: Callable[[ClaimedJob], None],
        deaf: Callable[[ClaimedJob, str], None] | None = None,
    ) -> None:
        super().__init__(name="sqlqueue-attempt-watch", daemon=True)
        self.alias = alias
        self.cancel_grace = cancel_grace
        self.hand_back = hand_back
        self.interrupt = interrupt
        self.hard_stop = hard_stop
        self.deaf = deaf
        #: The attempts running, by slot (0: the worker's main thread).
        self.attempts: dict[int, Attempt] = {}
        self.busy = threading.Event()
        self.stopped = threading.Event()

    @property
    def attempt(self) -> Attempt | None:
        """The main thread's attempt (a one-slot worker's only one)."""
        return self.attempts.get(0)

    # Called by the worker loop -----------------------------------------------------------

    def batch_started(self) -> None:
        self.busy.set()

    def batch_finished(self) -> None:
        self.attempts.clear()
        self.busy.clear()

    def begin(
        self,
        job: ClaimedJob,
        control: AttemptControl,
        hand_back_at: float | None,
        *,
        slot: int = 0,
        timeout: float | None = None,
    ) -> None:
        """An attempt starts. `timeout` is kept here for a slot's thread (slot > 0), which no
        signal can interrupt; the main thread keeps its own with SIGALRM."""
        now = time.monotonic()
        self.attempts[slot] = Attempt(
            job,
            control,
            now,
            hand_back_at,
            next_report=now + REPORT_INTERVAL,
            threaded=slot > 0,
            timeout_at=now + timeout if slot > 0 and timeout else None,
        )

    def end(self, slot: int = 0) -> None:
        self.attempts.pop(slot, None)

    def stop(self) -> None:
        self.stopped.set()
        self.busy.set()
        self.join(timeout=5)

    # The thread ------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                self.busy.wait()
                if self.stopped.wait(TICK):
                    return
                for attempt in list(self.attempts.values()):
                    try:
                        self.look_at(attempt, time.monotonic())
                    except Exception:  # never die silently: the next look may do better
                        logger.exception("Job %s: the attempt watch failed", attempt.job.id)
                        close_quietly(self.alias)
        finally:
            close_quietly(self.alias)

    def look_at(self, attempt: Attempt, now: float) -> None:
        if attempt.hand_back_at is not None and now >= attempt.hand_back_at:
            attempt.hand_back_at = None
            self.hand_back()
        if now >= attempt.next_report:
            attempt.next_report = now + REPORT_INTERVAL
            self.report(attempt, now)
        if attempt.threaded:
            self.look_at_thread(attempt, now)
        elif attempt.cancel_deadline is not None:
            if attempt.interrupted_at is None and now >= attempt.cancel_deadline:
                attempt.interrupted_at = now
                logger.warning(
                    "Job %s %s did not stop within %g s of its cancel; interrupting it",
                    attempt.job.id,
                    attempt.job.name,
                    self.cancel_grace,
                )
                self.interrupt()
            elif (
                attempt.interrupted_at is not None
                and now - attempt.interrupted_at >= HARD_STOP_GRACE
                and self.attempt is attempt
            ):
                self.hard_stop(attempt.job)

    def look_at_thread(self, attempt: Attempt, now: float) -> None:
        """A slot's attempt: ask it to stop at its time limit; a handler still running
        HARD_STOP_GRACE after that, or after its cancel grace, is deaf."""
        if attempt.deaf or self.deaf is None:
            return
        if attempt.timeout_at is not None and now >= attempt.timeout_at:
            if not attempt.control.timed_out.is_set():
                attempt.control.timed_out.set()  # first: the stopped handler reads it
                stopped = attempt.control.stop()  # an `async def` handler's task is cancelled
                logger.warning(
                    "Job %s %s ran past its time limit; %s",
                    attempt.job.id,
                    attempt.job.name,
                    "stopping it" if stopped else "asking it to stop",
                )
            elif now - attempt.timeout_at >= HARD_STOP_GRACE:
                attempt.deaf = True
                self.deaf(attempt.job, "timeout")
                return
        if attempt.cancel_deadline is None:
            return
        if attempt.interrupted_at is None and now >= attempt.cancel_deadline:
            attempt.interrupted_at = now
            attempt.control.stop()  # an `async def` handler's task is cancelled
        elif now >= attempt.cancel_deadline + HARD_STOP_GRACE:
            attempt.deaf = True
            self.deaf(attempt.job, "cancel")

    def report(self, attempt: Attempt, now: float) -> None:
        """Write the attempt's progress, if it changed, and look for a cancel request."""
        try:
            requested = transitions.report_attempt(
                attempt.job, attempt.control.unreported_progress(), alias=self.alias
            )
        except DatabaseError as exc:
            logger.warning("Job %s: could not report progress (%s)", attempt.job.id, exc)
            close_quietly(self.alias)
            return
        if requested and not attempt.control.cancelled.is_set():
            logger.info("Job %s %s: cancel requested", attempt.job.id, attempt.job.name)
            attempt.control.cancelled.set()
            attempt.cancel_deadline = now + self.cancel_grace


def exit_process(code: int) -> None:
    """End the worker process at once (a handler that ignores every interrupt)."""
    os._exit(code)
