"""SQLite: one UPDATE … RETURNING statement, which takes the write lock before it reads."""

from __future__ import annotations

from collections.abc import Sequence

from .base import UpdateReturningClaimer


class SQLiteClaimer(UpdateReturningClaimer):
    """A single autocommit write statement: SQLite holds the write lock for its whole run, so
    the rows it selects cannot be claimed by anyone else, and it never has to upgrade a read
    lock (the failure mode of deferred transactions). Waiting writers queue on busy_timeout.
    """

    def index_hint(self, queues: Sequence[str] | None) -> str:
        # Without ANALYZE statistics SQLite may prefer the (status, finished_at) index and
        # sort every claimable row; name the partial index that already has the claim order.
        return " INDEXED BY " + ("sqlqueue_claim_queue" if queues else "sqlqueue_claim_any")
