"""The worker's pulse: its row in the workers table, and a thread that renews its leases.

A lease renewed by a live worker is never stolen, however long its job runs; a worker that
dies stops renewing, and its jobs come back within one lease (docs/architecture.md).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence

from django.db import connections
from django.utils import timezone

from ..models import Worker
from .transitions import release_stranded, renew_leases

#: Seconds between two writes of a worker's counters (jobs done, the current job) when they
#: changed, between its heartbeats (a third of the lease: 20 s by default).
COUNTERS_SECONDS = 2.0

logger = logging.getLogger("django_sqlqueue")


def new_worker_id() -> str:
    host = socket.gethostname()[:60]
    return f"{host}:{os.getpid()}:{os.urandom(3).hex()}"


def insert_worker_row(worker_id: str, alias: str, queues: Sequence[str]) -> None:
    """One INSERT (on SQLite a read-then-write transaction could fail to lock)."""
    now = timezone.now()
    Worker(
        id=worker_id,
        hostname=socket.gethostname()[:255],
        pid=os.getpid(),
        queues=",".join(queues),
        started_at=now,
        last_seen_at=now,
    ).save(using=alias, force_insert=True)


def delete_worker_row(worker_id: str, alias: str) -> None:
    Worker.objects.using(alias).filter(id=worker_id).delete()


def close_quietly(alias: str) -> None:
    """Close this thread's connection, which may be broken: closing must not fail."""
    try:
        connections[alias].close()
    except Exception as exc:
        logger.debug("Closing %r: %s", alias, exc)


class Heartbeat(threading.Thread):
    def __init__(
        self,
        worker_id: str,
        alias: str,
        interval: float,
        lease_seconds: float,
        current_job: Callable[[], int | None],
        held_jobs: Callable[[], list[int]],
        jobs_done: Callable[[], int],
        on_orphaned: Callable[[], None],
        on_overdue: Callable[[], None],
        on_renewed: Callable[[], None] = lambda: None,
        queues: Sequence[str] = (),
    ) -> None:
        super().__init__(name=f"sqlqueue-heartbeat-{worker_id}", daemon=True)
        self.worker_id = worker_id
        self.alias = alias
        self.interval = interval
        self.lease_seconds = lease_seconds
        self.current_job = current_job
        self.held_jobs = held_jobs
        self.jobs_done = jobs_done
        self.on_orphaned = on_orphaned
        self.on_overdue = on_overdue
        self.on_renewed = on_renewed
        self.queues = queues
        self.parent_pid = os.getppid()
        self.stopped = threading.Event()
        #: (jobs done, current job) as the worker's row last said them.
        self.reported: tuple[int, int | None] = (0, None)

    def beat(self) -> None:
        # One instant for both writes, taken before either waits for a lock: every lease
        # renewed here ends after `last_seen_at`, and lease recovery counts a live worker's
        # lease that ends before it as one the worker no longer holds.
        now = timezone.now()
        renew_leases(
            self.worker_id, self.held_jobs(), self.lease_seconds, alias=self.alias, now=now
        )
        self.on_renewed()
        counters = (self.jobs_done(), self.current_job())
        seen = (
            Worker.objects.using(self.alias)
            .filter(id=self.worker_id)
            .update(last_seen_at=now, jobs_done=counters[0], current_job_id=counters[1])
        )
        self.reported = counters
        # The jobs the table says this worker runs but it does not hold (a lost claim reply,
        # a failover that lost an attempt's end) go back now, not when their lease ends.
        release_stranded(self.worker_id, alias=self.alias, now=now)
        if not seen:
            # Housekeeping took this live worker for a dead one and removed its row (its
            # heartbeat starved for three leases: a handler held the GIL, or the process was
            # stopped): a live worker is back in the workers table at its next beat.
            logger.warning(
                "Worker %s: its row was removed as stale; registering again", self.worker_id
            )
            insert_worker_row(self.worker_id, self.alias, self.queues)

    def run(self) -> None:
        """Beat until stopped. Nothing ends this thread but stop(): a worker whose heartbeat
        died would look alive to nobody and lose its leases while it runs its job. Between
        two beats, the counters (`jobs_done`, the current job) are written when they changed,
        every COUNTERS_SECONDS, so that `jobstatus --workers` and the admin are not a whole
        heartbeat behind."""
        next_beat = time.monotonic() + self.interval
        try:
            while not self.stopped.wait(min(COUNTERS_SECONDS, self.interval)):
                if time.monotonic() >= next_beat:
                    # A beat that failed (an outage, a failover) is tried again at the next
                    # wake, not a whole interval later: the first one after a reconnect
                    # renews the leases and hands back what the outage stranded.
                    beaten = self.tick()
                    next_beat = time.monotonic() + (self.interval if beaten else 0)
                else:
                    self.report_counters()
        finally:
            close_quietly(self.alias)

    def report_counters(self) -> None:
        counters = (self.jobs_done(), self.current_job())
        if counters == self.reported:
            return
        try:
            Worker.objects.using(self.alias).filter(id=self.worker_id).update(
                jobs_done=counters[0], current_job_id=counters[1]
            )
        except Exception as exc:
            logger.debug("Worker %s: counters not written: %s", self.worker_id, exc)
            close_quietly(self.alias)
            return
        self.reported = counters

    def tick(self) -> bool:
        """Check on the supervisor and the overdue job, then beat; whether the beat was
        written."""
        try:
            if os.getppid() != self.parent_pid:
                logger.warning("Worker %s: supervisor is gone; stopping", self.worker_id)
                self.on_orphaned()
            self.on_overdue()
        except Exception:
            logger.exception("Worker %s: heartbeat check failed", self.worker_id)
        try:
            self.beat()
        except Exception as exc:
            logger.warning("Worker %s: heartbeat failed: %s", self.worker_id, exc)
            close_quietly(self.alias)
            return False
        return True

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=self.interval + 5)
