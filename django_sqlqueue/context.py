"""What a `takes_context=True` handler receives as its first argument, and the channel through
which it and its worker talk while it runs: progress one way, cancel requests the other."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .exceptions import JobCancelled, JobTimeout

if TYPE_CHECKING:
    from .databases.batches import BatchProgress

#: Longest progress message stored; longer ones are cut.
MAX_PROGRESS_MESSAGE = 255


class AttemptControl:
    """Shared by a running handler (through its JobContext) and its worker's watch thread."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        #: Set when the attempt's time limit passes in a worker slot that cannot interrupt
        #: its thread (runworkers --concurrency): the handler is asked to stop instead.
        self.timed_out = threading.Event()
        self._lock = threading.Lock()
        self._progress: tuple[int, str] | None = None
        self._reported: tuple[int, str] | None = None
        self._stopper: Callable[[], object] | None = None

    def on_stop(self, stopper: Callable[[], object] | None) -> None:
        """What `stop()` calls while the handler runs (an `async def` handler's task cancel,
        in a worker slot); None: nothing."""
        with self._lock:
            self._stopper = stopper

    def stop(self) -> bool:
        """Interrupt the handler if it can be (see `on_stop`); False if it cannot."""
        with self._lock:
            stopper = self._stopper
        if stopper is None:
            return False
        stopper()
        return True

    def set_progress(self, percent: int, message: str) -> None:
        with self._lock:
            self._progress = (percent, message)

    def unreported_progress(self) -> tuple[int, str] | None:
        """The latest progress if it changed since the last call (what the watch writes)."""
        with self._lock:
            if self._progress == self._reported:
                return None
            self._reported = self._progress
            return self._progress


@dataclass(frozen=True)
class JobContext:
    job_id: int
    name: str
    attempt: int
    max_attempts: int
    queue: str
    enqueued_at: datetime
    worker_id: str
    #: The job's public reference (`Job.reference`): unlike `job_id`, never the reference of
    #: another job, even after a database failover that lost the newest jobs and reused their
    #: ids. Use it to name the job outside (an idempotency key sent to a payment provider).
    #: Built by hand without one (a unit test), it is the id's digits.
    reference: str = ""
    control: AttemptControl = field(default_factory=AttemptControl, repr=False, compare=False)
    #: Reads the results of the jobs this one waited for (the worker supplies it).
    dependency_reader: Callable[[], dict[int, Any]] | None = field(
        default=None, repr=False, compare=False
    )

    #: Reads the batch this job is the callback of, or a member of (the worker supplies it).
    batch_reader: Callable[[], BatchProgress | None] | None = field(
        default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not self.reference:
            object.__setattr__(self, "reference", str(self.job_id))

    @cached_property
    def batch(self) -> BatchProgress | None:
        """For a batch's callback, that batch: its id, its members' total and how many
        completed, ended dead or were cancelled. For a member of a batch, the batch it
        belongs to, as it stands now. None for any other job. Read when first used."""
        return self.batch_reader() if self.batch_reader is not None else None

    @cached_property
    def dependency_results(self) -> dict[int, Any]:
        """The results of the jobs this one was enqueued after (`after=`), by job id: what
        each handler returned (None for one that did not complete, with
        `on_dependency_failure="run"`). Empty for a job that waited for nothing. Read from the
        database once, when first used."""
        return self.dependency_reader() if self.dependency_reader is not None else {}

    @property
    def cancel_requested(self) -> bool:
        """True once someone cancelled this job while it runs (noticed within about a second),
        or once its time limit passed in a worker that runs many jobs at once.

        Stop at the next safe point; `raise_if_cancelled()` does it for you. A handler that
        has not returned `CANCEL_GRACE_SECONDS` after the request is interrupted (a worker's
        main thread) or costs its worker process (a slot thread, which cannot be interrupted).
        """
        return self.control.cancelled.is_set() or self.control.timed_out.is_set()

    def raise_if_cancelled(self) -> None:
        """Raise JobCancelled if the job was cancelled, JobTimeout if its time limit passed in
        a slot thread: call it at safe points of a long job."""
        if self.control.cancelled.is_set():
            raise JobCancelled(f"Job {self.reference} was cancelled while it ran.")
        if self.control.timed_out.is_set():
            raise JobTimeout()

    def progress(self, percent: float, message: str = "") -> None:
        """Report how far the attempt got (0 to 100) and what it is doing.

        Cheap to call often: the worker writes the latest value to the job row about once a
        second (and the admin and `jobstatus --running` show it).
        """
        if (
            isinstance(percent, bool)
            or not isinstance(percent, (int, float))
            or not math.isfinite(percent)
            or not 0 <= percent <= 100
        ):
            raise ValueError(f"progress must be a number from 0 to 100, got {percent!r}.")
        if not isinstance(message, str):
            raise TypeError(f"progress message must be a string, got {type(message).__name__}.")
        self.control.set_progress(round(percent), message[:MAX_PROGRESS_MESSAGE])
