"""PostgreSQL: UPDATE … WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED) RETURNING."""

from __future__ import annotations

from .base import UpdateReturningClaimer


class PostgreSQLClaimer(UpdateReturningClaimer):
    """One statement; SKIP LOCKED lets concurrent workers pass each other instead of queueing
    on the same rows, and rows are locked only after the LIMIT has picked them."""

    lock_clause = " FOR UPDATE SKIP LOCKED"
