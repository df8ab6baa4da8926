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
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, connections
from django.utils import timezone

from . import services
from .conf import QueueSettings, get_settings
from .models import Worker
from .registry import registry
from .table_statistics import StatisticsKeeper
from .worker import EXIT_HUNG, EXIT_RECYCLE, WorkerOptions, new_worker_id, worker_main

logger = logging.getLogger("django_sqlqueue")

#: How often the supervisor looks at its workers and at signals it received.
TICK = 0.2
#: Seconds a worker gets to hand its job back after the grace period, before SIGKILL.
INTERRUPT_GRACE = 5.0


@dataclass
class Child:
    worker_id: str
    process: Any
    #: Id of the job the worker is running (0: none), written by the worker itself.
    current_job: Any
    started: float = field(default_factory=time.monotonic)


def _context() -> Any:
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


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
    ) -> None:
        self.size = workers
        self.options = options
        self.conf = conf or get_settings()
        self.grace_period = self.conf.grace_period if grace_period is None else grace_period
        self.children: dict[int, Child] = {}
        self.signals_received = 0
        self.stop_deadline: float | None = None
        self.interrupted_at: float | None = None
        self.restart_delay = 0.0
        self.next_spawn = 0.0
        self.finished_slots = 0
        self.next_maintenance = 0.0
        self.context = _context()
        self.statistics = StatisticsKeeper(self.conf.database)

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

    def signal_children(self, signum: int) -> None:
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.process.pid, signum)

    # Life cycle -------------------------------------------------------------------------

    def banner(self) -> None:
        connection = connections[self.conf.database]
        logger.info(
            "django-sqlqueue supervisor pid %d: %d worker(s), queues: %s, database: %s (%s), "
            "mode: %s, jobs: %s",
            os.getpid(),
            self.size,
            ", ".join(self.options.queues) or "all",
            self.conf.database,
            connection.vendor,
            "burst" if self.options.burst else "continuous",
            ", ".join(registry.names()) or "none registered",
        )

    def run(self) -> int:
        self.install_signal_handlers()
        self.banner()
        # Move everything built so far (Django, the app registry, the handlers) out of the
        # collector's reach: the workers' collections then never write to these pages (so
        # they stay shared), and nor does the interpreter's final collection (80 ms at exit).
        # Collect first, so no garbage is frozen for good.
        gc.collect()
        gc.freeze()
        # Workers first: they can claim ready jobs while housekeeping recovers expired ones.
        for _ in range(self.size):
            self.spawn()
        self.maintain()
        while True:
            self.reap()
            if self.stop_deadline is not None:
                if self.drain():
                    break
            elif self.options.burst and not self.children and self.finished_slots >= self.size:
                break
            else:
                self.fill()
                if time.monotonic() >= self.next_maintenance:
                    self.maintain()
            self.wait_for_children(TICK)
        self.maintain()
        connections.close_all()
        logger.info("Supervisor stopped")
        return 0

    def spawn(self) -> None:
        worker_id = new_worker_id()
        # A forked child must not share this process's database sockets.
        connections.close_all()
        current_job = self.context.Value("q", 0, lock=False)
        process = self.context.Process(
            target=worker_main,
            args=(worker_id, self.options, current_job),
            name=f"sqlqueue-{worker_id}",
        )
        process.start()
        self.children[process.pid] = Child(worker_id, process, current_job)

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
        missing = self.size - len(self.children) - self.finished_slots
        if missing <= 0 or time.monotonic() < self.next_spawn:
            return
        for _ in range(missing):
            self.spawn()

    def reap(self) -> None:
        for pid, child in list(self.children.items()):
            code = child.process.exitcode
            if code is None:
                continue
            child.process.join()
            del self.children[pid]
            self.after_exit(child, code)

    def after_exit(self, child: Child, code: int) -> None:
        if code == 0 and (self.options.burst or self.stop_deadline is not None):
            self.finished_slots += 1
            return
        if code in (0, EXIT_RECYCLE):
            return  # recycled after --max-jobs: fill() starts a fresh one
        why = f"process {child.process.pid} {describe_exit(code)}"
        logger.error("Worker %s %s", child.worker_id, why)
        try:
            services.recover_worker(
                child.worker_id, why, running=child.current_job.value, alias=self.conf.database
            )
            Worker.objects.using(self.conf.database).filter(id=child.worker_id).delete()
        except DatabaseError as exc:
            logger.warning("Could not recover jobs of %s yet (%s)", child.worker_id, exc)
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
                services.recover_worker(
                    child.worker_id,
                    "killed at shutdown",
                    running=child.current_job.value,
                    alias=self.conf.database,
                )
            self.children.clear()
            return True
        return False

    def maintain(self) -> None:
        """Recover jobs whose lease expired, forget workers that stopped reporting, prune, and
        keep PostgreSQL's statistics of the job table current after a burst."""
        self.next_maintenance = time.monotonic() + max(1.0, self.conf.lease_seconds / 4)
        try:
            counts = services.recover_expired_leases(alias=self.conf.database)
            if any(counts.values()):
                logger.warning("Recovered jobs with expired leases: %s", counts)
            stale = timezone.now() - timedelta(seconds=3 * self.conf.lease_seconds)
            Worker.objects.using(self.conf.database).filter(last_seen_at__lt=stale).delete()
            if self.conf.prune_completed_after_days is not None:
                pruned = services.prune_completed(
                    self.conf.prune_completed_after_days, alias=self.conf.database
                )
                if pruned:
                    logger.info("Pruned %d completed jobs", pruned)
            self.statistics.refresh_if_stale()
        except DatabaseError as exc:
            logger.warning("Housekeeping failed (%s); will retry", exc)
            connections[self.conf.database].close()
