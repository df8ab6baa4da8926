"""Record successful attempts in batches: one UPDATE per distinct result value.

A worker that claimed several jobs records their outcomes together (River's batch completer):
for jobs returning None — the common case — a batch costs one statement instead of one per
job. Every row stays fenced by lease owner and attempt, so a worker that lost a lease still
cannot overwrite the new owner's state. The history entry of the attempt is built by the
database from the row itself (attempt, worker, start), so no per-row value is sent.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connections, transaction

from .claimed import ClaimedJob
from .models import Job
from .states import Status

#: Longest batch sent in one statement (bounded parameter count on every database).
MAX_BATCH = 200

_ENTRY_FIELDS = (
    "'attempt', attempts, 'worker', lease_owner, 'started_at', {started}, "
    "'finished_at', %s, 'outcome', 'completed', 'error', '', 'traceback', ''"
)

# How each database appends the completion entry to the row's history array.
HISTORY_APPEND = {
    "postgresql": "history || jsonb_build_array(jsonb_build_object("
    + _ENTRY_FIELDS.format(started="started_at")
    + "))",
    "sqlite": "json_insert(history, '$[#]', json_object("
    + _ENTRY_FIELDS.format(started="replace(started_at, ' ', 'T') || %s")
    + "))",
    "mysql": "JSON_ARRAY_APPEND(history, '$', JSON_OBJECT("
    + _ENTRY_FIELDS.format(started="CONCAT(REPLACE(CAST(started_at AS CHAR), ' ', 'T'), %s)")
    + "))",
}


class Completer:
    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.connection = connections[alias]
        self.vendor = self.connection.vendor
        quote = self.connection.ops.quote_name
        self.table = quote(Job._meta.db_table)
        self.history_sql = HISTORY_APPEND[self.vendor]
        self.zone_suffix = "+00:00" if settings.USE_TZ else ""

    def complete(self, results: Sequence[tuple[ClaimedJob, Any]], now: datetime) -> set[int]:
        """Mark the jobs completed with their results; return the ids actually recorded."""
        by_result: dict[str | None, list[ClaimedJob]] = defaultdict(list)
        for job, result in results:
            by_result[None if result is None else json.dumps(result)].append(job)
        recorded: set[int] = set()
        for result_text, jobs in by_result.items():
            for start in range(0, len(jobs), MAX_BATCH):
                recorded |= self._complete(jobs[start : start + MAX_BATCH], result_text, now)
        return recorded

    def _complete(self, jobs: list[ClaimedJob], result_text: str | None, now: datetime) -> set[int]:
        owner = jobs[0].lease_owner
        adapted_now = self.connection.ops.adapt_datetimefield_value(now)
        finished_iso = now.isoformat()
        started_params: list[Any] = [] if self.vendor == "postgresql" else [self.zone_suffix]
        history_params = [*started_params, finished_iso]
        result_sql = "%s::jsonb" if self.vendor == "postgresql" else "%s"
        pairs = ", ".join(["(%s, %s)"] * len(jobs))
        keys = [value for job in jobs for value in (job.id, job.attempts)]
        rows_sql = f"VALUES {pairs}" if self.vendor == "sqlite" else pairs
        # MySQL applies SET assignments in order: history must read lease_owner first.
        # `id IN` steers every planner to the primary key; the row-value test is the fence.
        sql = (
            f"UPDATE {self.table} SET history = {self.history_sql}, "
            f"status = '{Status.COMPLETED.value}', result = {result_sql}, finished_at = %s, "
            "updated_at = %s, lease_owner = '', lease_expires_at = NULL "
            f"WHERE id IN ({', '.join(['%s'] * len(jobs))}) "
            f"AND status = '{Status.RUNNING.value}' AND lease_owner = %s "
            f"AND (id, attempts) IN ({rows_sql})"
        )
        ids = [job.id for job in jobs]
        params = [*history_params, result_text, adapted_now, adapted_now, *ids, owner, *keys]
        if self.vendor == "mysql":
            return self._complete_mysql(sql, params, jobs)
        with self.connection.cursor() as cursor:
            cursor.execute(sql + " RETURNING id", params)
            return {row[0] for row in cursor.fetchall()}

    def _complete_mysql(self, sql: str, params: list[Any], jobs: list[ClaimedJob]) -> set[int]:
        """MySQL has no UPDATE … RETURNING: when rows were fenced out, read which are ours."""
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            if cursor.rowcount == len(jobs):
                return {job.id for job in jobs}
        ours = set()
        expected = {job.id: job for job in jobs}
        with transaction.atomic(using=self.alias):
            rows = Job.objects.using(self.alias).filter(id__in=list(expected))
            for job_id, status, history in rows.values_list("id", "status", "history"):
                last = history[-1] if history else {}
                job = expected[job_id]
                if (
                    status == Status.COMPLETED
                    and last.get("worker") == job.lease_owner
                    and last.get("attempt") == job.attempts
                ):
                    ours.add(job_id)
        return ours
