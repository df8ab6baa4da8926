"""`runworkers`: start N worker processes, replace the ones that die, recover lost jobs, and
shut down gracefully.

The supervisor never runs jobs, so a handler that crashes, hangs or exhausts memory takes down
at most its own worker process. It also does the housekeeping: jobs of a worker that died are
failed at once (the supervisor saw it die), and jobs whose lease expired anywhere — a worker of
another host, a supervisor killed with its workers — are recovered on a timer.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connections

from ..conf import QueueSettings, get_settings
from ..databases import queue_database
from ..models import Worker
from ..registry import registry
from ..words import counted
from . import transitions
from .budget import JobBudget, WorkerBudget
from .chores import Chores
from .heartbeat import close_quietly, new_worker_id
from .in_flight import InFlight
from .lease_keeper import LeaseKeeper
from .maintenance import Maintenance, WorkflowSweep
from .observing import SupervisorTelemetry
from .runner import backoff_for
from .scheduler import Scheduler
from .worker import EXIT_HUNG, EXIT_RECYCLE, STOP_SIGNALS, WorkerOptions
from .worker_plans import WorkerPlan, plan_workers
from .worker_process import worker_main

logger = logging.getLogger("django_sqlqueue")

#: How often the supervisor looks at its workers and at signals it received.
TICK = 0.2
#: Seconds a worker gets to hand its job back after the grace period, before SIGKILL.
INTERRUPT_GRACE = 5.0
#: Exit status of a supervisor whose loop failed (EX_SOFTWARE: an internal error).
EXIT_LOOP_FAILED = 70


@dataclass
class Child:
    worker_id: str
    process: Any
    #: The jobs the worker is running, one cell per slot, written by the worker itself.
    current_job: InFlight
    #: The plan it was started for: its replacement is started for the same one.
    plan: int = 0
    #: Its share of the --stop-after budget (None without it).
    budget: WorkerBudget | None = None
    #: Told to stop because --stop-after has nothing left for it.
    released: bool = False
    started: float = field(default_factory=time.monotonic)


#: Threads of a worker process besides its slots that open a connection of their own: the
#: claim loop, the heartbeat, the attempt watch and, on PostgreSQL, the LISTEN connection;
#: with slots, also the writer of their outcomes (runtime/group_recording.py).
THREADS_WITH_CONNECTIONS = 4


def worst_case_connections(plans: Sequence[WorkerPlan]) -> int:
    """Connections a supervisor may hold at once: each worker's threads and, at worst, one
    per slot (a slot opens one when its handler or a flow limit uses the database; a one-slot
    worker runs jobs in its claim loop's thread), and the supervisor's own."""
    total = 1
    for plan in plans:
        concurrency = plan.options.concurrency
        slots = concurrency + 1 if concurrency > 1 else 0  # and the outcomes' writer
        total += plan.count * (THREADS_WITH_CONNECTIONS + slots)
    return total


def _context() -> Any:
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Block the stop signals for the duration (a signal sent meanwhile waits, pending)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def close_all_quietly() -> None:
    for connection in connections.all(initialized_only=True):
        close_quietly(connection.alias)


#: Job names the banner lists before it only counts the rest.
BANNER_NAMES = 10


def jobs_summary(names: list[str]) -> str:
    """The registered `@job` names, as the banner says them: how many, and the first few."""
    if not names:
        return "none registered"
    shown = ", ".join(names[:BANNER_NAMES])
    more = f", and {len(names) - BANNER_NAMES} more" if len(names) > BANNER_NAMES else ""
    return f"{len(names)} registered ({shown}{more})"


def describe_exit(code: int | None) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"was killed by {name}"
    if code == EXIT_HUNG:
        return "was replaced because a handler ignored its timeout"
    return f"exited with status {code}"


class Supervisor:
    def __init__(
        self,
        workers: int,
        options: WorkerOptions,
        grace_period: float | None = None,
        conf: QueueSettings | None = None,
        stop_after: int | None = None,
        tasks_line: str = "",
        scheduler: bool = True,
        metrics_address: tuple[str, int] | None = None,
        queue_slots: Mapping[str, int] | None = None,
    ) -> None:
        #: The worker processes to run: `workers` alike, or as many for each queue with
        #: slots of its own and for the other queues (worker_plans.py).
        self.plans = plan_workers(workers, options, queue_slots)
        self.size = sum(plan.count for plan in self.plans)
        #: What the banner says of the Tasks framework's tasks (the command describes them).
        self.tasks_line = tasks_line
        self.options = options
        self.conf = conf or get_settings()
        self.grace_period = self.conf.grace_period if grace_period is None else grace_period
        self.children: dict[int, Child] = {}
        self.signals_received = 0
        self.stop_deadline: float | None = None
        self.interrupted_at: float | None = None
        self.restart_delay = 0.0
        self.next_spawn = 0.0
        #: Plan → how many of its workers finished for good (--burst, stopping).
        self.finished: Counter[int] = Counter()
        self.context = _context()
        #: Housekeeping; its lease recovery spares this supervisor's live workers.
        self.maintenance = Maintenance(self.conf, self.live_children)
        #: Releases waiting jobs a worker's crash or a late enqueue left (workflows).
        self.workflows = WorkflowSweep(self.conf)
        #: Renews the running jobs of live workers whose own heartbeat may be starved.
        self.leases = LeaseKeeper(self.conf)
        #: Enqueues the recurring jobs' ticks (None: --no-scheduler).
        self.scheduler = Scheduler(self.conf) if scheduler else None
        #: --stop-after: the job starts the workers share (None: run until signalled).
        self.stop_after = stop_after
        self.budget = JobBudget(self.context, stop_after) if stop_after else None
        #: The chores of the loop, each run guarded (a failure is logged, the loop goes on).
        self.chores = Chores()
        #: Why the loop itself failed (then the supervisor stops its workers and exits).
        self.failure: str | None = None
        #: Rollup, JSON lines, and with --metrics-port the metrics and health endpoint.
        self.telemetry = SupervisorTelemetry(self, self.conf, metrics_address)

    # Signals ----------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.signals_received += 1
        if self.signals_received == 1:
            logger.info(
                "Received %s: no new jobs; running jobs get %g s to finish (signal again to "
                "stop at once)",
                signal.Signals(signum).name,
                self.grace_period,
            )
            self.stop_deadline = time.monotonic() + self.grace_period
            self.signal_children(signal.SIGTERM)
        else:
            logger.info("Second signal: interrupting running jobs and handing them back")
            self.stop_deadline = time.monotonic()

    @property
    def finished_slots(self) -> int:
        """Workers that finished for good (--burst, stopping): not replaced."""
        return sum(self.finished.values())

    def signal_children(self, signum: int) -> None:
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.process.pid, signum)

    # Life cycle -------------------------------------------------------------------------

    def banner(self) -> None:
        connection = connections[self.conf.database]
        logger.info(
            "django-sqlqueue supervisor pid %d: %d worker(s), queues: %s, database: %s (%s), "
            "mode: %s, jobs: %s%s",
            os.getpid(),
            self.size,
            self.served_queues()
            if len(self.plans) == 1
            else "; ".join(plan.describe() for plan in self.plans),
            self.conf.database,
            connection.vendor,
            ("burst" if self.options.burst else "continuous")
            + (f", stop after {counted(self.stop_after, 'job')}" if self.stop_after else ""),
            jobs_summary(registry.names()),
            f"; {self.tasks_line}" if self.tasks_line else "",
        )
        self.check_connections()

    def served_queues(self) -> str:
        """The queues of a supervisor whose workers are all alike, as its banner says them."""
        if self.options.queues:
            return ", ".join(self.options.queues)
        if self.options.excluded:
            return "all but " + ", ".join(self.options.excluded)
        return "all"

    def check_connections(self) -> None:
        """Say how many database connections this supervisor may open at worst, and warn
        when the server accepts fewer: a worker that cannot connect cannot run its jobs."""
        if all(plan.options.concurrency <= 1 for plan in self.plans):
            return
        worst = worst_case_connections(self.plans)
        try:
            limit = queue_database(self.conf.database).max_connections()
        except DatabaseError:
            limit = None
        logger.info(
            "Workers: %s; up to %d database connections from this supervisor (server limit: %s)",
            "; ".join(plan.describe() for plan in self.plans),
            worst,
            limit if limit is not None else "none",
        )
        if limit is not None and worst > limit:
            logger.warning(
                "Up to %d connections may be needed if every slot's handler uses the "
                "database (each worker: its slots + %d, and 1 for the supervisor), but the "
                "database accepts %d in all (max_connections): lower -n or --concurrency, "
                "raise max_connections, or put a pooler in front (docs/deployment.md)",
                worst,
                THREADS_WITH_CONNECTIONS + 1,
                limit,
            )

    def run(self) -> int:
        self.install_signal_handlers()
        self.banner()
        self.telemetry.start()
        try:
            return self.supervise()
        except Exception as exc:
            return self.abandon(exc)
        finally:
            self.telemetry.close()

    def supervise(self) -> int:
        # Move everything built so far (Django, the app registry, the handlers) out of the
        # collector's reach: the workers' collections then never write to these pages (so
        # they stay shared), and nor does the interpreter's final collection at exit.
        # No collection first: a full one took 60-70 ms of every start-up on PostgreSQL to
        # free a few dozen objects (33 in the benchmark project), which stay frozen instead.
        gc.freeze()
        # Workers first: they can claim ready jobs while housekeeping recovers expired ones.
        for index, plan in enumerate(self.plans):
            self.spawn_workers(plan.count, index)
        if self.stop_deadline is None:
            self.chores.run("scheduler", self.schedule)
            self.chores.run("maintenance", self.maintenance.run)
        while True:
            self.chores.run("telemetry", self.telemetry.tick)
            self.reap()
            self.chores.run("lease renewal", self.renew_leases)
            if self.stop_deadline is not None:
                if self.drain():
                    break
            elif self.options.burst and not self.children and self.finished_slots >= self.size:
                break
            else:
                if not self.all_jobs_started():
                    self.fill()
                elif not self.children:
                    logger.info(
                        "%s run (--stop-after); stopping", counted(self.stop_after or 0, "job")
                    )
                    break
                else:
                    self.release_idle_workers()
                self.chores.run("scheduler", self.schedule)
                if self.maintenance.due:
                    self.chores.run("maintenance", self.maintenance.run)
                if self.workflows.due:
                    self.chores.run("workflow sweep", self.workflows.run)
            self.wait_for_children(self.next_wait())
        self.chores.run("maintenance", self.maintenance.run)
        close_all_quietly()
        logger.info("Supervisor stopped")
        return 0

    def abandon(self, error: Exception) -> int:
        """The loop itself failed (a bug): stop the workers as a shutdown would, and exit
        non-zero so that the process manager starts a fresh supervisor. Staying up without
        the loop would leave dead workers unreplaced and schedules unticked."""
        self.failure = f"{type(error).__name__}: {error}"
        logger.critical(
            "The supervisor's loop failed (%s); stopping its workers and exiting with status %d",
            self.failure,
            EXIT_LOOP_FAILED,
            exc_info=error,
        )
        children = list(self.children.values())
        grace_ends = time.monotonic() + self.grace_period
        for signum, until in ((signal.SIGTERM, grace_ends), (signal.SIGUSR1, None)):
            for child in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.process.pid, signum)
            until = until or time.monotonic() + INTERRUPT_GRACE
            for child in children:
                child.process.join(max(0.0, until - time.monotonic()))
        for child in children:
            if child.process.exitcode is None:
                child.process.kill()
                child.process.join()
            with contextlib.suppress(Exception):  # best effort: leases expire otherwise
                self.recover_child(child, "its supervisor failed", child.current_job.ids())
        self.children.clear()
        return EXIT_LOOP_FAILED

    def live_children(self) -> dict[str, int]:
        """The workers this supervisor knows are alive, id → pid (a dead one is reaped and
        recovered at once, so its lease never needs to expire)."""
        return {
            child.worker_id: child.process.pid
            for child in self.children.values()
            if child.process.exitcode is None
        }

    def renew_leases(self) -> None:
        self.leases.run(self.children.values())

    def schedule(self) -> None:
        if self.scheduler is not None:
            self.scheduler.run()

    def next_wait(self) -> float:
        """Seconds until the next look: a tick, and the scheduler wakes for a recurring job's
        next tick in between (to the millisecond, not to the tick)."""
        if self.scheduler is None or self.stop_deadline is not None:
            return TICK
        return min(TICK, self.scheduler.seconds_until_due())

    def spawn_workers(self, count: int, plan: int = 0) -> None:
        """Start up to `count` workers of `plan`, none once a stop signal has come."""
        for _ in range(count):
            if self.stop_deadline is not None:
                return
            self.spawn(plan)

    def spawn(self, plan: int = 0) -> None:
        worker_id = new_worker_id()
        options = self.plans[plan].options
        # A forked child must not share this process's database sockets.
        close_all_quietly()
        current_job = InFlight(self.context, options.concurrency)
        budget = self.budget.slot(self.context) if self.budget else None
        process = self.context.Process(
            target=worker_main,
            args=(worker_id, options, current_job, budget),
            name=f"sqlqueue-{worker_id}",
        )
        # Fork with the stop signals held back, so that none is lost in start-up. The child
        # starts with them blocked: one sent to it before its own handlers are in place waits
        # for them, instead of running the supervisor's handler its fork copied. Here, one
        # that arrives meanwhile is handled once the child is in `children`, so it is told;
        # one handled before the block (pthread_sigmask runs pending handlers as it returns)
        # means no fork at all. (The supervisor has no other thread to take a signal.)
        with signals_held():
            if self.stop_deadline is not None:
                return
            process.start()
            self.children[process.pid] = Child(worker_id, process, current_job, plan, budget)

    def wait_for_children(self, timeout: float) -> None:
        """Sleep up to `timeout`, waking as soon as a worker exits (a burst run then ends at
        once, and a crashed worker's jobs are recovered without waiting for the tick)."""
        sentinels = [child.process.sentinel for child in self.children.values()]
        if sentinels:
            multiprocessing.connection.wait(sentinels, timeout)
        else:
            time.sleep(timeout)

    def fill(self) -> None:
        """Replace workers that died, backing off if they keep dying at once."""
        if time.monotonic() < self.next_spawn:
            return
        running = Counter(child.plan for child in self.children.values())
        for index, plan in enumerate(self.plans):
            missing = plan.count - running[index] - self.finished[index]
            if missing > 0:
                self.spawn_workers(missing, index)

    def all_jobs_started(self) -> bool:
        """--stop-after: every one of its jobs has started (False without it)."""
        if self.budget is None:
            return False
        slots = [child.budget for child in self.children.values() if child.budget]
        return self.budget.all_started(slots)

    def release_idle_workers(self) -> None:
        """--stop-after, all jobs started: stop the workers with none left to run (SIGTERM:
        an idle one exits at once); the others exit when their last job is done."""
        for child in self.children.values():
            held = child.budget.held.value if child.budget else 0
            if not child.released and held == 0 and child.current_job.value == 0:
                child.released = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.process.pid, signal.SIGTERM)

    def reap(self) -> None:
        for pid, child in list(self.children.items()):
            code = child.process.exitcode
            if code is None:
                continue
            child.process.join()
            del self.children[pid]
            self.after_exit(child, code)
            self.telemetry.worker_exited(pid, code)

    def after_exit(self, child: Child, code: int) -> None:
        if self.budget is not None and child.budget is not None:
            # --stop-after: what it held and did not start (a worker that died: its claimed
            # jobs go back to the queue unspent) can be run by another.
            self.budget.reclaim(child.budget)
        # A worker clears its running job before it exits, however it stops: one that exits
        # while it still names a job died in a handler (os._exit(0) included), whatever the
        # status says.
        running = child.current_job.ids()
        if not running:
            if code == 0 and (self.options.burst or self.stop_deadline is not None):
                self.finished[child.plan] += 1
                return
            if code in (0, EXIT_RECYCLE):
                return  # recycled after --max-jobs: fill() starts a fresh one
        why = f"process {child.process.pid} {describe_exit(code)}"
        if running and code in (0, EXIT_RECYCLE):
            why += f" while running job{'s' if len(running) > 1 else ''} " + ", ".join(
                str(job_id) for job_id in running
            )
        logger.error("Worker %s %s", child.worker_id, why)
        self.recover_child(child, why, running)
        lived = time.monotonic() - child.started
        self.restart_delay = 0.0 if lived > 10 else min(max(self.restart_delay * 2, 0.5), 30.0)
        self.next_spawn = time.monotonic() + self.restart_delay

    def drain(self) -> bool:
        """Shutdown: True once every worker is gone and its jobs are back in the queue."""
        now = time.monotonic()
        if not self.children:
            return True
        if self.interrupted_at is None and now >= (self.stop_deadline or now):
            self.interrupted_at = now
            self.signal_children(signal.SIGUSR1)
        if self.interrupted_at is not None and now - self.interrupted_at > INTERRUPT_GRACE:
            for child in self.children.values():
                logger.error("Worker %s did not stop; killing it", child.worker_id)
                child.process.kill()
                child.process.join()
                self.recover_child(child, "killed at shutdown", child.current_job.ids())
            self.children.clear()
            return True
        return False

    def recover_child(self, child: Child, why: str, running: list[int]) -> None:
        """Act at once on the jobs of a worker known dead, and remove its row. With the
        database down this can wait: the jobs' leases expire, and any supervisor recovers
        them then; the stale row is removed by housekeeping."""
        try:
            transitions.recover_worker(
                child.worker_id,
                why,
                running=running,
                alias=self.conf.database,
                backoff_for=backoff_for,
            )
            Worker.objects.using(self.conf.database).filter(id=child.worker_id).delete()
        except DatabaseError as exc:
            logger.warning(
                "Could not recover jobs of %s yet (%s); they come back when their leases expire",
                child.worker_id,
                exc,
            )
            close_quietly(self.conf.database)
