"""One worker process: claim, run, record, repeat — until told to stop.

Signals (sent by the supervisor, or by the worker's own watch thread):
- SIGTERM: stop claiming; finish the job in hand; hand back claimed jobs not yet started.
- SIGUSR1: the grace period is over; interrupt the running handler and hand its job back.
- SIGUSR2: the running job was cancelled and its grace is over; interrupt its handler.
SIGINT is ignored: Ctrl+C reaches the whole process group, and the supervisor decides.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, connections
from django.utils import timezone

from .. import outcomes
from ..conf import QueueSettings, get_settings
from ..context import AttemptControl
from ..databases import queue_database
from ..databases.claiming import Claimer
from ..databases.holdings import HOLDINGS
from ..databases.polling import Waiter
from ..exceptions import JobCancelled, JobTimeout, WorkerShutdown
from ..rows import ClaimedJob
from ..words import counted
from .activity_log import ActivitySummary
from .attempt import AttemptRunner
from .budget import WorkerBudget
from .connections import refresh_connections, reset_connection
from .dispatch import CLAIM_BUDGET_SECONDS, DurationEstimates
from .hard_stop import EXIT_HUNG, HardStops
from .heartbeat import Heartbeat, delete_worker_row, insert_worker_row
from .in_flight import InFlight
from .recording import OutcomeRecorder
from .runner import JobRunner
from .slots import SlotPool
from .starts import JobStarts, Taking
from .stop_event import StopEvent
from .watch import AttemptWatch
from .worker_options import WorkerOptions

logger = logging.getLogger("django_sqlqueue")

#: The signals the supervisor holds back while it forks a worker: the worker starts with them
#: blocked and unblocks them once its own handlers are in place (see Supervisor.spawn).
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGUSR1})
#: Exit status of a worker that stopped after --max-jobs, to be replaced by a fresh one.
EXIT_RECYCLE = 75

__all__ = ["CLAIM_BUDGET_SECONDS", "EXIT_HUNG", "EXIT_RECYCLE", "JobWorker", "WorkerOptions"]


class JobWorker(JobStarts, HardStops):
    """The loop of one worker process. Its claimer and waiter default to the queue database's;
    tests pass their own to drive the loop in-process."""

    def __init__(
        self,
        worker_id: str,
        options: WorkerOptions,
        conf: QueueSettings | None = None,
        shared_current: InFlight | None = None,
        *,
        claimer: Claimer | None = None,
        waiter: Waiter | None = None,
        budget: WorkerBudget | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.options = options
        self.conf = conf or get_settings()
        self.alias = self.conf.database
        self.batch_size = options.batch_size or self.conf.batch_size
        self.stopping = StopEvent()
        self.held: list[ClaimedJob] = []
        self.held_lock = threading.Lock()
        self.current: ClaimedJob | None = None
        self.current_control: AttemptControl | None = None
        self.current_deadline: float | None = None
        self.in_handler = False
        #: The main thread runs attempts itself (slot 0) unless the worker has a pool.
        self.slot = 0
        #: The supervisor's second signal came (SIGUSR1): running jobs go back at once.
        self.interrupted = False
        self.jobs_done = 0
        self.estimates = DurationEstimates()
        #: When the leases of the jobs in hand were last known good (claim or renewal).
        self.leases_confirmed = time.monotonic()
        #: When this worker last claimed: it takes the next job of a key whose slot it
        #: frees only within the claim budget of that, then looks at the queue again.
        self.claimed_at = time.monotonic()
        # The supervisor reads this after a crash to tell the job that was running (its
        # attempt is spent) from claimed jobs that never started (handed back unspent).
        self.shared_current = shared_current
        # This worker's share of `runworkers --stop-after` (None without it).
        self.budget = budget
        database = queue_database(self.alias)
        self.claimer = claimer or database.claimer()
        self.waiter = waiter or database.waiter(self.conf.poll_interval, self.stopping)
        self.activity = ActivitySummary(worker_id, logger)
        self.recorder = OutcomeRecorder(
            worker_id, self.alias, self.activity, self.conf.lease_seconds
        )
        self.attempts = AttemptRunner(self)
        self.watch: AttemptWatch = AttemptWatch(
            self.alias,
            self.conf.cancel_grace_seconds,
            hand_back=self.hand_back_unstarted,
            interrupt=lambda: os.kill(os.getpid(), signal.SIGUSR2),
            hard_stop=self.stop_deaf_handler,
        )
        self.pool = SlotPool(self, options.concurrency) if options.concurrency > 1 else None
        if self.pool is not None:
            self.watch.deaf = self.pool.deaf_handler

    # Signals -------------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        """Install the worker's handlers, then take the signals the supervisor held back while
        forking: one sent in between is handled now, by these handlers (a pending SIGINT is
        dropped, being ignored), not by the supervisor's that the fork copied."""
        self.stopping.relay_signals()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        signal.signal(signal.SIGUSR1, self._on_interrupt)
        signal.signal(signal.SIGUSR2, self._on_cancel)
        signal.signal(signal.SIGALRM, self._on_alarm)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    # Handlers run in the main thread, perhaps inside a wait on `stopping`: they set it
    # through its relay (stop_event.py), never with set().

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.stopping.set_from_signal()

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        self.interrupted = True
        self.stopping.set_from_signal()
        if self.in_handler:
            raise WorkerShutdown()

    def _on_cancel(self, signum: int, frame: Any) -> None:
        control = self.current_control
        if self.in_handler and control is not None and control.cancelled.is_set():
            raise JobCancelled("The job was cancelled and its handler did not stop in time.")

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
            current_job=self.running_job_id,
            held_jobs=self.held_job_ids,
            jobs_done=lambda: self.jobs_done,
            on_orphaned=self.stopping.set,
            on_overdue=self.stop_if_hung,
            on_renewed=self.leases_renewed,
            queues=self.options.queues,
        )
        heartbeat.start()
        self.watch.start()
        try:
            if self.pool is not None:
                self.pool.start()
                return self.recycled_or(self.pool.work())
            return self.work()
        finally:
            self.recorder.flush()
            self.hand_back_held("the worker is stopping")
            queue_database(self.alias).check_batches()
            self.watch.stop()
            heartbeat.stop()
            self.activity.report()
            self.unregister()
            self.waiter.close()

    def work(self) -> int:
        """Claim and run batches until stopped, out of work (burst) or recycled."""
        db_failures = 0
        while not self.stopping.is_set():
            try:
                jobs = self.claim()
                db_failures = 0
            except DatabaseError as exc:
                db_failures += 1
                self.database_trouble(exc, db_failures)
                continue
            if not jobs:
                # Jobs parked by a flow limit are due work: --burst waits for them.
                if self.options.burst and not self.claimer.holds_back(
                    self.options.queues, self.options.excluded
                ):
                    break
                self.waiter.wait()
                continue
            self.waiter.worked()
            self.watch.batch_started()
            self.attempts.batch_started()
            try:
                while (job := self.next_held()) is not None:
                    if self.may_start(job):
                        self.attempts.run(job)
                    if (taken := self.free_slot(job)) is not None:
                        with self.held_lock:
                            self.held.insert(0, taken)  # its slot is held: it runs next
            finally:
                self.watch.batch_finished()
            self.recorder.flush()
            self.hand_back_held("the worker is stopping")
            if self.options.max_jobs and self.jobs_done >= self.options.max_jobs:
                done = counted(self.jobs_done, "job")
                logger.info("Worker %s: %s done, recycling", self.worker_id, done)
                return EXIT_RECYCLE
            self.between_batches()
        return 0

    def recycled_or(self, code: int) -> int:
        """A pool's exit status: EXIT_RECYCLE once --max-jobs jobs are done."""
        if code == 0 and self.options.max_jobs and self.jobs_done >= self.options.max_jobs:
            done = counted(self.jobs_done, "job")
            logger.info("Worker %s: %s done, recycling", self.worker_id, done)
            return EXIT_RECYCLE
        return code

    def between_batches(self) -> None:
        """What Django's request cycle does to connections, without a reconnect per job."""
        refresh_connections()

    def claim(self, limit: int | None = None) -> list[ClaimedJob]:
        """Claim a batch, keep what fits the time budget by each job's own estimate, and
        hand the surplus back at once, unspent. With a `limit` (a pool's free slots), claim
        that many, each to start at once: nothing is kept for later, nothing handed back."""
        # The batches of the members finished since the last claim: finished (their
        # callbacks stored) if nothing is left in them, one probe per batch per round.
        queue_database(self.alias).check_batches()
        size = self.claim_size() if limit is None else limit
        # A claim keeps no more concurrency-limited jobs than it can start at once.
        self.claimer.slot_count = 1 if limit is None else limit
        if self.budget is not None:
            # --stop-after: claim no more than the jobs left to run; with none left for now,
            # wait as if idle (the supervisor stops this worker once all started).
            size = self.budget.reserve(size)
        try:
            jobs = (
                self.claimer.claim(
                    self.worker_id,
                    self.options.queues,
                    size,
                    self.conf.lease_seconds,
                    timezone.now(),
                    self.options.excluded,
                )
                if size
                else []
            )
        except DatabaseError:
            self.give_back(size)
            raise
        self.leases_confirmed = self.claimed_at = time.monotonic()
        kept, surplus = (jobs, []) if limit is not None else self.estimates.keep(jobs)
        if surplus:
            self.claimer.unclaim(self.worker_id, surplus)
        self.give_back(size - len(kept))
        with self.held_lock:
            self.held = kept
        return kept

    def may_take_next(self, since: float | None = None) -> Taking:
        """A job that freed a concurrency slot ended: the worker takes the next job of its
        key into that slot (`Claimer.pass_slot`) unless it is stopping or --max-jobs or
        --stop-after leave it no start. Past a claim budget since its last claim (a slot's:
        `since` its last assignment), only while no other job is due for it: a key's
        backlog never keeps a worker from other work for longer than one job of it."""
        if self.stopping.is_set():
            return None
        if self.options.max_jobs and self.jobs_done >= self.options.max_jobs:
            return None
        if self.budget is not None and self.budget.reserve(1) == 0:
            return None
        since = self.claimed_at if since is None else since
        return "yes" if time.monotonic() - since < CLAIM_BUDGET_SECONDS else "if alone"

    def served(self) -> tuple[Sequence[str] | None, Sequence[str]]:
        return self.options.queues, self.options.excluded

    def give_back(self, starts: int) -> None:
        """Return unused starts to the --stop-after budget."""
        if self.budget is not None and starts:
            self.budget.give_back(starts)

    def next_held(self) -> ClaimedJob | None:
        """The next job of the batch to start, unless stopping, or unless the batch's leases
        may have expired (the worker was cut off or paused): those jobs may already be
        someone else's, so they are dropped, not started."""
        if self.stopping.is_set():
            return None
        with self.held_lock:
            if not self.held:
                return None
            if time.monotonic() - self.leases_confirmed <= self.conf.lease_seconds:
                return self.held.pop(0)
            dropped, self.held = self.held, []
        logger.warning(
            "Worker %s: leases not renewed for over %g s; handing back %d unstarted jobs",
            self.worker_id,
            self.conf.lease_seconds,
            len(dropped),
        )
        self.give_back(len(dropped))
        self.unclaim_quietly(dropped)
        return None

    def holds_more(self) -> bool:
        return bool(self.held)

    def use_start(self) -> None:
        """A job starts: count it against the --stop-after budget."""
        if self.budget is not None:
            self.budget.use_one()

    def batches_completion(self, runner: JobRunner | None) -> bool:
        """Whether this job's success may wait to be recorded with its batch."""
        own = runner.batch_completion if runner is not None else None
        return self.conf.batch_completion if own is None else own

    def leases_renewed(self) -> None:
        """From the heartbeat thread, after each renewal: also the moment to write the
        statistics of the jobs finished since the last beat (the dashboard's rollup)."""
        self.leases_confirmed = time.monotonic()
        outcomes.flush()

    def held_job_ids(self) -> list[int]:
        """Every job this worker holds a lease on: running, waiting in its batch, or done but
        not yet recorded. Read from the heartbeat thread, so it copies before iterating."""
        ids = [job.id for job in list(self.held)]
        ids += self.recorder.succeeded_ids()
        current = self.current
        if current is not None:
            ids.append(current.id)
        if self.pool is not None:
            ids += self.pool.running_ids()
        return ids

    def running_job_id(self) -> int | None:
        """The job the workers table shows as running (a pool's first busy slot's)."""
        if self.current is not None:
            return self.current.id
        running = self.pool.running_ids() if self.pool is not None else []
        return running[0] if running else None

    def claim_size(self) -> int:
        """How many jobs to claim now: what fits the time budget, never past --max-jobs."""
        size = self.estimates.claim_size(self.batch_size)
        if self.options.max_jobs:
            size = max(1, min(size, self.options.max_jobs - self.jobs_done))
        return size

    def observe_duration(self, name: str, seconds: float) -> None:
        self.estimates.observe(name, seconds)

    def database_trouble(self, exc: Exception, failures: int) -> None:
        delay = min(30.0, 0.5 * 2 ** min(failures, 6))
        logger.warning(
            "Worker %s: database error (%s); reconnecting in %.1f s", self.worker_id, exc, delay
        )
        reset_connection(connections[self.alias])
        self.stopping.wait(delay)

    def register(self) -> bool:
        """Insert the heartbeat row, waiting out a database that is not up yet.

        False if the worker was told to stop before the database answered.
        """
        failures = 0
        while not self.stopping.is_set():
            try:
                insert_worker_row(self.worker_id, self.alias, self.options.queues)
                return True
            except DatabaseError as exc:
                failures += 1
                self.database_trouble(exc, failures)
        return False

    def unregister(self) -> None:
        HOLDINGS.forget(self.worker_id)
        try:
            delete_worker_row(self.worker_id, self.alias)
        except DatabaseError as exc:
            logger.warning("Worker %s: could not remove its heartbeat row: %s", self.worker_id, exc)

    def hand_back_held(self, reason: str) -> None:
        """Claimed jobs not started yet go back to the queue at once, attempt not spent."""
        with self.held_lock:
            held, self.held = self.held, []
        self.recorder.release_many(held, reason)
        self.give_back(len(held))

    def hand_back_unstarted(self) -> None:
        """From the watch thread: the running job overran the claim budget, so the jobs
        waiting behind it go back to the queue for idle workers."""
        with self.held_lock:
            held, self.held = self.held, []
        if not held:
            return
        self.give_back(len(held))
        returned = self.unclaim_quietly(held)
        logger.debug("Worker %s: handed back %d jobs behind a long one", self.worker_id, returned)

    # The running job -----------------------------------------------------------------------

    def set_current(
        self,
        job: ClaimedJob | None,
        deadline: float | None,
        control: AttemptControl | None = None,
    ) -> None:
        """The job being run, as the heartbeat, the watch and the supervisor see it."""
        self.current = job
        self.current_deadline = deadline
        self.current_control = control
        if self.shared_current is not None:
            self.shared_current.value = job.id if job is not None else 0
