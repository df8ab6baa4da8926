"""SQLite: one UPDATE … RETURNING statement, which takes the write lock before it reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..claimed import ClaimedJob
from .base import Claimer


class SQLiteClaimer(Claimer):
    """A single autocommit write statement: SQLite holds the write lock for its whole run, so
    the rows it selects cannot be claimed by anyone else, and it never has to upgrade a read
    lock (the failure mode of deferred transactions). Waiting writers queue on busy_timeout.
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
        # Without ANALYZE statistics SQLite may prefer the (status, finished_at) index and
        # sort every claimable row; name the partial index that already has the claim order.
        index = "sqlqueue_claim_any" if not queues else "sqlqueue_claim_queue"
        sql = (
            f"UPDATE {self.table} SET {assignments} WHERE id IN ("
            f"SELECT id FROM {self.table} INDEXED BY {index} "
            f"WHERE {self.claimable_sql}{queue_sql} "
            f"AND run_at <= %s ORDER BY priority DESC, run_at, id LIMIT %s"
            f") RETURNING {self.columns}"
        )
        params = [*assign_params, *queue_params, self.adapt(now), limit]
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return self.ordered([ClaimedJob.from_row(row, worker_id) for row in rows])
