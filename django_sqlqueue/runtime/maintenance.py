"""The supervisor's housekeeping: one class per chore, run in turn every few seconds.

Several supervisors (on one host or many) may run the same chores at once: each is a set of
conditional statements that is safe to repeat, so no leader is needed.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Protocol

from django.db import DatabaseError, connections
from django.utils import timezone

from ..conf import QueueSettings
from ..databases import queue_database
from ..databases.batches import BatchSweeper
from ..databases.dependencies import Sweeper
from ..models import Worker
from ..operations import prune_completed
from . import transitions
from .liveness import LiveWorkers, live_workers
from .observing import QueueSampling, RollupKeeping
from .runner import backoff_for

logger = logging.getLogger("django_sqlqueue")

#: Seconds between two sweeps of waiting jobs: the longest a job enqueued after a dependency
#: that was already claimed waits past that dependency's end.
SWEEP_INTERVAL = 1.0


class Chore(Protocol):
    def run(self) -> None: ...


class LeaseRecovery:
    """Fail (as a spent attempt) running jobs whose worker stopped renewing the lease, unless
    that worker is known to be alive (runtime/liveness.py): then it could not write, it did
    not die, and its lease is renewed as soon as it can write again."""

    def __init__(self, conf: QueueSettings, own_workers: LiveWorkers = dict) -> None:
        self.alias = conf.database
        self.own_workers = own_workers

    def run(self) -> None:
        alive = live_workers(self.alias, self.own_workers())
        counts = transitions.recover_expired_leases(
            alias=self.alias, backoff_for=backoff_for, sparing=alive
        )
        if any(counts.values()):
            logger.warning("Recovered jobs with expired leases: %s", counts)


class StaleWorkerRows:
    """Forget heartbeat rows of workers not seen for three leases (gone without a goodbye)."""

    def __init__(self, conf: QueueSettings) -> None:
        self.alias = conf.database
        self.lease_seconds = conf.lease_seconds

    def run(self) -> None:
        stale = timezone.now() - timedelta(seconds=3 * self.lease_seconds)
        Worker.objects.using(self.alias).filter(last_seen_at__lt=stale).delete()


class CompletedJobsPruning:
    """Delete one batch of completed jobs older than PRUNE_COMPLETED_AFTER_DAYS."""

    def __init__(self, conf: QueueSettings) -> None:
        self.alias = conf.database
        self.days = conf.prune_completed_after_days

    def run(self) -> None:
        if self.days is None:
            return
        pruned = prune_completed(self.days, alias=self.alias)
        if pruned:
            logger.info("Pruned %d completed jobs", pruned)


class WorkflowSweep:
    """What the workers' own looks missed, in workflows: waiting jobs with nothing left to
    wait for (their last dependency's worker died before deciding them, or they were enqueued
    after it was claimed; databases/dependencies.py), and closed batches with no member left
    (a worker died between a member's end and its look, or the batch was closed after its
    last member ended; databases/batches.py). The supervisor runs it every SWEEP_INTERVAL,
    apart from the other chores: three indexed reads when nothing waits, and bounded slices
    when some do."""

    def __init__(self, conf: QueueSettings) -> None:
        self.database = queue_database(conf.database)
        self.sweeper = Sweeper(self.database)
        self.batches = BatchSweeper(self.database)
        self.next_round = 0.0
        self.failing = False

    @property
    def due(self) -> bool:
        return time.monotonic() >= self.next_round

    def run(self) -> None:
        self.next_round = time.monotonic() + SWEEP_INTERVAL
        try:
            decided = self.sweeper.sweep()
            finished = self.batches.sweep()
        except DatabaseError as exc:
            if not self.failing:  # once per outage, not every second
                logger.warning("Sweeping the workflows failed (%s); will retry", exc)
            self.failing = True
            connections[self.database.alias].close()
            return
        self.failing = False
        if decided.ready or decided.abandoned:
            logger.info(
                "Waiting jobs with nothing left to wait for: %d released, %d cancelled",
                len(decided.ready),
                len(decided.abandoned),
            )
        if finished:
            logger.info(
                "Batches with no member left, finished by the sweep: %s",
                ", ".join(f"#{batch_id}" for batch_id in finished),
            )


class TableStatistics:
    """Keep the planner's statistics of the job table honest after a burst (PostgreSQL)."""

    def __init__(self, conf: QueueSettings) -> None:
        self.keeper = queue_database(conf.database).statistics_keeper()

    def run(self) -> None:
        self.keeper.refresh_if_stale()


class Maintenance:
    """Runs every chore in turn; a database error ends the round, the next one retries."""

    def __init__(self, conf: QueueSettings, own_workers: LiveWorkers = dict) -> None:
        self.alias = conf.database
        self.interval = max(1.0, conf.lease_seconds / 4)
        self.next_round = 0.0
        self.chores: list[Chore] = [
            LeaseRecovery(conf, own_workers),
            StaleWorkerRows(conf),
            CompletedJobsPruning(conf),
            TableStatistics(conf),
            # The admin dashboard's rollup and samples (runtime/observing.py).
            RollupKeeping(conf),
            QueueSampling(conf),
        ]

    @property
    def due(self) -> bool:
        return time.monotonic() >= self.next_round

    def run(self) -> None:
        self.next_round = time.monotonic() + self.interval
        try:
            for chore in self.chores:
                chore.run()
        except DatabaseError as exc:
            logger.warning("Housekeeping failed (%s); will retry", exc)
            connections[self.alias].close()
