"""How an idle worker waits for work without burning CPU or adding latency.

- PostgreSQL: LISTEN on a dedicated connection; an enqueue's NOTIFY wakes it at once.
- SQLite: `PRAGMA data_version` changes when another connection commits; reading it costs
  microseconds and takes no lock, so the worker can look every few milliseconds.
- MySQL/MariaDB: adaptive polling, short right after work, longer while the queue stays idle.
All of them also wake every `poll_interval` seconds, for jobs whose `run_at` comes due.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from typing import Any

from django.db import connections

from .notify import CHANNEL

logger = logging.getLogger("django_sqlqueue")


class Waiter:
    """Adaptive sleep: `min_interval` after work, doubling up to `max_interval` while idle."""

    min_interval = 0.01

    def __init__(self, alias: str, max_interval: float, stop: threading.Event) -> None:
        self.alias = alias
        self.max_interval = max(max_interval, self.min_interval)
        self.stop = stop
        self.interval = self.min_interval

    def worked(self) -> None:
        self.interval = self.min_interval

    def wait(self) -> None:
        self.stop.wait(self.interval)
        self.interval = min(self.interval * 2, self.max_interval)

    def close(self) -> None:
        return None


class SQLiteWaiter(Waiter):
    """Polls `PRAGMA data_version` every few ms; claims only when something was committed.

    Right after work it looks every 5 ms (low latency while jobs trickle in); after a quiet
    couple of seconds every 25 ms, which keeps an idle worker well under 1% of a CPU.
    """

    busy_tick = 0.005
    idle_tick = 0.025
    busy_for = 2.0

    def __init__(self, alias: str, max_interval: float, stop: threading.Event) -> None:
        super().__init__(alias, max_interval, stop)
        self.version: Any = None
        self.last_work = time.monotonic()

    def worked(self) -> None:
        super().worked()
        self.last_work = time.monotonic()

    def _data_version(self) -> Any:
        connection = connections[self.alias]
        connection.ensure_connection()
        return connection.connection.execute("PRAGMA data_version").fetchone()[0]

    def wait(self) -> None:
        deadline = time.monotonic() + self.max_interval
        self.version = self._data_version()
        while (now := time.monotonic()) < deadline:
            tick = self.busy_tick if now - self.last_work < self.busy_for else self.idle_tick
            if self.stop.wait(tick):
                return
            if self._data_version() != self.version:
                return


class PostgreSQLWaiter(Waiter):
    """Sleeps on a LISTEN connection's socket; NOTIFY from an enqueue wakes it."""

    def __init__(self, alias: str, max_interval: float, stop: threading.Event) -> None:
        super().__init__(alias, max_interval, stop)
        self.listener: Any = None

    def _listen(self) -> Any:
        import psycopg

        connection = connections[self.alias]
        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        params.pop("server_side_binding", None)
        params.pop("prepare_threshold", None)
        params.pop("pool", None)
        listener = psycopg.connect(**params, autocommit=True)
        listener.execute(f"LISTEN {CHANNEL}")
        return listener

    def wait(self) -> None:
        try:
            if self.listener is None or self.listener.closed:
                self.listener = self._listen()
            # Wake on NOTIFY, on the stop event (checked every 0.25 s), or at max_interval.
            deadline = time.monotonic() + self.max_interval
            while not self.stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                ready, _, _ = select.select([self.listener.fileno()], [], [], min(remaining, 0.25))
                if ready:
                    # Drain every queued notification: one wake-up serves them all.
                    for _ in self.listener.notifies(timeout=0, stop_after=1000):
                        pass
                    return
        except Exception as exc:
            logger.warning("LISTEN connection failed (%s); polling instead", exc)
            self.close()
            super().wait()

    def close(self) -> None:
        if self.listener is not None:
            with contextlib.suppress(Exception):
                self.listener.close()
            self.listener = None


def make_waiter(alias: str, max_interval: float, stop: threading.Event) -> Waiter:
    vendor = connections[alias].vendor
    if vendor == "postgresql":
        return PostgreSQLWaiter(alias, max_interval, stop)
    if vendor == "sqlite":
        return SQLiteWaiter(alias, max_interval, stop)
    return Waiter(alias, max_interval, stop)
