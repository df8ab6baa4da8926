"""SQLite: every way the queue's SQL, waiting and connection set-up differ on SQLite.

- Claim: one autocommit `UPDATE … RETURNING`, which takes the write lock before it reads.
- Waiting: `PRAGMA data_version` changes when another connection commits.
- Connections: WAL mode and a busy timeout, so web requests read while workers write, and
  transactions that take the write lock when they begin, so they wait for it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.core import checks
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import SQLITE_SYNCHRONOUS_MODES, get_settings
from ..probes import probe
from .base import QueueDatabase
from .claiming import UpdateReturningClaimer
from .exits import ExitWriter, zone_suffix
from .inserting import Inserter
from .polling import Waiter


def qmark(sql: str) -> str:
    """Django's `%s` placeholders as the sqlite3 module's `?` (the queue's statements hold no
    literal `%`)."""
    return sql.replace("%s", "?")


class SQLiteClaimer(UpdateReturningClaimer):
    """A single autocommit write statement: SQLite holds the write lock for its whole run, so
    the rows it selects cannot be claimed by anyone else, and it never has to upgrade a read
    lock (the failure mode of deferred transactions). Waiting writers queue on busy_timeout.
    """

    def index_hint(self, queues: Sequence[str] | None) -> str:
        # Without ANALYZE statistics SQLite may prefer the (status, finished_at) index and
        # sort every claimable row; name the partial index that already has the claim order.
        return " INDEXED BY " + ("sqlqueue_claim_queue" if queues else "sqlqueue_claim_any")


class SQLiteExitWriter(ExitWriter):
    append_entry = "json_insert(history, '$[#]', {entry})"
    row_values_prefix = "VALUES "

    def timestamp_text(self, column: str) -> str:
        # Django stores "YYYY-MM-DD HH:MM:SS[.ffffff]" in UTC, without the zone.
        return f"replace({column}, ' ', 'T') || '{zone_suffix()}'"

    def driver_sql(self, sql: str) -> str:
        return qmark(sql)


class SQLiteInserter(Inserter):
    def driver_sql(self, sql: str) -> str:
        return qmark(sql)


class DataVersionWaiter(Waiter):
    """Polls `PRAGMA data_version` every few ms; claims only when something was committed.

    Reading it costs microseconds and takes no lock. Right after work it looks every 5 ms (low
    latency while jobs trickle in); after a quiet couple of seconds every 25 ms, which keeps an
    idle worker well under 1% of a CPU.
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
        probe("worker-idle", waiter="data_version", seconds=self.max_interval)
        while (now := time.monotonic()) < deadline:
            tick = self.busy_tick if now - self.last_work < self.busy_for else self.idle_tick
            if self.stop.wait(tick):
                probe("worker-woke", reason="stop")
                return
            if self._data_version() != self.version:
                probe("worker-woke", reason="changed")
                return
        probe("worker-woke", reason="timeout")


#: Bytes the WAL file is cut back to once a checkpoint has emptied it. While several workers
#: are busy, one of them is nearly always reading, so no checkpoint finishes and the WAL only
#: grows: 0.2-0.86 GB for 30,000 jobs with 4 workers (2026-12-04). SQLite's default (-1) then
#: keeps a file that size for as long as any connection stays open, which a worker's does.
WAL_SIZE_LIMIT = 64 * 1024 * 1024


def set_transaction_mode(connection: BaseDatabaseWrapper, mode: str | None) -> None:
    """Make this connection's `atomic()` blocks begin with `BEGIN <mode>`, unless the project's
    OPTIONS chose a `transaction_mode` (even None: its choice wins) or `mode` is None.

    A DEFERRED transaction that read before it writes cannot wait for the write lock: once
    another connection (a worker) committed in between, SQLite fails its first write at once
    with `database is locked`. IMMEDIATE takes the lock at BEGIN, where the busy timeout lets it
    wait its turn. Django reads OPTIONS["transaction_mode"] into this attribute each time it
    opens a connection, before `connection_created`; setting the attribute here, per
    connection, leaves the user's settings untouched.
    """
    if mode is None or "transaction_mode" in connection.settings_dict.get("OPTIONS", {}):
        return
    if hasattr(connection, "transaction_mode"):  # Django 5.1+
        connection.transaction_mode = mode


def opens_read_only(name: str) -> bool:
    """Whether a SQLite NAME is a URI that opens the file read-only (`mode=ro`, `immutable`)."""
    if not name.startswith("file:"):
        return False
    options = parse_qs(urlsplit(name).query)
    return "ro" in options.get("mode", []) or "1" in options.get("immutable", [])


class SQLiteDatabase(QueueDatabase):
    vendor = "sqlite"
    claimer_class = SQLiteClaimer
    exit_writer_class = SQLiteExitWriter
    inserter_class = SQLiteInserter
    waiter_class = DataVersionWaiter

    def estimated_rows(self, table: str) -> int | None:
        # Only after ANALYZE has filled sqlite_stat1.
        return self.estimate_from("SELECT stat FROM sqlite_stat1 WHERE tbl = %s LIMIT 1", [table])

    @classmethod
    def tune_connection(cls, connection: BaseDatabaseWrapper) -> None:
        """WAL lets readers (the web process) go on while a worker writes, and the busy timeout
        makes a writer wait its turn instead of failing with `database is locked`. WAL is a
        property of the file, so setting it on every new connection is cheap and idempotent.
        The WAL file is cut back to WAL_SIZE_LIMIT after a burst has grown it."""
        conf = get_settings()
        name = str(connection.settings_dict["NAME"])
        if not conf.sqlite_tune or name in ("", ":memory:") or name.startswith("file:memorydb"):
            return
        if connection.alias != conf.database or opens_read_only(name):
            # Another database of the project is none of the queue's business, and a
            # read-only one could not take a write lock or set WAL ("attempt to write a
            # readonly database").
            return
        set_transaction_mode(connection, conf.sqlite_transaction_mode)
        raw = connection.connection
        raw.execute(f"PRAGMA busy_timeout = {int(conf.sqlite_busy_timeout * 1000)}")
        mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
        if mode.lower() != "wal":
            mode = raw.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        synchronous = str(conf.sqlite_synchronous or "").upper()
        if synchronous in SQLITE_SYNCHRONOUS_MODES and mode.lower() == "wal":
            raw.execute(f"PRAGMA synchronous = {synchronous}")
        # Unless the project chose a limit (OPTIONS["init_command"] ran before this).
        if mode.lower() == "wal" and raw.execute("PRAGMA journal_size_limit").fetchone()[0] < 0:
            raw.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")

    @classmethod
    def check(cls, alias: str, connection: BaseDatabaseWrapper) -> list[checks.CheckMessage]:
        if sqlite3.sqlite_version_info >= (3, 35, 0):
            return []
        return [
            checks.Error(
                f"SQLite {sqlite3.sqlite_version} is too old: django-sqlqueue claims jobs "
                "with UPDATE … RETURNING, which needs SQLite 3.35 or newer.",
                id="django_sqlqueue.E010",
            )
        ]
