"""One worker process: claim, run, record, repeat — until told to stop.

Signals (sent by the supervisor):
- SIGTERM: stop claiming; finish the job in hand; hand back claimed jobs not yet started.
- SIGUSR1: the grace period is over; interrupt the running handler and hand its job back.
SIGINT is ignored: Ctrl+C reaches the whole process group, and the supervisor decides.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.utils import timezone

from . import services, signals
from .activity import ActivitySummary
from .claimed import ClaimedJob
from .claimers import get_claimer
from .completion import Completer
from .conf import QueueSettings, get_settings
from .exceptions import JobTimeout, WorkerShutdown
from .execution import JobRunner, Outcome, execute, resolve_runner
from .heartbeat import Heartbeat
from .models import Worker
from .states import Status
from .waiting import make_waiter

logger = logging.getLogger("django_sqlqueue")

#: Exit status of a worker that stopped after --max-jobs, to be replaced by a fresh one.
EXIT_RECYCLE = 75
#: Exit status of a worker whose handler would not stop at its timeout.
EXIT_HUNG = 70
#: Seconds past its timeout before a handler that ignores the alarm costs its process.
HARD_TIMEOUT_GRACE = 5.0
#: A worker claims as many jobs as it expects to finish in this many seconds (up to
#: BATCH_SIZE): short jobs travel in batches, slow ones one by one so no job waits long
#: behind another while an idle worker could have taken it.
CLAIM_BUDGET_SECONDS = 0.05


def refresh_connections() -> None:
    """Between jobs, what Django's request cycle does — without reconnecting every time.

    Django closes connections after each request when CONN_MAX_AGE is 0 (its default); a
    worker doing that would spend more time connecting than running short jobs. So a worker
    keeps its connections, and closes only the broken ones, those a handler left inside a
    transaction, and those older than a CONN_MAX_AGE the project set explicitly.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        if connection.in_atomic_block or not connection.get_autocommit():
            logger.warning(
                "A handler left a transaction open on %r; rolling back", connection.alias
            )
            connection.close()
        elif connection.errors_occurred and not connection.is_usable():
            connection.close()
        elif connection.settings_dict.get("CONN_MAX_AGE"):
            connection.close_if_unusable_or_obsolete()


def new_worker_id() -> str:
    host = socket.gethostname()[:60]
    return f"{host}:{os.getpid()}:{os.urandom(3).hex()}"


@dataclass(frozen=True)
class WorkerOptions:
    queues: Sequence[str] = ()
    burst: bool = False
    max_jobs: int | None = None
    batch_size: int | None = None


