"""One writer for all the slots of a worker process (runworkers --concurrency).

A slot hands the outcome of its attempt to the writer and waits until it is written, so, as
in a one-slot worker, every outcome is durable before the slot takes its next job. The writer
records the successes of every slot that finished meanwhile in one statement (group commit),
on its own connection: a slot whose handler does not use the database opens none, so fifty
slots cost one connection for their records instead of fifty, and one writer instead of fifty
waits for SQLite's write lock.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from django.db import connections

from ..rows import ClaimedJob
from .activity_log import ActivitySummary
from .recording import OutcomeRecorder, Success
from .runner import AttemptResult, JobRunner

logger = logging.getLogger("django_sqlqueue")

#: Most outcomes written in one round (one statement for their successes).
MOST_PER_ROUND = 200


class Request:
    """An outcome to write; `done` is set once it is written (or could not be)."""

    __slots__ = ("done", "success", "write")

    def __init__(
        self,
        success: Success | None = None,
        write: Callable[[OutcomeRecorder], None] | None = None,
    ) -> None:
        self.success = success
        self.write = write
        self.done = threading.Event()


class GroupWriter(threading.Thread):
    """The thread that writes the slots' outcomes through its own OutcomeRecorder."""

    def __init__(self, recorder: OutcomeRecorder) -> None:
        super().__init__(name="sqlqueue-outcome-writer", daemon=True)
        self.recorder = recorder
        self.inbox: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self.closed = threading.Event()

    def submit(self, request: Request) -> bool:
        """Queue `request` and wait until it is written. False if the writer is gone (the
        caller then writes it itself)."""
        if self.closed.is_set():
            return False
        self.inbox.put(request)
        while not request.done.wait(1.0):
            if not self.is_alive() and not request.done.is_set():
                return False  # queued after the writer's last look: nobody else writes it
        return True

    def close(self) -> None:
        self.closed.set()
        self.inbox.put(None)
        self.join(timeout=30)

    def run(self) -> None:
        try:
            while (first := self.inbox.get()) is not None:
                batch = [first]
                while len(batch) < MOST_PER_ROUND:
                    try:
                        request = self.inbox.get_nowait()
                    except queue.Empty:
                        break
                    if request is None:
                        self.closed.set()
                        break
                    batch.append(request)
                self.write(batch)
                if self.closed.is_set() and self.inbox.empty():
                    break
        finally:
            self.closed.set()
            # What was queued before the end is written here, so no slot waits forever; a
            # request queued after this last look is written by its slot (submit() sees
            # the writer gone).
            while True:
                try:
                    request = self.inbox.get_nowait()
                except queue.Empty:
                    break
                if request is not None:
                    self.write([request])
            connections.close_all()

    def write(self, batch: list[Request]) -> None:
        successes = [request.success for request in batch if request.success is not None]
        try:
            if successes:
                self.recorder.record_successes(successes)
            for request in batch:
                if request.write is not None:
                    self.write_one(request.write)
        finally:
            for request in batch:
                request.done.set()

    def write_one(self, write: Callable[[OutcomeRecorder], None]) -> None:
        try:
            write(self.recorder)
        except Exception:  # a slot must never wait on an outcome that failed to be written
            logger.exception("Worker %s: could not record an outcome", self.recorder.worker_id)


class SlotRecorder(OutcomeRecorder):
    """A slot's recorder: its successes, failures and stops are written by the group writer
    (a job's own `atomic=True` completion is written in its transaction, by the slot)."""

    def __init__(
        self,
        worker_id: str,
        alias: str,
        activity: ActivitySummary,
        lease_seconds: float,
        writer: GroupWriter,
    ) -> None:
        super().__init__(worker_id, alias, activity, lease_seconds)
        self.writer = writer

    def record_success(
        self, job: ClaimedJob, runner: JobRunner | None, result: AttemptResult, duration: float
    ) -> None:
        if not self.writer.submit(Request(success=(job, runner, result, duration))):
            super().record_success(job, runner, result, duration)

    def record_failure(
        self, job: ClaimedJob, runner: JobRunner | None, result: AttemptResult, duration: float
    ) -> None:
        def write(recorder: OutcomeRecorder) -> None:
            recorder.record_failure(job, runner, result, duration)

        if not self.writer.submit(Request(write=write)):
            super().record_failure(job, runner, result, duration)

    def record_stop(self, job: ClaimedJob, result: AttemptResult) -> None:
        def write(recorder: OutcomeRecorder) -> None:
            recorder.record_stop(job, result)

        if not self.writer.submit(Request(write=write)):
            super().record_stop(job, result)
