"""What every claimer does: move up to `limit` ready jobs to `running` under one lease."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connections

from ..claimed import CLAIM_COLUMNS, ClaimedJob
from ..models import Job
from ..states import CLAIMABLE, Status


class Claimer:
    """Claims jobs atomically: no two workers ever get the same job."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.connection = connections[alias]
        quote = self.connection.ops.quote_name
        self.table = quote(Job._meta.db_table)
        self.columns = ", ".join(quote(column) for column in CLAIM_COLUMNS)
        self.claimable_sql = "status IN ({})".format(", ".join(f"'{s.value}'" for s in CLAIMABLE))

    def claim(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        lease_seconds: float,
        now: datetime,
    ) -> list[ClaimedJob]:
        raise NotImplementedError

    # Shared pieces of SQL and parameters.

    def adapt(self, value: datetime) -> Any:
        return self.connection.ops.adapt_datetimefield_value(value)

    def queue_filter(self, queues: Sequence[str] | None) -> tuple[str, list[Any]]:
        if not queues:
            return "", []
        if len(queues) == 1:
            return " AND queue = %s", [queues[0]]
        return " AND queue IN ({})".format(", ".join(["%s"] * len(queues))), list(queues)

    def running_assignments(
        self, worker_id: str, lease_seconds: float, now: datetime
    ) -> tuple[str, list[Any]]:
        sql = (
            f"status = '{Status.RUNNING.value}', attempts = attempts + 1, lease_owner = %s, "
            "lease_expires_at = %s, started_at = %s, finished_at = NULL, updated_at = %s"
        )
        expires = now + timedelta(seconds=lease_seconds)
        return sql, [worker_id, self.adapt(expires), self.adapt(now), self.adapt(now)]

    @staticmethod
    def ordered(jobs: list[ClaimedJob]) -> list[ClaimedJob]:
        return sorted(jobs, key=lambda job: job.order_key)


class UpdateReturningClaimer(Claimer):
    """One `UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING` statement.

    The LIMIT sits inside the subquery, so the planner cannot update more rows than asked.
    Subclasses add what their database needs around the subquery.
    """

    #: Appended to the subquery (PostgreSQL: FOR UPDATE SKIP LOCKED).
    lock_clause = ""

    def index_hint(self, queues: Sequence[str] | None) -> str:
        """Text after the subquery's table name (SQLite: INDEXED BY)."""
        return ""

    def claim(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        lease_seconds: float,
        now: datetime,
    ) -> list[ClaimedJob]:
        assignments, assign_params = self.running_assignments(worker_id, lease_seconds, now)
        queue_sql, queue_params = self.queue_filter(queues)
        sql = (
            f"UPDATE {self.table} SET {assignments} WHERE id IN ("
            f"SELECT id FROM {self.table}{self.index_hint(queues)} "
            f"WHERE {self.claimable_sql}{queue_sql} "
            f"AND run_at <= %s ORDER BY priority DESC, run_at, id LIMIT %s{self.lock_clause}"
            f") RETURNING {self.columns}"
        )
        params = [*assign_params, *queue_params, self.adapt(now), limit]
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return self.ordered([ClaimedJob.from_row(row, worker_id) for row in rows])
