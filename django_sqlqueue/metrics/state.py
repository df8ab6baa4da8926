"""The queue's state as gauges need it, read with bounded work on a table of millions of rows.

- Jobs per queue and status: each status is read through the (status, id) index up to
  `STATE_CAP + 1` rows, newest first, and those rows are counted by queue. A status with more
  rows than the cap is marked `capped`: its counts are a lower bound (completed jobs usually
  are; a healthy backlog never is).
- The oldest job waiting to run, per queue: due claimable jobs (pending, or failed with their
  retry due) through the claim index, which holds only claimable rows.
- Workers by state, from the small worker table.

Three statements in all; callers cache the result for a few seconds (never a count per scrape).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections
from django.utils import timezone

from ..conf import get_settings
from ..databases import queue_database
from ..models import Job, Worker
from ..queries import stale_before
from ..rows import to_datetime
from ..states import Status

#: Rows of one status counted exactly before its count is a lower bound.
STATE_CAP = 10_000
#: Worker states, as `sqlqueue_workers{state}` names them.
WORKER_STATES = ("busy", "idle", "stale")
#: A supervisor's slots (runworkers --concurrency), as `sqlqueue_worker_slots{state}` names
#: them: running a job, or free. Keys of the same mapping as the worker states.
SLOTS_BUSY, SLOTS_FREE = "slots:busy", "slots:free"


@dataclass
class QueueState:
    """One reading of the queue."""

    taken_at: datetime
    #: (queue, status) → jobs, exact unless the status is in `capped`.
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    capped: set[str] = field(default_factory=set)
    #: queue → seconds its oldest due claimable job has waited since its run_at.
    oldest_wait: dict[str, float] = field(default_factory=dict)
    #: busy / idle / stale → worker rows (every host's workers).
    workers: dict[str, int] = field(default_factory=dict)

    def total(self, status: str) -> int:
        return sum(n for (queue, s), n in self.counts.items() if s == status)


def count_by_queue(alias: str, cap: int = STATE_CAP) -> tuple[dict[tuple[str, str], int], set[str]]:
    """Jobs per (queue, status), each status read no further than `cap + 1` rows."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    table = quote(Job._meta.db_table)
    parts = []
    for index, status in enumerate(Status):
        alias_name = quote(f"s{index}")
        parts.append(
            f"SELECT {alias_name}.status, {alias_name}.queue, COUNT(*) FROM "
            f"(SELECT status, queue FROM {table} WHERE status = '{status.value}' "
            f"ORDER BY id DESC LIMIT {int(cap) + 1}) {alias_name} "
            f"GROUP BY {alias_name}.status, {alias_name}.queue"
        )
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts))
        rows = cursor.fetchall()
    counts: dict[tuple[str, str], int] = {}
    per_status: dict[str, int] = {}
    for status, queue, count in rows:
        counts[(queue, status)] = int(count)
        per_status[status] = per_status.get(status, 0) + int(count)
    capped = {status for status, total in per_status.items() if total > cap}
    return counts, capped


def oldest_waiting(
    alias: str, now: datetime | None = None, queue: str | None = None
) -> dict[str, float]:
    """queue → seconds the oldest due claimable job of that queue has waited."""
    now = now or timezone.now()
    connection = connections[alias]
    quote = connection.ops.quote_name
    sql = (
        f"SELECT queue, MIN(run_at) FROM {quote(Job._meta.db_table)} "
        f"WHERE {queue_database(alias).claimable_condition()} AND run_at <= %s"
    )
    params: list[Any] = [connection.ops.adapt_datetimefield_value(now)]
    if queue is not None:
        sql += " AND queue = %s"
        params.append(queue)
    with connection.cursor() as cursor:
        cursor.execute(sql + " GROUP BY queue", params)
        rows = cursor.fetchall()
    return {
        name: max(0.0, (now - to_datetime(oldest)).total_seconds())
        for name, oldest in rows
        if oldest is not None
    }


def worker_states(alias: str, now: datetime | None = None) -> dict[str, int]:
    cutoff = stale_before(now)
    states = dict.fromkeys(WORKER_STATES, 0)
    for seen, job in Worker.objects.using(alias).values_list("last_seen_at", "current_job_id"):
        if seen < cutoff:
            states["stale"] += 1
        elif job is not None:
            states["busy"] += 1
        else:
            states["idle"] += 1
    return states


def read_state(alias: str | None = None, now: datetime | None = None) -> QueueState:
    alias = alias or get_settings().database
    now = now or timezone.now()
    counts, capped = count_by_queue(alias)
    return QueueState(
        taken_at=now,
        counts=counts,
        capped=capped,
        oldest_wait=oldest_waiting(alias, now),
        workers=worker_states(alias, now),
    )
