"""The per-minute rollup the admin's dashboard draws, so that it never reads the job table.

Each worker process (and each supervisor, for the attempts its recovery ends) tallies the
attempts it sees end in memory, per minute, queue, job name and outcome, and adds the tally to
`JobRollup` with one upsert per flush: from the worker's heartbeat thread (every
HEARTBEAT_SECONDS) and as it stops. A worker killed outright loses at most one heartbeat's
tally; the job table itself is unaffected. Supervisors also write one `QueueSample` per queue a
minute (the backlog chart) and delete both tables' rows with the pruning of completed jobs.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Iterable
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from ..databases import queue_database
from ..models import WAIT_BUCKETS, WAIT_COLUMNS, JobRollup, QueueSample
from ..outcomes import AttemptEnd

#: The rollup's key and the columns a flush adds to.
KEYS = ("minute", "queue", "name", "outcome")
SUMS = ("count", "duration_sum", *WAIT_COLUMNS)
#: Rows per upsert statement.
ROWS_PER_STATEMENT = 200
#: Days rollup rows and samples are kept when completed jobs are never pruned.
KEEP_DAYS_WITHOUT_PRUNING = 7.0
#: Rows and samples are kept at least this long, whatever the pruning (the day chart).
MIN_KEEP_DAYS = 2.0

Key = tuple[datetime, str, str, str]


def minute_of(timestamp: float) -> datetime:
    """The start of the minute of a time.time() value, as Django stores datetimes (aware UTC;
    naive local time when USE_TZ is off)."""
    moment = datetime.fromtimestamp(timestamp - timestamp % 60, tz=dt_timezone.utc)
    return moment if settings.USE_TZ else timezone.make_naive(moment)


def wait_bucket(seconds: float) -> int:
    """Index of the WAIT_BUCKETS bucket a wait falls in."""
    return bisect.bisect_left(WAIT_BUCKETS, seconds)


class RollupTally:
    """Attempts ended in this process since the last flush. Thread-safe; a forked child
    starts empty (it must not write its parent's tally a second time)."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.rows: dict[Key, list[float]] = {}
        # The minute of the last attempt: nearly every attempt falls in the same minute as the
        # one before, and building its datetime is most of a tally's cost.
        self.last_minute: tuple[float, datetime] | None = None

    def minute(self, timestamp: float) -> datetime:
        start = timestamp - timestamp % 60
        last = self.last_minute
        if last is None or last[0] != start:
            last = self.last_minute = (start, minute_of(start))
        return last[1]

    def _own_rows(self) -> dict[Key, list[float]]:
        if self.pid != os.getpid():
            self.pid = os.getpid()
            self.rows = {}
        return self.rows

    def __call__(self, end: AttemptEnd) -> None:
        key = (self.minute(end.ended), end.job.queue, end.job.name, end.outcome)
        wait = end.wait
        with self.lock:
            rows = self._own_rows()
            row = rows.get(key)
            if row is None:
                row = rows[key] = [0.0] * len(SUMS)
            row[0] += 1
            if end.duration is not None:
                row[1] += end.duration
            if wait is not None:
                row[2 + wait_bucket(wait)] += 1

    def take(self) -> dict[Key, list[float]]:
        with self.lock:
            rows = self._own_rows()
            self.rows = {}
            return rows

    def give_back(self, rows: dict[Key, list[float]]) -> None:
        """A flush failed: keep its rows for the next one."""
        with self.lock:
            own = self._own_rows()
            for key, values in rows.items():
                kept = own.setdefault(key, [0.0] * len(SUMS))
                for index, value in enumerate(values):
                    kept[index] += value

    def flush(self) -> int:
        """Add the tally to the rollup table; returns the rows written."""
        rows = self.take()
        if not rows:
            return 0
        try:
            add_to_rollup(rows.items(), self.alias)
        except BaseException:
            self.give_back(rows)
            connections[self.alias].close()
            raise
        return len(rows)


def add_to_rollup(rows: Iterable[tuple[Key, list[float]]], alias: str) -> None:
    """One upsert per ROWS_PER_STATEMENT rows, in one short transaction."""
    database = queue_database(alias)
    adapt = database.connection.ops.adapt_datetimefield_value
    table = JobRollup._meta.db_table
    items = sorted(rows)  # one lock order for every writer
    with transaction.atomic(using=alias), database.connection.cursor() as cursor:
        for start in range(0, len(items), ROWS_PER_STATEMENT):
            chunk = items[start : start + ROWS_PER_STATEMENT]
            sql = database.adding_upsert(table, KEYS, SUMS, len(chunk))
            params: list[Any] = []
            for (minute, queue, name, outcome), values in chunk:
                params += [adapt(minute), queue, name, outcome, int(values[0]), values[1]]
                params += [int(value) for value in values[2:]]
            cursor.execute(sql, params)


def write_samples(
    minute: datetime,
    counts: dict[tuple[str, str], int],
    oldest: dict[str, float],
    alias: str,
) -> int:
    """One QueueSample per queue with jobs waiting or running; the first supervisor to write
    a minute's sample wins (they all count the same table)."""
    queues = {queue for queue, status in counts} | set(oldest)
    samples = [
        QueueSample(
            minute=minute,
            queue=queue,
            pending=counts.get((queue, "pending"), 0),
            failed=counts.get((queue, "failed"), 0),
            running=counts.get((queue, "running"), 0),
            oldest_wait=oldest.get(queue),
        )
        for queue in sorted(queues)
        if any(counts.get((queue, s), 0) for s in ("pending", "failed", "running"))
        or queue in oldest
    ]
    if samples:
        QueueSample.objects.using(alias).bulk_create(samples, ignore_conflicts=True)
    return len(samples)


def keep_days(prune_completed_after_days: float | None) -> float:
    if prune_completed_after_days is None:
        return KEEP_DAYS_WITHOUT_PRUNING
    return max(prune_completed_after_days, MIN_KEEP_DAYS)


def prune(prune_completed_after_days: float | None, alias: str, now: datetime | None = None) -> int:
    """Delete rollup rows and samples older than the completed jobs pruning keeps."""
    cutoff = (now or timezone.now()) - timedelta(days=keep_days(prune_completed_after_days))
    deleted, _ = JobRollup.objects.using(alias).filter(minute__lt=cutoff).delete()
    sampled, _ = QueueSample.objects.using(alias).filter(minute__lt=cutoff).delete()
    return deleted + sampled
