"""PostgreSQL: UPDATE … WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED) RETURNING."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..claimed import ClaimedJob
from .base import Claimer


class PostgreSQLClaimer(Claimer):
    """One statement. The LIMIT sits inside the locking subquery, so the planner cannot lock
    or update more rows than asked, and SKIP LOCKED lets concurrent workers pass each other
    instead of queueing on the same rows.
    """

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
            f"SELECT id FROM {self.table} WHERE {self.claimable_sql}{queue_sql} "
            f"AND run_at <= %s ORDER BY priority DESC, run_at, id LIMIT %s "
            f"FOR UPDATE SKIP LOCKED) RETURNING {self.columns}"
        )
        params = [*assign_params, *queue_params, self.adapt(now), limit]
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return self.ordered([ClaimedJob.from_row(row, worker_id) for row in rows])
