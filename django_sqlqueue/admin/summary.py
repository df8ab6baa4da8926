"""The bar over the job list: jobs per status under the current filters, and the backlog's age.

Every status is counted up to a cap only (bounded work), so the bar costs about the same on a
million rows as on a hundred; a capped count reads "10,000+". Counting a status alone is an
index range, so the cap is COUNT_CAP; under other filters or a search each counted row must be
read from the table, so the cap drops to FILTERED_CAP.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.formats import number_format

from ..models import Job
from ..states import Status
from .counting import COUNT_CAP
from .display import short_status

#: The cap when filters other than the status, or a search, are in force.
FILTERED_CAP = 1_000


@dataclass(frozen=True)
class StatusCount:
    status: str
    count: int
    capped: bool
    cap: int

    @property
    def label(self) -> str:
        return short_status(self.status)

    @property
    def text(self) -> str:
        if self.capped:
            return number_format(self.cap, force_grouping=True) + "+"
        return number_format(self.count, force_grouping=True)


@dataclass(frozen=True)
class Backlog:
    """The pending job that has waited longest since it became due."""

    job_id: int
    due_since: datetime

    def waited_seconds(self, now: datetime | None = None) -> float:
        return max(0.0, ((now or timezone.now()) - self.due_since).total_seconds())


def status_counts(queryset: QuerySet[Job], cap: int | None = None) -> list[StatusCount]:
    """Jobs per status, each exact up to `cap`.

    First one bounded read of at most `cap + 1` matching rows, grouped by status: when that
    many do not match, every count is exact after a single pass (what a search or a narrow
    filter needs). Otherwise each status is counted on its own, up to `cap + 1`.
    """
    if cap is None:
        cap = FILTERED_CAP if queryset.query.where else COUNT_CAP
    sample = queryset.order_by().values("status")[: cap + 1]
    alias = queryset.db
    try:
        sql, params = sample.query.get_compiler(using=alias).as_sql()
    except EmptyResultSet:  # a filter no row can match (an id beyond the column's range)
        return [StatusCount(s.value, 0, False, cap) for s in Status]
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT status, COUNT(*) FROM ({sql}) {connection.ops.quote_name('sample')} "
            "GROUP BY status",
            params,
        )
        found = {status: int(n) for status, n in cursor.fetchall()}
    if sum(found.values()) > cap:
        return capped_status_counts(queryset, cap)
    return [StatusCount(s.value, found.get(s.value, 0), False, cap) for s in Status]


def capped_status_counts(queryset: QuerySet[Job], cap: int) -> list[StatusCount]:
    """One statement: `SELECT (SELECT COUNT(*) FROM (… LIMIT cap+1)), …` per status."""
    alias = queryset.db
    connection = connections[alias]
    base = queryset.order_by().values("pk")
    columns, params = [], []
    for index, status in enumerate(Status):
        sub = base.filter(status=status.value)[: cap + 1]
        sql, sub_params = sub.query.get_compiler(using=alias).as_sql()
        columns.append(f"(SELECT COUNT(*) FROM ({sql}) {connection.ops.quote_name(f'c{index}')})")
        params.extend(sub_params)
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(columns), params)
        row = cursor.fetchone()
    return [
        StatusCount(status.value, min(int(n), cap), int(n) > cap, cap)
        for status, n in zip(Status, row, strict=True)
    ]


def counts_of_rows(jobs: Iterable[Job]) -> list[StatusCount]:
    """Jobs per status among jobs already read (every match fitted on one page)."""
    found = Counter(job.status for job in jobs)
    return [StatusCount(s.value, found.get(s.value, 0), False, COUNT_CAP) for s in Status]


def backlog_of_rows(jobs: Iterable[Job], now: datetime | None = None) -> Backlog | None:
    now = now or timezone.now()
    due = [job for job in jobs if job.status == Status.PENDING and job.run_at <= now]
    if not due:
        return None
    first = min(due, key=lambda job: (job.run_at, job.pk))
    return Backlog(job_id=first.pk, due_since=first.run_at)


def oldest_due_pending(queryset: QuerySet[Job], now: datetime | None = None) -> Backlog | None:
    """The due pending job with the earliest run_at (what a worker should have taken first)."""
    now = now or timezone.now()
    row = (
        queryset.filter(status=Status.PENDING, run_at__lte=now)
        .order_by("run_at", "id")
        .values_list("id", "run_at")
        .first()
    )
    return Backlog(job_id=row[0], due_since=row[1]) if row else None
