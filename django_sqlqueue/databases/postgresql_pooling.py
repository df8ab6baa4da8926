"""PostgreSQL behind a connection pooler (PgBouncer in transaction mode, and its kin): how the
queue tells, how idle workers still wake up at once, and the system checks that say what a
pooled project must set.

A transaction pooler lends a server connection to a client for one transaction only. Nothing
of a session survives to the next transaction: a `LISTEN` (its notifications reach whichever
client holds that server connection next, or none), session `SET`s, named prepared
statements, advisory locks, temporary tables. The queue relies on none of them across
transactions; only the idle workers' `LISTEN` needs a session, so it may go to a direct
connection of its own (SQLQUEUE['LISTEN_DATABASE']).
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from typing import Any

from django.core import checks
from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import get_settings, listen_database_setting
from ..probes import probe
from .polling import Waiter

logger = logging.getLogger("django_sqlqueue")

#: The channel idle workers LISTEN on.
CHANNEL = "django_sqlqueue"


def behind_pooler(connection: BaseDatabaseWrapper) -> bool:
    """True when a connection pooler stands between this connection and PostgreSQL.

    The server process that runs a statement is then not the one the connection was opened
    to: a pooler that shares server connections between clients (PgBouncer in any mode,
    pgcat, Odyssey) hands each client a made-up process id and cancel key of its own, since a
    cancel request must reach the pooler, not a server process the client may no longer hold.
    Port numbers, by contrast, prove nothing (a pooler may listen on 5432, a proxy on 6432).
    """
    connection.ensure_connection()
    raw = connection.connection
    info = getattr(raw, "info", None)
    # psycopg 3 keeps the id the server (or the pooler) announced at connection; psycopg2
    # asks libpq for the same.
    announced = info.backend_pid if info is not None else raw.get_backend_pid()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        row = cursor.fetchone()
    return row is not None and int(row[0]) != int(announced)


class ListeningWaiter(Waiter):
    """Sleeps on a LISTEN connection's socket; an enqueue's NOTIFY wakes it at once.

    The LISTEN connection goes to SQLQUEUE['LISTEN_DATABASE'] when it names one, otherwise to
    the queue database, unless that one is reached through a connection pooler: a LISTEN there
    would be heard by no one, and the worker would sleep its whole POLL_INTERVAL every time.
    Such a worker polls adaptively instead (10 ms after work, doubling to POLL_INTERVAL).
    """

    def __init__(self, alias: str, max_interval: float, stop: threading.Event) -> None:
        super().__init__(alias, max_interval, stop)
        self.listener: Any = None
        self.listen_alias = get_settings().listen_database
        #: None until the first wait finds out whether the queue database is pooled.
        self.polling: bool | None = False if self.listen_alias else None

    def _listen(self) -> Any:
        import psycopg

        connection = connections[self.listen_alias or self.alias]
        params = connection.get_connection_params()
        for option in ("cursor_factory", "context", "server_side_binding", "prepare_threshold"):
            params.pop(option, None)
        params.pop("pool", None)
        listener = psycopg.connect(**params, autocommit=True)
        listener.execute(f"LISTEN {CHANNEL}")
        return listener

    def _decide(self) -> bool | None:
        """Whether to poll: True behind a pooler, None while the database cannot tell."""
        try:
            pooled = behind_pooler(connections[self.alias])
        except DatabaseError:
            return None
        if pooled:
            logger.debug(
                "Database %r is reached through a connection pooler: polling for new jobs "
                "(set SQLQUEUE['LISTEN_DATABASE'] to a direct connection to wake at once)",
                self.alias,
            )
        return pooled

    def wait(self) -> None:
        if self.polling is None:
            self.polling = self._decide()
        if self.polling is not False:
            super().wait()
            return
        try:
            if self.listener is None or self.listener.closed:
                self.listener = self._listen()
            # Wake on NOTIFY, on the stop event (checked every 0.25 s), or at max_interval.
            deadline = time.monotonic() + self.max_interval
            probe("worker-idle", waiter="listen", seconds=self.max_interval)
            while not self.stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    probe("worker-woke", reason="timeout")
                    return
                ready, _, _ = select.select([self.listener.fileno()], [], [], min(remaining, 0.25))
                if ready:
                    # Drain every queued notification: one wake-up serves them all.
                    for _ in self.listener.notifies(timeout=0, stop_after=1000):
                        pass
                    probe("worker-woke", reason="notify")
                    return
            probe("worker-woke", reason="stop")
        except Exception as exc:
            probe("worker-woke", reason="error")
            logger.warning("LISTEN connection failed (%s); polling instead", exc)
            self.close()
            super().wait()

    def close(self) -> None:
        if self.listener is not None:
            with contextlib.suppress(Exception):
                self.listener.close()
            self.listener = None


def pooler_checks(alias: str, connection: BaseDatabaseWrapper) -> list[checks.CheckMessage]:
    """Warnings for a queue database reached through a connection pooler (and E013 for a
    LISTEN_DATABASE that is not PostgreSQL). Silent when the database does not answer."""
    try:
        pooled = behind_pooler(connection)
    except DatabaseError:
        return []
    messages: list[checks.CheckMessage] = []
    listen_alias = listen_database_setting()
    if listen_alias is not None:
        messages += listen_database_checks(listen_alias)
    elif pooled:
        messages.append(
            checks.Warning(
                f"The queue database {alias!r} is reached through a connection pooler, and "
                "idle workers would LISTEN for new jobs through it, where a transaction pool "
                "drops the notifications: they poll instead, and a job enqueued while they "
                "are idle may wait up to POLL_INTERVAL to start.",
                hint="Add a DATABASES entry that connects to PostgreSQL directly (same "
                "database, the server's own host and port) and name it in "
                "SQLQUEUE['LISTEN_DATABASE']: workers then LISTEN there and wake at once.",
                id="django_sqlqueue.W020",
            )
        )
    if pooled:
        messages += pooled_settings_checks(alias, connection)
    return messages


def listen_database_checks(listen_alias: str) -> list[checks.CheckMessage]:
    listen = connections[listen_alias]
    if listen.vendor != "postgresql":
        return [
            checks.Error(
                f"SQLQUEUE['LISTEN_DATABASE'] names {listen_alias!r}, a {listen.vendor} "
                "database; it must be a PostgreSQL connection to the queue database.",
                id="django_sqlqueue.E013",
            )
        ]
    try:
        pooled = behind_pooler(listen)
    except DatabaseError:
        return []
    if not pooled:
        return []
    return [
        checks.Warning(
            f"SQLQUEUE['LISTEN_DATABASE'] names {listen_alias!r}, which is reached through a "
            "connection pooler: in transaction mode it drops the notifications that wake idle "
            "workers.",
            hint="Point that entry at PostgreSQL itself (or at a pooler in session mode, and "
            "silence this warning).",
            id="django_sqlqueue.W020",
        )
    ]


def pooled_settings_checks(
    alias: str, connection: BaseDatabaseWrapper
) -> list[checks.CheckMessage]:
    """The Django settings a transaction pool needs on the queue database."""
    messages: list[checks.CheckMessage] = []
    options = connection.settings_dict.get("OPTIONS") or {}
    if options.get("prepare_threshold") is not None:
        messages.append(
            checks.Warning(
                f"DATABASES[{alias!r}]['OPTIONS']['prepare_threshold'] turns on psycopg's "
                "prepared statements, which live in one server session: through a transaction "
                "pool a later statement may meet a server that never prepared it.",
                hint="Remove it (Django's default, None, prepares nothing), unless your pooler "
                "tracks prepared statements (PgBouncer 1.21+ with max_prepared_statements).",
                id="django_sqlqueue.W021",
            )
        )
    if not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"):
        messages.append(
            checks.Warning(
                f"DATABASES[{alias!r}] is reached through a connection pooler but does not set "
                "DISABLE_SERVER_SIDE_CURSORS: QuerySet.iterator() outside a transaction opens "
                "a cursor that a transaction pool may have moved to another server by the next "
                "fetch.",
                hint=f"Set DATABASES[{alias!r}]['DISABLE_SERVER_SIDE_CURSORS'] = True.",
                id="django_sqlqueue.W022",
            )
        )
    return messages
