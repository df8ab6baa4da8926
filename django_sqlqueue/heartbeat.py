"""The worker's pulse: a thread that renews leases and reports the worker as alive.

A lease renewed by a live worker is never stolen, however long its job runs; a worker that
dies stops renewing, and its jobs come back within one lease (DESIGN.md §5).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from django.db import connections
from django.utils import timezone

from .models import Worker
from .services import renew_leases

logger = logging.getLogger("django_sqlqueue")


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
        self.parent_pid = os.getppid()
        self.stopped = threading.Event()

    def beat(self) -> None:
        renew_leases(self.worker_id, self.held_jobs(), self.lease_seconds, alias=self.alias)
        Worker.objects.using(self.alias).filter(id=self.worker_id).update(
            last_seen_at=timezone.now(),
            current_job_id=self.current_job(),
            jobs_done=self.jobs_done(),
        )

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                if os.getppid() != self.parent_pid:
                    logger.warning("Worker %s: supervisor is gone; stopping", self.worker_id)
                    self.on_orphaned()
                self.on_overdue()
                try:
                    self.beat()
                except Exception as exc:
                    logger.warning("Worker %s: heartbeat failed: %s", self.worker_id, exc)
                    connections[self.alias].close()
        finally:
            connections[self.alias].close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=self.interval + 5)
