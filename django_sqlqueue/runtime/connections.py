"""The worker's database connections: clean after every attempt, and between batches what
Django's request cycle does to them — without a reconnect per job.

Django closes connections after each request when CONN_MAX_AGE is 0 (its default); a worker
doing that would spend more time connecting than running short jobs. So a worker keeps its
connections, and closes only the broken ones and those older than a CONN_MAX_AGE the project
set explicitly.

A handler that leaves a transaction open (an atomic block entered and never exited, or
autocommit turned off) would otherwise take the worker's own writes into that transaction: the
job's completion would be rolled back with it, and a connection closed inside an atomic block
is never reopened by Django. So after every attempt the worker looks for one, rolls it back,
really resets the connection, and fails that attempt saying so (`LeakGuard`).
"""

from __future__ import annotations

import contextlib
import logging

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger("django_sqlqueue")


def refresh_connections() -> None:
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        if in_transaction(connection):
            logger.warning("A transaction was left open on %r; rolling back", connection.alias)
            reset_connection(connection)
        elif connection.errors_occurred and not connection.is_usable():
            connection.close()
        elif connection.settings_dict.get("CONN_MAX_AGE"):
            connection.close_if_unusable_or_obsolete()


def in_transaction(connection: BaseDatabaseWrapper) -> bool:
    """Inside an atomic block, or out of autocommit — without connecting to find out."""
    if connection.in_atomic_block or connection.closed_in_transaction:
        return True
    return connection.connection is not None and not connection.autocommit


def reset_connection(connection: BaseDatabaseWrapper) -> None:
    """Roll back and close, whatever state the handler left: the next query reconnects.

    Django's own close() keeps a connection closed inside an atomic block unusable until the
    block exits (`closed_in_transaction`), and a leaked block never exits; the state its
    next connect() would reset is cleared here first, so close() really closes.
    """
    raw = connection.connection
    if raw is not None and not connection.closed_in_transaction:
        with contextlib.suppress(Exception):
            raw.rollback()
    forget_transaction(connection)
    try:
        connection.close()
    except Exception as exc:  # already broken: dropping it is all that is left to do
        logger.debug("Closing %r after a leaked transaction: %s", connection.alias, exc)
    connection.connection = None


def forget_transaction(connection: BaseDatabaseWrapper) -> None:
    """Clear the atomic-block state Django's next connect() would clear anyway."""
    connection.in_atomic_block = False
    connection.savepoint_ids = []
    connection.atomic_blocks = []
    connection.needs_rollback = False
    connection.closed_in_transaction = False


class LeakGuard:
    """Around a batch's attempts: which connections were already in a transaction before the
    batch (noted once), and which others each attempt's handler left in one (then rolled
    back and reset, so the note stays true for the next attempt)."""

    def __init__(self) -> None:
        self.callers: set[str] = set()

    def before(self) -> None:
        """Remember the connections already in a transaction: run_jobs() in a test's
        transaction starts inside one, the caller's, which is not a leak."""
        self.callers = {
            connection.alias
            for connection in connections.all(initialized_only=True)
            if in_transaction(connection)
        }

    def after(self) -> str:
        """Roll back and reset every connection the handler left in a transaction; a
        description of what was left open ('' if nothing)."""
        leaks: list[str] = []
        for connection in connections.all(initialized_only=True):
            if connection.alias in self.callers or not in_transaction(connection):
                continue
            how = (
                "an atomic block that was never exited"
                if connection.in_atomic_block or connection.closed_in_transaction
                else "autocommit turned off"
            )
            leaks.append(f"{connection.alias!r} ({how})")
            reset_connection(connection)
        return ", ".join(leaks)
