"""The supervisor keeps the leases of the jobs its live workers are running.

A worker renews its own leases from a thread; a handler running long C code that holds the
GIL (a catastrophic regex, `sum(range(10**10))`) stops every other thread of its process, and
its lease would expire while it still runs: the job would run again elsewhere, in parallel,
and the first run's result be discarded. The supervisor runs no user code, and knows each
child's running job (the worker publishes it in shared memory) and that the child is alive.

Alive means more than "not reaped": a worker frozen by SIGSTOP, or stuck without using the CPU,
must lose its lease as before. So a job's lease is renewed here only while its process is
running and its CPU time advances (read from /proc; on systems without it the worker's own
heartbeat is all there is). Each renewal is one UPDATE, fenced by the lease owner, every
HEARTBEAT_SECONDS, and only while some worker is running a job; it is the same lease renewal
a worker's heartbeat makes (`QueueDatabase.renew_leases`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any, Protocol

from django.db import DatabaseError
from django.utils import timezone

from ..conf import QueueSettings
from ..databases import queue_database
from .heartbeat import close_quietly
from .liveness import stat_fields

logger = logging.getLogger("django_sqlqueue")


class Busy(Protocol):
    """What the keeper reads of a supervisor's child (supervisor.Child)."""

    worker_id: str
    process: Any
    current_job: Any


def cpu_state(pid: int) -> tuple[str, int] | None:
    """The process's state letter and CPU ticks used so far, or None if unknown."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    try:
        return fields[0], int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None


class LeaseKeeper:
    def __init__(self, conf: QueueSettings) -> None:
        self.alias = conf.database
        self.interval = conf.heartbeat_seconds
        self.lease_seconds = conf.lease_seconds
        self.next_run = 0.0
        #: pid → (running job ids, CPU ticks) at the last look.
        self.seen: dict[int, tuple[frozenset[int], int]] = {}

    def run(self, children: Iterable[Busy]) -> int:
        """Renew the running jobs of the children working on them; how many rows moved."""
        now = time.monotonic()
        if now < self.next_run:
            return 0
        self.next_run = now + self.interval
        working = self.working(children)
        if not working:
            return 0
        try:
            database = queue_database(self.alias)
            return database.renew_leases(working, self.lease_seconds, timezone.now())
        except DatabaseError as exc:
            logger.warning("Could not renew the leases of running jobs (%s)", exc)
            close_quietly(self.alias)
            return 0

    def working(self, children: Iterable[Busy]) -> list[tuple[int, str]]:
        """(job id, worker id) of each job that a child has run since the last look, while
        the child used the CPU in between (with many slots, the jobs running at both looks)."""
        seen: dict[int, tuple[frozenset[int], int]] = {}
        working = []
        for child in children:
            running = frozenset(child.current_job.ids())
            pid = child.process.pid
            if not running or child.process.exitcode is not None:
                continue
            state = cpu_state(pid)
            if state is None or state[0] in "TtZXx":
                continue
            seen[pid] = (running, state[1])
            before = self.seen.get(pid)
            if before is not None and state[1] > before[1]:
                working += [(job_id, child.worker_id) for job_id in sorted(running & before[0])]
        self.seen = seen
        return working
