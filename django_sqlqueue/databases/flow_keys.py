"""One `FlowKey` row per flow-control key, locked for the rest of the caller's transaction:
whoever decides on a key (a unique_for enqueue, a claim under a concurrency or rate limit)
holds its row, so deciders on one key take turns on every database and host."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from django.db import transaction
from django.utils import timezone

from ..models import FlowKey
from ..rows import ClaimedJob


class Parker(Protocol):
    def park(self, worker_id: str, jobs: Sequence[ClaimedJob], run_at: datetime) -> int: ...

    def unclaim(self, worker_id: str, jobs: Sequence[ClaimedJob]) -> int: ...

    def defer(self, full: Mapping[tuple[str, str], datetime], now: datetime) -> int: ...


class QueueDatabase(Protocol):
    """What flow control uses of a `QueueDatabase` (named here, not imported: base.py
    imports the claimer, which imports the gate, which imports this module)."""

    alias: str
    connection: Any

    def key_lock(self, key: str) -> contextlib.AbstractContextManager[None]: ...

    def flow_key_upsert(self) -> str: ...

    def claimer(self) -> Parker: ...


def lock_key(database: QueueDatabase, key: str) -> FlowKey:
    """The row of `key`, created if need be and locked until the transaction ends. Call it
    inside `transaction.atomic`. SQLite: the upsert takes the database's write lock."""
    hold_key(database, key)
    return FlowKey.objects.using(database.alias).select_for_update().get(key=key)


def hold_key(database: QueueDatabase, key: str) -> None:
    """`lock_key` for a caller that needs the lock, not the row (a concurrency key): the
    upsert alone locks the row (ON CONFLICT / ON DUPLICATE KEY UPDATE write it)."""
    assert database.connection.in_atomic_block, "hold_key outside a transaction"
    now = database.connection.ops.adapt_datetimefield_value(timezone.now())
    with database.key_lock(key), database.connection.cursor() as cursor:
        cursor.execute(database.flow_key_upsert(), [key, "[]", now])


def prune_keys(alias: str, before: datetime) -> int:
    """Delete the rows of keys nobody decided on since `before` (and whose unique_for window,
    if any, has closed): a key used again gets a new row. `purgejobs` calls it."""
    now = timezone.now()
    stale = FlowKey.objects.using(alias).filter(updated_at__lt=before)
    return int(stale.exclude(until__gt=now).delete()[0])


def save_key(database: QueueDatabase, row: FlowKey, *fields: str) -> None:
    row.updated_at = timezone.now()
    row.save(using=database.alias, update_fields=[*fields, "updated_at"])


__all__ = ["QueueDatabase", "hold_key", "lock_key", "prune_keys", "save_key", "transaction"]
