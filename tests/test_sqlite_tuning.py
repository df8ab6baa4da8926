"""Django's default SQLite settings work for a queue: the app turns on WAL, a busy timeout and
transactions that take the write lock when they begin."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections, transaction
from django.test.utils import override_settings

from django_sqlqueue.databases.sqlite import opens_read_only

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sqlite_only(vendor: str) -> None:
    if vendor != "sqlite":
        pytest.skip(f"WAL mode and busy_timeout are SQLite settings; this run uses {vendor}")


@pytest.fixture
def fresh_connection(alias: str, tmp_path: Path) -> Iterator[Any]:
    """`fresh_connection(name)`: a new connection, as Django makes one, to a file in tmp_path.

    A new file starts in SQLite's default rollback-journal mode, so WAL can only come from
    the app.
    """
    opened: list[Any] = []

    def connect(name: str = "fresh.sqlite3") -> Any:
        base = connections[alias]
        path = name if name == ":memory:" else str(tmp_path / name)
        settings_dict = {**base.settings_dict, "NAME": path}
        wrapper = type(base)(settings_dict, alias=alias)  # the queue's database, elsewhere
        wrapper.ensure_connection()
        opened.append(wrapper)
        return wrapper

    yield connect
    for wrapper in opened:
        wrapper.close()


def pragma(connection: Any, name: str) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA {name}")
        return cursor.fetchone()[0]


def test_the_test_database_is_in_wal_mode(alias: str, settings: Any) -> None:
    connection = connections[alias]
    connection.ensure_connection()
    assert pragma(connection, "journal_mode") == "wal"
    assert pragma(connection, "busy_timeout") == 20_000


def test_a_new_connection_is_tuned(fresh_connection: Any) -> None:
    connection = fresh_connection()
    assert pragma(connection, "journal_mode") == "wal"
    assert pragma(connection, "busy_timeout") == 20_000
    assert Path(connection.settings_dict["NAME"]).exists()


def test_busy_timeout_follows_the_setting(fresh_connection: Any, settings: Any) -> None:
    settings.SQLQUEUE = {**settings.SQLQUEUE, "SQLITE_BUSY_TIMEOUT": 2.5}
    assert pragma(fresh_connection(), "busy_timeout") == 2500


def test_opt_out_leaves_the_database_alone(fresh_connection: Any, settings: Any) -> None:
    settings.SQLQUEUE = {**settings.SQLQUEUE, "SQLITE_TUNE": False}
    connection = fresh_connection()
    assert pragma(connection, "journal_mode") == "delete"
    assert pragma(connection, "busy_timeout") != 20_000


def test_opt_out_then_opt_in(fresh_connection: Any) -> None:
    """The tuning is applied per connection: the next connection with it on gets WAL."""
    with override_settings(SQLQUEUE={"SQLITE_TUNE": False}):
        first = fresh_connection("same.sqlite3")
        assert pragma(first, "journal_mode") == "delete"
        first.close()
    second = fresh_connection("same.sqlite3")
    assert pragma(second, "journal_mode") == "wal"


def test_in_memory_databases_are_left_alone(fresh_connection: Any) -> None:
    """WAL is meaningless in memory; the tuning must not fail there."""
    connection = fresh_connection(":memory:")
    assert pragma(connection, "journal_mode") == "memory"


def test_transactions_take_the_write_lock_when_they_begin(fresh_connection: Any) -> None:
    """Django's default (DEFERRED) would fail a read-then-write transaction beside busy
    workers; tests/test_sqlite_busy_project.py shows it with real processes."""
    assert fresh_connection().transaction_mode == "IMMEDIATE"


def test_the_transaction_mode_follows_the_setting(fresh_connection: Any, settings: Any) -> None:
    settings.SQLQUEUE = {**settings.SQLQUEUE, "SQLITE_TRANSACTION_MODE": "exclusive"}
    assert fresh_connection().transaction_mode == "EXCLUSIVE"


def test_none_leaves_djangos_default(fresh_connection: Any, settings: Any) -> None:
    settings.SQLQUEUE = {**settings.SQLQUEUE, "SQLITE_TRANSACTION_MODE": None}
    assert fresh_connection().transaction_mode is None


@pytest.mark.parametrize("chosen", ["DEFERRED", "EXCLUSIVE", None])
def test_the_projects_own_transaction_mode_wins(
    alias: str, tmp_path: Path, chosen: str | None
) -> None:
    base = connections[alias]
    options = {**base.settings_dict["OPTIONS"], "transaction_mode": chosen}
    name = str(tmp_path / "own.sqlite3")
    settings_dict = {**base.settings_dict, "NAME": name, "OPTIONS": options}
    wrapper = type(base)(settings_dict, alias=alias)
    try:
        wrapper.ensure_connection()
        assert wrapper.transaction_mode == chosen
        assert pragma(wrapper, "journal_mode") == "wal", "the rest of the tuning still applies"
    finally:
        wrapper.close()


def test_tune_off_leaves_the_transaction_mode_too(fresh_connection: Any, settings: Any) -> None:
    settings.SQLQUEUE = {**settings.SQLQUEUE, "SQLITE_TUNE": False}
    assert fresh_connection().transaction_mode is None


def test_every_new_connection_gets_it_again(fresh_connection: Any) -> None:
    """Django resets the mode from OPTIONS at each connect; the app sets it again."""
    connection = fresh_connection()
    connection.close()
    connection.ensure_connection()
    assert connection.transaction_mode == "IMMEDIATE"


def test_a_transaction_holds_the_write_lock_before_it_writes(fresh_connection: Any) -> None:
    """What IMMEDIATE changes: a transaction that has only begun already keeps other writers
    out, so its own first write can never find the database changed under it."""
    first = fresh_connection("shared.sqlite3")
    with first.cursor() as cursor:
        cursor.execute("CREATE TABLE t (x)")
    second = fresh_connection("shared.sqlite3")
    second.connection.execute("PRAGMA busy_timeout = 0")
    first._start_transaction_under_autocommit()  # what atomic() runs on SQLite
    try:
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            second.connection.execute("INSERT INTO t VALUES (1)")
    finally:
        first.connection.execute("ROLLBACK")
    second.connection.execute("INSERT INTO t VALUES (1)")


def test_another_sqlite_database_of_the_project_is_left_alone(alias: str, tmp_path: Path) -> None:
    """The tuning is for the database the workers write to: another alias keeps SQLite's
    defaults (its transactions, journal and timeout are its owner's choice)."""
    base = connections[alias]
    settings_dict = {**base.settings_dict, "NAME": str(tmp_path / "other.sqlite3")}
    wrapper = type(base)(settings_dict, alias="analytics")
    try:
        wrapper.ensure_connection()
        assert pragma(wrapper, "journal_mode") == "delete"
        assert pragma(wrapper, "busy_timeout") != 20_000
        assert wrapper.transaction_mode is None
    finally:
        wrapper.close()


def test_a_read_only_alias_of_the_queue_file_opens_and_reads(alias: str) -> None:
    """A review's read-only alias (`mode=ro`) failed its first `atomic()` with "attempt to
    write a readonly database": the tuning had made its transactions BEGIN IMMEDIATE."""
    base = connections[alias]
    base.ensure_connection()
    name = f"file:{base.settings_dict['NAME']}?mode=ro"
    options = {**base.settings_dict["OPTIONS"], "uri": True}
    replica = type(base)({**base.settings_dict, "NAME": name, "OPTIONS": options}, alias="replica")
    connections["replica"] = replica
    try:
        with transaction.atomic(using="replica"), replica.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM django_sqlqueue_job")
            assert cursor.fetchone()[0] >= 0
        assert replica.transaction_mode is None
    finally:
        replica.close()
        del connections["replica"]


@pytest.mark.parametrize(
    ("name", "read_only"),
    [
        ("db.sqlite3", False),
        ("file:db.sqlite3", False),
        ("file:db.sqlite3?mode=rw", False),
        ("file:db.sqlite3?mode=ro", True),
        ("file:db.sqlite3?cache=shared&mode=ro", True),
        ("file:db.sqlite3?immutable=1", True),
    ],
)
def test_which_names_open_read_only(name: str, read_only: bool) -> None:
    """Even the queue's own alias is left untuned when it opens read-only."""
    assert opens_read_only(name) is read_only


def wal_bytes(connection: Any) -> int:
    wal = Path(f"{connection.settings_dict['NAME']}-wal")
    return wal.stat().st_size if wal.exists() else 0


@pytest.mark.parametrize("limited", [True, False], ids=["tuned", "sqlite-default"])
def test_the_wal_file_is_cut_back_once_a_held_up_checkpoint_finishes(
    fresh_connection: Any, monkeypatch: pytest.MonkeyPatch, limited: bool
) -> None:
    """A reader holding its snapshot (as busy workers nearly always do) keeps checkpoints
    from finishing, and the WAL grows past the limit. Once the reader lets go and a checkpoint
    finishes, the next commit cuts the file back to the limit. With SQLite's default, the
    control case, the file keeps its size while the connection stays open."""
    limit = 256 * 1024
    monkeypatch.setattr("django_sqlqueue.databases.sqlite.WAL_SIZE_LIMIT", limit)
    writer = fresh_connection("wal.sqlite3")
    reader = fresh_connection("wal.sqlite3")
    assert pragma(writer, "journal_size_limit") == limit
    if not limited:
        writer.connection.execute("PRAGMA journal_size_limit = -1")
    raw, held = writer.connection, reader.connection
    raw.execute("CREATE TABLE filler (data BLOB)")
    held.execute("BEGIN")
    held.execute("SELECT count(*) FROM filler").fetchone()  # its snapshot pins the WAL
    for _ in range(20):
        raw.execute("INSERT INTO filler VALUES (randomblob(100000))")
    grown = wal_bytes(writer)
    assert grown > 8 * limit
    held.execute("COMMIT")
    raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    raw.execute("INSERT INTO filler VALUES (randomblob(10))")  # restarts the WAL
    if limited:
        assert wal_bytes(writer) <= limit
    else:
        assert wal_bytes(writer) == grown


def test_a_wal_size_limit_the_project_chose_is_kept(alias: str, tmp_path: Path) -> None:
    base = connections[alias]
    options = {**base.settings_dict["OPTIONS"], "init_command": "PRAGMA journal_size_limit=1000"}
    name = str(tmp_path / "own.sqlite3")
    wrapper = type(base)({**base.settings_dict, "NAME": name, "OPTIONS": options}, alias=alias)
    try:
        wrapper.ensure_connection()
        assert pragma(wrapper, "journal_mode") == "wal"
        assert pragma(wrapper, "journal_size_limit") == 1000
    finally:
        wrapper.close()
