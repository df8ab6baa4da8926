"""`run_jobs()`: a project's tests run the jobs they enqueued, in the test's own process,
thread and connection, through the worker's own code.

It is `runworkers --burst` with one worker, in-process: the real claimer claims due jobs (one
statement per batch, as in production), the real attempt code runs each one under its
timeout, and the real recorder writes the outcome: a failure is recorded with its traceback
and its retry scheduled with backoff, a job out of attempts goes dead, signals are sent.
What a worker process adds around that loop is left out: no heartbeat thread, no watch
thread (progress is not written while the handler runs; cancel requests are not noticed),
no supervisor.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Sequence

from django.db import connections, transaction

from ..conf import get_settings
from ..context import AttemptControl
from ..databases import queue_database
from ..databases.batches import BatchSweeper
from ..databases.claiming import Claimer
from ..databases.dependencies import Sweeper
from ..models import Job
from ..rows import ClaimedJob
from ..runtime.attempt import AttemptRunner
from ..runtime.runner import AttemptResult, JobRunner
from ..runtime.worker import JobWorker, WorkerOptions


def _names_claimer(alias: str, names: Sequence[str]) -> Claimer:
    """The queue database's own claimer, also filtered on job names (run_jobs(name=...))."""
    claimer = queue_database(alias).claimer()
    claimer.names = tuple(names)
    return claimer


class SavepointAttempts(AttemptRunner):
    """Inside the caller's transaction (a Django TestCase, or a pytest-django test without
    transaction=True), each attempt runs in a savepoint, rolled back if it fails: a handler
    that fails on a database error would otherwise leave the test's transaction unusable
    (Django refuses every later query until the end of the atomic block, and PostgreSQL would
    too). So a failed attempt's writes are undone here, where a worker in autocommit would
    keep those made before the error."""

    def call(
        self,
        job: ClaimedJob,
        runner: JobRunner | None,
        timeout: float | None,
        control: AttemptControl,
    ) -> AttemptResult:
        alias = self.worker.alias
        with transaction.atomic(using=alias):
            result = super().call(job, runner, timeout, control)
            if not result.is_success:
                transaction.set_rollback(True, using=alias)
        return result


class InProcessWorker(JobWorker):
    """A JobWorker driven by run_jobs(): remembers what it started, keeps the caller's
    transaction open, and trusts its own leases (no other worker competes in a test)."""

    def __init__(self, options: WorkerOptions, names: Sequence[str]) -> None:
        conf = get_settings()
        claimer = _names_claimer(conf.database, names) if names else None
        super().__init__(f"testing:{os.getpid()}", options, conf, claimer=claimer)
        self.in_callers_transaction = connections[self.alias].in_atomic_block
        if self.in_callers_transaction:
            self.attempts = SavepointAttempts(self)
        self.started: list[int] = []

    def set_current(
        self,
        job: ClaimedJob | None,
        deadline: float | None,
        control: AttemptControl | None = None,
    ) -> None:
        if job is not None:
            self.started.append(job.id)
        super().set_current(job, deadline, control)

    def next_held(self) -> ClaimedJob | None:
        # No heartbeat thread renews the leases of a batch; nobody else would take them.
        self.leases_confirmed = time.monotonic()
        return super().next_held()

    def database_trouble(self, exc: Exception, failures: int) -> None:
        # A worker waits out a database outage; a test wants the error.
        raise exc

    def between_batches(self) -> None:
        # A worker closes a connection left in a transaction; here the transaction is the
        # caller's, and closing it would end the test's.
        if not self.in_callers_transaction:
            super().between_batches()
            return
        # Inside it, nothing commits: what a worker does once a job's end commits (release
        # the jobs waiting for it, look whether its batch finished) is what the supervisors'
        # sweep does, done here after each round.
        database = queue_database(self.alias)
        Sweeper(database).sweep()
        BatchSweeper(database).sweep()


def _as_tuple(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def run_jobs(
    queue: str | Sequence[str] | None = None,
    name: str | Sequence[str] | None = None,
    *,
    max_jobs: int | None = None,
) -> list[Job]:
    """Run the jobs that are due now, in this process, until none is: also those that come
    due meanwhile (a job enqueued by a job, a retry without delay). A retry with a delay is
    scheduled, not waited for: call run_jobs() again once it is due (or `run_now()` it).

    `queue` and `name` limit the run to those queues and job names; `max_jobs` stops after
    that many attempts. Returns the jobs that ran, fresh from the database, in the order each
    first started (a job that ran twice is listed once: see its `attempts` and `history`).

    Call it from the main thread: a job's timeout is a SIGALRM, which Python delivers there.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "run_jobs() must be called from the main thread: job timeouts are SIGALRM "
            "signals, which Python handles only there."
        )
    if max_jobs is not None and max_jobs < 1:
        raise ValueError(f"max_jobs must be at least 1, got {max_jobs!r}.")
    worker = InProcessWorker(
        WorkerOptions(queues=_as_tuple(queue), burst=True, max_jobs=max_jobs),
        _as_tuple(name),
    )
    previous = signal.signal(signal.SIGALRM, worker._on_alarm)
    try:
        worker.work()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        worker.recorder.flush()
        worker.hand_back_held("run_jobs() stopped")
        worker.waiter.close()
    order = list(dict.fromkeys(worker.started))
    jobs = Job.objects.using(worker.alias).in_bulk(order)
    return [jobs[pk] for pk in order if pk in jobs]
