"""Make Django's default SQLite settings fit for a queue: WAL mode and a busy timeout.

WAL lets readers (the web process) go on while a worker writes, and the busy timeout makes a
writer wait its turn instead of failing with `database is locked`. WAL is a property of the
database file, so setting it once per connection is cheap and idempotent.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from .conf import get_settings

SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


def tune_sqlite_connection(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    if connection.vendor != "sqlite":
        return
    conf = get_settings()
    if not conf.sqlite_tune or connection.settings_dict["NAME"] in ("", ":memory:"):
        return
    if str(connection.settings_dict["NAME"]).startswith("file:memorydb"):
        return
    raw = connection.connection
    raw.execute(f"PRAGMA busy_timeout = {int(conf.sqlite_busy_timeout * 1000)}")
    mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
    if mode.lower() != "wal":
        mode = raw.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    synchronous = str(conf.sqlite_synchronous or "").upper()
    if synchronous in SYNCHRONOUS_MODES and mode.lower() == "wal":
        raw.execute(f"PRAGMA synchronous = {synchronous}")
