"""`runworkers --concurrency C`: one worker process runs up to C jobs at once.

Each slot is a thread that runs one job at a time exactly as a one-slot worker's main thread
does (AttemptRunner: the fenced exits, the leak guard, `atomic=True`, progress and cancel
through the watch); it opens a database connection of its own only when its handler or a flow
limit uses the database, since one writer records the outcomes of all slots
(group_recording.py). The main thread claims: never more
jobs than slots are free, so no job waits claimed behind a busy slot, and hands each to a
free slot at once. `async def` handlers run as tasks of one event loop per process
(event_loop.py), at most one per slot, so C of them overlap too.

What differs from the main thread, because no signal reaches a slot's thread:
- A time limit cannot interrupt a sync handler: the watch asks it to stop
  (`context.cancel_requested`; `raise_if_cancelled()` raises JobTimeout), and so does a
  cancel after its grace. An `async def` handler's task is cancelled then.
- A handler deaf to that for HARD_STOP_GRACE is recorded as timed out (or stopped) and costs
  its process: the pool stops claiming, hands back jobs not started, lets the other slots
  finish theirs, and the worker exits with EXIT_HUNG for the supervisor to replace. No other
  job is lost or run twice.
- The supervisor's second signal (SIGUSR1, the grace period is over) hands every job still
  running back to the queue, attempt unspent, and the process exits at once.

The jobs in flight are published one cell per slot (in_flight.py): the heartbeat renews all
their leases in one statement, the supervisor keeps them when the process is starved and, if
it dies, spends the attempts of exactly those jobs and hands the rest back.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from django.db import DatabaseError, connections

from ..conf import QueueSettings
from ..context import AttemptControl
from ..databases import queue_database
from ..databases.claiming import Claimer
from ..databases.polling import Waiter
from ..rows import ClaimedJob
from .activity_log import ActivitySummary
from .attempt import AttemptRunner
from .connections import refresh_connections
from .dispatch import DurationEstimates
from .event_loop import ProcessLoop
from .group_recording import GroupWriter, SlotRecorder
from .hard_stop import EXIT_HUNG, record_deaf
from .heartbeat import close_quietly
from .in_flight import InFlight
from .recording import OutcomeRecorder
from .runner import JobRunner
from .starts import JobStarts, Taking
from .stop_event import StopEvent
from .watch import AttemptWatch
from .worker_options import WorkerOptions


class PoolHost(Protocol):
    """What a pool needs of its worker (runtime/worker.py's JobWorker)."""

    worker_id: str
    alias: str
    conf: QueueSettings
    options: WorkerOptions
    estimates: DurationEstimates
    watch: AttemptWatch
    activity: ActivitySummary
    claimer: Claimer
    waiter: Waiter
    stopping: StopEvent
    recorder: OutcomeRecorder
    shared_current: InFlight | None
    held: list[ClaimedJob]
    held_lock: threading.Lock
    interrupted: bool
    jobs_done: int

    def claim(self, limit: int | None = None) -> list[ClaimedJob]: ...

    def use_start(self) -> None: ...

    def give_back(self, starts: int) -> None: ...

    def may_take_next(self, since: float | None = None) -> Taking: ...

    def served(self) -> tuple[Sequence[str] | None, Sequence[str]]: ...

    def database_trouble(self, exc: Exception, failures: int) -> None: ...


logger = logging.getLogger("django_sqlqueue")

#: Seconds between two looks of a pool that waits for its slots (a stop may have come).
WAIT_TICK = 0.5


class Assignment:
    """A job handed to a slot, with the claim's flow state for it (the slot's claimer needs
    it to count the job's start and free its concurrency slot)."""

    __slots__ = ("job", "reserved", "slot_key")

    def __init__(self, job: ClaimedJob, reserved: float | None, slot_key: str | None) -> None:
        self.job = job
        self.reserved = reserved
        self.slot_key = slot_key


class Slot(JobStarts, threading.Thread):
    """One slot: a thread that runs the jobs the pool hands it, one at a time. It is the
    AttemptHost of its own AttemptRunner (runtime/attempt.py)."""

    claimer: Claimer

    def __init__(self, pool: SlotPool, number: int) -> None:
        # Not a daemon: a handler still running when the process ends makes the worker
        # leave with os._exit (worker_process.end_process), never in mid-finalization.
        threading.Thread.__init__(self, name=f"sqlqueue-slot-{number}")
        self.pool = pool
        worker = pool.worker
        self.worker = worker
        self.slot = number
        self.worker_id = worker.worker_id
        self.alias = worker.alias
        self.conf = worker.conf
        self.estimates: DurationEstimates = worker.estimates
        self.watch: AttemptWatch = worker.watch
        self.recorder = SlotRecorder(
            worker.worker_id,
            worker.alias,
            worker.activity,
            worker.conf.lease_seconds,
            pool.writer,
        )
        self.attempts = AttemptRunner(self)
        self.in_handler = False
        #: When the pool handed this slot its current job: it passes its concurrency slot
        #: on as a worker does within a claim budget of its claim.
        self.assigned_at = time.monotonic()
        self.inbox: queue.SimpleQueue[Assignment | None] = queue.SimpleQueue()

    # AttemptHost ---------------------------------------------------------------------------

    @property
    def jobs_done(self) -> int:
        return self.worker.jobs_done

    @jobs_done.setter
    def jobs_done(self, value: int) -> None:
        # AttemptRunner counts an attempt with `jobs_done += 1`: one more for the worker.
        self.pool.count_done()

    def set_current(
        self,
        job: ClaimedJob | None,
        deadline: float | None,
        control: AttemptControl | None = None,
    ) -> None:
        self.pool.publish(self.slot, job)

    def holds_more(self) -> bool:
        return False  # a slot holds one job: nothing waits behind it

    def use_start(self) -> None:
        self.worker.use_start()

    def observe_duration(self, name: str, seconds: float) -> None:
        self.estimates.observe(name, seconds)

    def batches_completion(self, runner: JobRunner | None) -> bool:
        return False  # a slot records each success at once: nothing waits to be flushed

    def give_back(self, starts: int) -> None:
        self.worker.give_back(starts)

    # The thread ----------------------------------------------------------------------------

    def run(self) -> None:
        self.claimer = queue_database(self.alias).claimer()
        self.attempts.batch_started()
        try:
            while (assignment := self.inbox.get()) is not None:
                try:
                    self.take(assignment)
                except Exception:
                    logger.exception(
                        "Worker %s slot %d: job %s failed outside its handler",
                        self.worker_id,
                        self.slot,
                        assignment.job.id,
                    )
                    close_quietly(self.alias)
                finally:
                    self.pool.finished(self)
        finally:
            self.recorder.flush()
            connections.close_all()

    def take(self, assignment: Assignment) -> None:
        job: ClaimedJob | None = assignment.job
        assert job is not None
        if assignment.reserved is not None:
            self.claimer.reserved[job.id] = assignment.reserved
        if assignment.slot_key is not None:
            self.claimer.slots[job.id] = assignment.slot_key
        self.assigned_at = time.monotonic()
        while job is not None:
            if self.pool.closing.is_set():
                # Stopping (or recycling) before the job started: back to the queue, unspent.
                self.give_back(1)
                self.unclaim_quietly([job])
                self.free_slot(job)
                return
            if self.may_start(job):
                self.attempts.run(job)
            # A job of a concurrency key may pass its slot to the next job of the key.
            job = self.free_slot(job)
            if job is not None:
                self.pool.reassign(self, job)
        refresh_connections()

    def may_take_next(self) -> Taking:
        if self.pool.closing.is_set():
            return None
        return self.worker.may_take_next(since=self.assigned_at)

    def served(self) -> tuple[Sequence[str] | None, Sequence[str]]:
        return self.worker.served()


class SlotPool:
    """The slots of one worker process, and its claim loop when it has more than one."""

    def __init__(self, worker: PoolHost, size: int) -> None:
        self.worker = worker
        #: Writes the slots' outcomes, many in one statement (group_recording.py).
        self.writer = GroupWriter(
            OutcomeRecorder(
                worker.worker_id, worker.alias, worker.activity, worker.conf.lease_seconds
            )
        )
        #: Runs the slots' `async def` handlers as tasks of one loop (event_loop.py).
        self.event_loop = ProcessLoop()
        self.slots = [Slot(self, number) for number in range(1, size + 1)]
        self.idle: list[Slot] = list(reversed(self.slots))
        #: Slot → the job handed to it, until the slot is done with it.
        self.assigned: dict[int, ClaimedJob] = {}
        self.changed = threading.Condition()
        #: No more jobs start: stopping, recycling, or out of --max-jobs.
        self.closing = threading.Event()
        #: Slots whose handler is deaf to its timeout or cancel: never free again.
        self.deaf: set[int] = set()
        #: Jobs the slots finished (or handed back) so far: what the claim loop waits on.
        self.finishes = 0
        self.done_lock = threading.Lock()

    # Called by slots and the watch ---------------------------------------------------------

    def count_done(self) -> None:
        with self.done_lock:
            self.worker.jobs_done += 1

    def publish(self, slot: int, job: ClaimedJob | None) -> None:
        """The slot's running job, in the cell the supervisor reads."""
        shared = self.worker.shared_current
        if shared is not None:
            shared.set(slot - 1, job.id if job is not None else 0)

    def finished(self, slot: Slot) -> None:
        with self.changed:
            self.finishes += 1
            self.assigned.pop(slot.slot, None)
            if slot.slot not in self.deaf:
                self.idle.append(slot)
            if not self.assigned:
                self.worker.watch.busy.clear()  # nothing to watch: the watch sleeps
            self.changed.notify_all()

    def deaf_handler(self, job: ClaimedJob, what: str) -> None:
        """From the watch: a slot's handler ignored its time limit or cancel for the grace.
        Record how its attempt ended (fenced), stop taking jobs, and let the worker exit once
        the other slots are done: its process is replaced, the deaf thread with it."""
        with self.changed:
            slot = next((n for n, held in self.assigned.items() if held.id == job.id), None)
        logger.error(
            "Job %s %s ignored its %s; recording it and replacing worker %s once its other "
            "jobs are done",
            job.id,
            job.name,
            what,
            self.worker.worker_id,
        )
        if record_deaf(job, what, self.worker.alias):
            if slot is not None:
                self.publish(slot, None)
        else:
            # The supervisor recovers it when the process exits (its cell still names it).
            close_quietly(self.worker.alias)
        with self.changed:
            if slot is not None:
                self.deaf.add(slot)
                self.assigned.pop(slot, None)
            self.closing.set()
            self.changed.notify_all()

    # The claim loop --------------------------------------------------------------------------

    def start(self) -> None:
        self.event_loop.start()
        self.writer.start()
        for slot in self.slots:
            slot.start()

    def free_count(self) -> int:
        with self.changed:
            return len(self.idle)

    def busy(self) -> bool:
        with self.changed:
            return bool(self.assigned)

    def wait_for_change(self, since: int) -> None:
        """Wait (a tick at most) for a slot to finish a job, unless one did after the count
        `since` was read: checked under the lock the slots notify under, so no finish is
        missed between the look and the wait."""
        with self.changed:
            if self.finishes == since:
                self.changed.wait(WAIT_TICK)

    def reassign(self, slot: Slot, job: ClaimedJob) -> None:
        """`slot` took `job` into the concurrency slot its last job freed (a handoff)."""
        with self.changed:
            self.assigned[slot.slot] = job

    def running_ids(self) -> list[int]:
        with self.changed:
            return [job.id for job in self.assigned.values()]

    def hand_out(self, jobs: list[ClaimedJob]) -> None:
        """Each job to a free slot (the claim took no more than there are)."""
        claimer = self.worker.claimer
        with self.changed:
            self.worker.watch.batch_started()
            for job in jobs:
                slot = self.idle.pop()
                self.assigned[slot.slot] = job
                flow = claimer.reserved.pop(job.id, None), claimer.slots.pop(job.id, None)
                slot.inbox.put(Assignment(job, *flow))

    def work(self) -> int:
        """Claim for free slots until stopped, out of work (burst), recycled or deaf; then
        let the slots finish. The worker's exit status."""
        worker = self.worker
        max_jobs = worker.options.max_jobs
        db_failures = 0
        while not worker.stopping.is_set() and not self.closing.is_set():
            finishes = self.finishes
            free = self.free_count()
            if max_jobs:
                free = min(free, max_jobs - worker.jobs_done - len(self.running_ids()))
                if free <= 0 and not self.busy():
                    break
            if free <= 0:
                self.wait_for_change(finishes)
                continue
            try:
                jobs = worker.claim(limit=free)
                db_failures = 0
            except DatabaseError as exc:
                db_failures += 1
                worker.database_trouble(exc, db_failures)
                continue
            if jobs:
                worker.waiter.worked()
                self.hand_out(jobs)
                with worker.held_lock:
                    worker.held = []
                continue
            if worker.options.burst:
                if self.busy() or self.finishes != finishes:
                    # Out of work only once every slot is done and no slot finished since
                    # this claim began: a job's end may make more due (a job it enqueued, one
                    # that waited for it), after the claim looked.
                    self.wait_for_change(finishes)
                    continue
                # Jobs parked by a flow limit are due work: --burst waits for them.
                if not worker.claimer.holds_back(worker.options.queues, worker.options.excluded):
                    break
            # New work wakes it as it wakes an idle one-slot worker (NOTIFY, data_version).
            worker.waiter.wait()
        return self.finish()

    def finish(self) -> int:
        """Stop claiming; wait for the running jobs (SIGTERM: the supervisor's grace period
        bounds it; its second signal hands them back), then end the slots' threads."""
        worker = self.worker
        self.closing.set()
        while not worker.interrupted:
            seen = self.finishes
            if not self.busy():
                break
            self.wait_for_change(seen)
        if worker.interrupted:
            self.hand_back_running()
        for slot in self.slots:
            slot.inbox.put(None)
        for slot in self.slots:
            if slot.slot not in self.deaf and not worker.interrupted:
                slot.join(timeout=WAIT_TICK)
        self.writer.close()
        if not self.deaf and not worker.interrupted:
            self.event_loop.close()  # else a handler may still await on it: the exit ends it
        return EXIT_HUNG if self.deaf else 0

    def hand_back_running(self) -> None:
        """The grace period is over: every job still running goes back to the queue, attempt
        unspent (fenced: one whose slot recorded it meanwhile is left as recorded), and its
        cell is cleared, for the process to exit at once."""
        with self.changed:
            running = dict(self.assigned)
        for slot, job in running.items():
            logger.warning(
                "Job %s %s interrupted by shutdown; handed back to the queue", job.id, job.name
            )
            self.worker.recorder.release(job, "The worker shut down before the job finished.")
            self.publish(slot, None)