class JobWorker:
    def __init__(
        self,
        worker_id: str,
        options: WorkerOptions,
        conf: QueueSettings | None = None,
        shared_current: Any = None,
    ) -> None:
        self.worker_id = worker_id
        self.options = options
        self.conf = conf or get_settings()
        self.alias = self.conf.database
        self.batch_size = options.batch_size or self.conf.batch_size
        self.stopping = threading.Event()
        self.held: list[ClaimedJob] = []
        self.current: ClaimedJob | None = None
        self.current_deadline: float | None = None
        self.in_handler = False
        self.jobs_done = 0
        self.average_duration: float | None = None
        self.succeeded: list[tuple[ClaimedJob, JobRunner | None, Outcome, float]] = []
        # The supervisor reads this after a crash to tell the job that was running (its
        # attempt is spent) from claimed jobs that never started (handed back unspent).
        self.shared_current = shared_current
        self.claimer = get_claimer(self.alias)
        self.completer = Completer(self.alias)
        self.waiter = make_waiter(self.alias, self.conf.poll_interval, self.stopping)
        self.activity = ActivitySummary(worker_id, logger)

    # Signals -------------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        signal.signal(signal.SIGUSR1, self._on_interrupt)
        signal.signal(signal.SIGALRM, self._on_alarm)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.stopping.set()

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        self.stopping.set()
        if self.in_handler:
            raise WorkerShutdown()

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self.in_handler:
            raise JobTimeout()

    # Main loop -----------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped; the exit status tells the supervisor why it ended."""
        if not self.register():
            return 0
        heartbeat = Heartbeat(
            self.worker_id,
            self.alias,
            self.conf.heartbeat_seconds,
            self.conf.lease_seconds,
            current_job=lambda: self.current.id if self.current else None,
            held_jobs=self.held_job_ids,
            jobs_done=lambda: self.jobs_done,
            on_orphaned=self.stopping.set,
            on_overdue=self.stop_if_hung,
        )
        heartbeat.start()
        status = 0
        db_failures = 0
        try:
            while not self.stopping.is_set():
                try:
                    jobs = self.claimer.claim(
                        self.worker_id,
                        self.options.queues,
                        self.claim_size(),
                        self.conf.lease_seconds,
                        timezone.now(),
                    )
                    db_failures = 0
                except DatabaseError as exc:
                    db_failures += 1
                    self.database_trouble(exc, db_failures)
                    continue
                if not jobs:
                    if self.options.burst:
                        break
                    self.waiter.wait()
                    continue
                self.waiter.worked()
                self.held = jobs
                while self.held and not self.stopping.is_set():
                    self.run_one(self.held.pop(0))
                self.flush_completed()
                self.hand_back_held("the worker is stopping")
                if self.options.max_jobs and self.jobs_done >= self.options.max_jobs:
                    logger.info(
                        "Worker %s: %d jobs done, recycling", self.worker_id, self.jobs_done
                    )
                    status = EXIT_RECYCLE
                    break
                refresh_connections()
        finally:
            self.flush_completed()
            self.hand_back_held("the worker is stopping")
            heartbeat.stop()
            self.activity.report()
            self.unregister()
            self.waiter.close()
        return status

    def held_job_ids(self) -> list[int]:
        """Every job this worker holds a lease on: running, waiting in its batch, or done but
        not yet recorded. Read from the heartbeat thread, so it copies before iterating."""
        ids = [job.id for job in list(self.held)]
        ids += [entry[0].id for entry in list(self.succeeded)]
        current = self.current
        if current is not None:
            ids.append(current.id)
        return ids

    def claim_size(self) -> int:
        """How many jobs to claim now: what fits the time budget, never past --max-jobs."""
        if self.average_duration is None:
            size = 1
        elif self.average_duration <= 0:
            size = self.batch_size
        else:
            size = int(CLAIM_BUDGET_SECONDS / self.average_duration)
        size = max(1, min(self.batch_size, size))
        if self.options.max_jobs:
            size = max(1, min(size, self.options.max_jobs - self.jobs_done))
        return size

    def observe_duration(self, seconds: float) -> None:
        previous = self.average_duration
        self.average_duration = seconds if previous is None else previous * 0.8 + seconds * 0.2

    def database_trouble(self, exc: Exception, failures: int) -> None:
        delay = min(30.0, 0.5 * 2 ** min(failures, 6))
        logger.warning(
            "Worker %s: database error (%s); reconnecting in %.1f s", self.worker_id, exc, delay
        )
        connections[self.alias].close()
        self.stopping.wait(delay)

    def register(self) -> bool:
        """Insert the heartbeat row, waiting out a database that is not up yet.

        False if the worker was told to stop before the database answered.
        """
        failures = 0
        while not self.stopping.is_set():
            now = timezone.now()
            try:
                # One INSERT: on SQLite a read-then-write transaction could fail to lock.
                Worker(
                    id=self.worker_id,
                    hostname=socket.gethostname()[:255],
                    pid=os.getpid(),
                    queues=",".join(self.options.queues),
                    started_at=now,
                    last_seen_at=now,
                ).save(using=self.alias, force_insert=True)
                return True
            except DatabaseError as exc:
                failures += 1
                self.database_trouble(exc, failures)
        return False

    def unregister(self) -> None:
        try:
            Worker.objects.using(self.alias).filter(id=self.worker_id).delete()
        except DatabaseError as exc:
            logger.warning("Worker %s: could not remove its heartbeat row: %s", self.worker_id, exc)

    def hand_back_held(self, reason: str) -> None:
        """Claimed jobs not started yet go back to the queue at once, attempt not spent."""
        while self.held:
            job = self.held.pop()
            self.with_retries(lambda job=job: services.release(job, reason, alias=self.alias))

    # One job ------------------------------------------------------------------------------

    def run_one(self, job: ClaimedJob) -> None:
        runner = resolve_runner(job)
        started_at = timezone.now()
        began = time.monotonic()
        timeout = (runner.timeout if runner else None) or self.conf.default_timeout
        self.current = job
        if self.shared_current is not None:
            self.shared_current.value = job.id
        self.current_deadline = began + timeout + HARD_TIMEOUT_GRACE if timeout else None
        outcome: Outcome | None = None
        signals.send(signals.job_started, job)
        try:
            try:
                if timeout:
                    signal.setitimer(signal.ITIMER_REAL, timeout)
                self.in_handler = True
                outcome = execute(job, runner, self.worker_id, timeout)
            finally:
                self.in_handler = False
                signal.setitimer(signal.ITIMER_REAL, 0)
        except JobTimeout:  # the alarm fired just as the handler returned
            outcome = outcome or Outcome("timeout", error=f"Timed out after {timeout:g} s.")
        except WorkerShutdown:
            if outcome is None:
                self.current = None
                logger.warning(
                    "Job %s %s attempt %d interrupted by shutdown; handed back to the queue",
                    job.id,
                    job.name,
                    job.attempts,
                )
                self.with_retries(
                    lambda: services.release(
                        job, "The worker shut down before the job finished.", alias=self.alias
                    )
                )
                return
        duration = time.monotonic() - began
        self.observe_duration(duration)
        if outcome.is_success:
            self.succeeded.append((job, runner, outcome, duration))
        else:
            self.record_failure(job, runner, outcome, started_at, duration)
        self.current = None
        if self.shared_current is not None:
            self.shared_current.value = 0
        self.current_deadline = None
        self.jobs_done += 1

    def flush_completed(self) -> None:
        """Record the batch's successful attempts together, then report them."""
        if not self.succeeded:
            return
        batch, self.succeeded = self.succeeded, []
        now = timezone.now()
        try:
            recorded = self.with_retries(
                lambda: self.completer.complete(
                    [(job, out.result) for job, _, out, _ in batch], now
                )
            )
        except DatabaseError as exc:
            self.results_refused(batch, exc)
            return
        debug = logger.isEnabledFor(logging.DEBUG)
        completed = 0
        for job, runner, outcome, duration in batch:
            if recorded is None or job.id not in recorded:
                logger.warning(
                    "%s finished in %.1f ms but its lease was lost; its result was discarded",
                    job_label(job),
                    duration * 1000,
                )
                continue
            completed += 1
            if debug:
                logger.debug("%s completed in %.1f ms", job_label(job), duration * 1000)
            signals.send(signals.job_completed, job, result=outcome.result)
            if runner is not None:
                runner.finished(job, outcome)
        self.activity.record(completed=completed)

    def results_refused(self, batch: list[Any], exc: DatabaseError) -> None:
        """The database refused to store the batch's results (not an outage): say so on each
        job instead of leaving it running until its lease expires."""
        logger.error("Worker %s: the database refused results: %s", self.worker_id, exc)
        for job, runner, _, duration in batch:
            outcome = Outcome("bad_result", error=f"The database refused the result: {exc}")
            self.record_failure(job, runner, outcome, None, duration)

    def record_failure(
        self,
        job: ClaimedJob,
        runner: JobRunner | None,
        outcome: Outcome,
        started_at: Any,
        duration: float,
    ) -> None:
        label = job_label(job)
        try:
            status = self.with_retries(
                lambda: services.fail(
                    job,
                    outcome.error,
                    outcome.traceback,
                    started_at=started_at,
                    backoff=runner.backoff if runner else None,
                    retry_delay=outcome.retry_delay,
                    discard=outcome.goes_dead,
                    outcome=outcome.kind,
                    alias=self.alias,
                )
            )
        except DatabaseError as exc:
            logger.error("%s: could not record its failure (%s); its lease will expire", label, exc)
            return
        millis = duration * 1000
        if status is None:
            logger.warning(
                "%s failed in %.1f ms but its lease was lost; the failure was not recorded",
                label,
                millis,
            )
            return
        self.activity.record(failed=1)
        if status == Status.FAILED:
            logger.warning("%s failed in %.1f ms (%s); will retry", label, millis, outcome.error)
            if outcome.traceback:
                logger.info("%s traceback:\n%s", label, outcome.traceback)
            signals.send(signals.job_failed, job, error=outcome.error)
        else:
            logger.error("%s is dead after %.1f ms: %s", label, millis, outcome.error)
            if outcome.traceback:
                logger.error("%s traceback:\n%s", label, outcome.traceback)
            signals.send(signals.job_dead, job, error=outcome.error)
        if runner is not None:
            runner.finished(job, outcome)

    def with_retries(self, write: Any) -> Any:
        """Run a database write, reconnecting through an outage for up to one lease.

        Past that the lease has expired anyway, and the job belongs to whoever recovers it.
        Only connection trouble is retried; an error the database would repeat is raised.
        """
        deadline = time.monotonic() + self.conf.lease_seconds
        delay = 0.2
        while True:
            try:
                return write()
            except (OperationalError, InterfaceError) as exc:
                if time.monotonic() > deadline:
                    logger.error("Worker %s: giving up on a write: %s", self.worker_id, exc)
                    return None
                logger.warning("Worker %s: database error (%s); retrying", self.worker_id, exc)
                connections[self.alias].close()
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

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
        services.fail(
            job,
            "Timed out, and the handler did not stop; its worker process was replaced.",
            started_at=None,
            outcome="timeout",
            alias=self.alias,
        )
        os._exit(EXIT_HUNG)


def job_label(job: ClaimedJob) -> str:
    return f"Job {job.id} {job.name} attempt {job.attempts}/{job.max_attempts}"


def worker_main(worker_id: str, options: WorkerOptions, shared_current: Any = None) -> None:
    """Entry point of a worker process started by the supervisor (which closed its database
    connections before forking, so this process opens its own)."""
    worker = JobWorker(worker_id, options, shared_current=shared_current)
    worker.install_signal_handlers()
    logger.info("Worker %s started (pid %d)", worker_id, os.getpid())
    code = worker.run()
    logger.info("Worker %s stopped after %d jobs", worker_id, worker.jobs_done)
    connections.close_all()
    raise SystemExit(code)
