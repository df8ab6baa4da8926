"""PostgreSQL LISTEN/NOTIFY: wake idle workers once per enqueueing transaction."""

from __future__ import annotations

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

CHANNEL = "django_sqlqueue"


class _Notifier:
    """An on_commit callback that sends one NOTIFY per queue the transaction enqueued into."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection
        self.queues: set[str] = set()

    def __call__(self) -> None:
        with self.connection.cursor() as cursor:
            for queue in sorted(self.queues):
                cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, queue])


def _pending_notifier(connection: BaseDatabaseWrapper) -> _Notifier | None:
    for entry in connection.run_on_commit:
        callback = entry[1]
        if isinstance(callback, _Notifier):
            return callback
    return None


def notify_enqueued(alias: str, queues: set[str]) -> None:
    """Arrange for idle workers to wake when the current transaction commits.

    Sent from the application after commit, not from a trigger per row: a transaction that
    enqueues a thousand jobs sends one notification per queue, and a rollback sends none.
    """
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return
    if connection.in_atomic_block:
        notifier = _pending_notifier(connection)
        if notifier is None:
            notifier = _Notifier(connection)
            connection.on_commit(notifier)
        notifier.queues.update(queues)
        return
    notifier = _Notifier(connection)
    notifier.queues.update(queues)
    notifier()
