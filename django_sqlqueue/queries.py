"""Reading the queue for people: counts per status, worker heartbeats, when a worker is stale.

Nothing here changes a row; `transitions` and `operations` do.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, QuerySet
from django.utils import timezone

from .conf import get_settings
from .models import Job, JobQuerySet, Worker
from .states import Status, summarize


def jobs(alias: str | None = None) -> JobQuerySet:
    """The job table on the queue database (or on `alias`)."""
    return Job.objects.using(alias or get_settings().database)


#: Rows counted exactly before a count says "more than" (the admin's list, `manage.py jobs`).
COUNT_CAP = 10_000


def bounded_count(queryset: QuerySet[Any], cap: int = COUNT_CAP) -> int:
    """How many rows match, counting no further than `cap + 1`: bounded work on a table of
    millions, where an exact `COUNT(*)` reads every matching row."""
    return queryset.order_by().values("pk")[: cap + 1].count()


def status_summary(queue: str | None = None, *, alias: str | None = None) -> dict[str, int]:
    queryset = jobs(alias)
    if queue:
        queryset = queryset.filter(queue=queue)
    rows = queryset.order_by().values_list("status").annotate(n=Count("id"))
    return summarize(rows)


def status_summary_by_queue(*, alias: str | None = None) -> dict[str, dict[str, int]]:
    rows = jobs(alias).order_by().values_list("queue", "status").annotate(n=Count("id"))
    grouped: dict[str, list[tuple[str, int]]] = {}
    for queue, status, count in rows:
        grouped.setdefault(queue, []).append((status, count))
    return {queue: summarize(grouped[queue]) for queue in sorted(grouped)}


#: A worker is stale once it has missed this many heartbeats.
STALE_HEARTBEATS = 3


def stale_before(now: datetime | None = None) -> datetime:
    """Heartbeats older than this mean the worker is stale (gone, hung or cut off)."""
    interval = get_settings().heartbeat_seconds * STALE_HEARTBEATS
    return (now or timezone.now()) - timedelta(seconds=interval)


#: Running jobs `jobstatus --running` lists at most.
RUNNING_LIMIT = 100


def running_jobs(*, alias: str | None = None, limit: int = RUNNING_LIMIT) -> list[dict[str, Any]]:
    """The running jobs, oldest claim first: who runs them, since when, how far they got."""
    rows = (
        jobs(alias)
        .filter(status=Status.RUNNING)
        .order_by("started_at", "id")
        .values(
            "id",
            "name",
            "queue",
            "attempts",
            "lease_owner",
            "started_at",
            "progress",
            "progress_message",
            "cancel_requested_at",
        )[:limit]
    )
    return [dict(row) for row in rows]


def worker_rows(*, alias: str | None = None) -> list[dict[str, Any]]:
    """Worker heartbeat rows, each marked stale when it missed three heartbeats."""
    conf = get_settings()
    cutoff = stale_before()
    found = Worker.objects.using(alias or conf.database).values(
        "id",
        "hostname",
        "pid",
        "queues",
        "started_at",
        "last_seen_at",
        "current_job_id",
        "jobs_done",
    )
    rows = list(found)
    # How many running jobs each holds: a worker with slots runs many (--concurrency).
    held = dict(
        jobs(alias)
        .filter(status=Status.RUNNING, lease_owner__in=[row["id"] for row in rows])
        .order_by()
        .values("lease_owner")
        .annotate(count=Count("pk"))
        .values_list("lease_owner", "count")
    )
    return [
        {**row, "stale": row["last_seen_at"] < cutoff, "held": held.get(row["id"], 0)}
        for row in rows
    ]
