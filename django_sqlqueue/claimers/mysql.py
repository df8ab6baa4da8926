"""MySQL 8 / MariaDB 10.6+: SELECT … FOR UPDATE SKIP LOCKED, then UPDATE, in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from ..claimed import ClaimedJob
from .base import Claimer


class MySQLClaimer(Claimer):
    """MySQL has no UPDATE … RETURNING and no LIMIT inside IN (subquery), so the claim is a
    locking read and an update by primary key. The read walks the index led by the generated
    `claimable` column in claim order, so InnoDB locks only the rows it hands out instead of
    every claimable row a sort would have to read first.
    """

    def claim(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        lease_seconds: float,
        now: datetime,
    ) -> list[ClaimedJob]:
        queue_sql, queue_params = self.queue_filter(queues)
        select = (
            f"SELECT {self.columns} FROM {self.table} WHERE claimable = 1{queue_sql} "
            f"AND run_at <= %s ORDER BY priority DESC, run_at, id LIMIT %s "
            f"FOR UPDATE SKIP LOCKED"
        )
        assignments, assign_params = self.running_assignments(worker_id, lease_seconds, now)
        with transaction.atomic(using=self.alias), self.connection.cursor() as cursor:
            cursor.execute(select, [*queue_params, self.adapt(now), limit])
            rows = cursor.fetchall()
            if not rows:
                return []
            ids = [row[0] for row in rows]
            placeholders = ", ".join(["%s"] * len(ids))
            cursor.execute(
                f"UPDATE {self.table} SET {assignments} WHERE id IN ({placeholders})",
                [*assign_params, *ids],
            )
        jobs = [ClaimedJob.from_row(row, worker_id) for row in rows]
        for job in jobs:
            job.attempts += 1
        return self.ordered(jobs)
