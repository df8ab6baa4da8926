"""What claimers read of the paused queues: their names, once a second per claimer.

Pausing and resuming (`operations.pause_queue`, `resume_queue`) write the rows read here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.db import connections

from ..models import QueueState
from ..probes import probe

#: Seconds a worker trusts its last reading of the paused queues.
PAUSED_TTL = 1.0


def read_paused(alias: str) -> frozenset[str]:
    """The names of the paused queues, in one read of a table with a row per paused queue."""
    connection = connections[alias]
    table = connection.ops.quote_name(QueueState._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT queue FROM {table} WHERE paused_at IS NOT NULL")
        return frozenset(row[0] for row in cursor.fetchall())


@dataclass
class PausedQueues:
    """One claimer's view of the paused queues, read again once it is `ttl` seconds old."""

    alias: str
    ttl: float = PAUSED_TTL
    names: frozenset[str] = frozenset()
    read_at: float = field(default=float("-inf"))

    def current(self) -> frozenset[str]:
        now = time.monotonic()
        if now - self.read_at >= self.ttl:
            self.names = read_paused(self.alias)
            self.read_at = now
            probe("paused-read", alias=self.alias, paused=sorted(self.names))
        return self.names
