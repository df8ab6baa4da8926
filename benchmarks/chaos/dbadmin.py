"""Create, drop and disturb the run's database, through admin connections of its own.

The faults act only on connections to the chaos database, so other databases on a shared
server are left alone. Restarting the server (`--restart-db`) is the exception: it affects
everyone on that server, and is only done when asked for.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import time
from typing import Any

from . import config

#: Commands that restart a local server, as scripts/check_services.sh starts them. Override
#: with CHAOS_RESTART_COMMAND (a shell command) for another setup.
RESTART_COMMANDS = {
    "postgres": "pg_ctlcluster --skip-systemctl-redirect "
    "$(ls /etc/postgresql | sort -V | tail -n1) main restart -m fast",
    "mysql": "mysqladmin -uroot -h127.0.0.1 shutdown && "
    "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd",
}


def _pg_admin() -> Any:
    import psycopg

    return psycopg.connect(**config.pg_params("postgres"), autocommit=True)


def _mysql_admin() -> Any:
    import MySQLdb

    connection = MySQLdb.connect(**config.mysql_params(None))
    connection.autocommit(True)
    return connection


def create_database() -> None:
    """A fresh, empty database for the run (the old one, if any, is dropped)."""
    drop_database()
    vendor, name = config.vendor(), config.db_name()
    if vendor == "postgres":
        with _pg_admin() as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    elif vendor == "mysql":
        admin = _mysql_admin()
        try:
            admin.cursor().execute(
                f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
            )
        finally:
            admin.close()


def drop_database() -> None:
    vendor, name = config.vendor(), config.db_name()
    if vendor == "sqlite":
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{config.sqlite_path()}{suffix}")
    elif vendor == "postgres":
        with _pg_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        admin = _mysql_admin()
        try:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            admin.close()


def terminate_connections() -> int:
    """Cut every connection to the chaos database, as a failover or a proxy restart would.

    Returns how many were cut. SQLite has no connections to cut: 0.
    """
    vendor, name = config.vendor(), config.db_name()
    if vendor == "postgres":
        with _pg_admin() as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            ).fetchall()
        return sum(1 for (done,) in rows if done)
    if vendor == "mysql":
        admin = _mysql_admin()
        try:
            cursor = admin.cursor()
            cursor.execute(
                "SELECT id FROM information_schema.processlist "
                "WHERE db = %s AND id <> CONNECTION_ID()",
                [name],
            )
            killed = 0
            for (thread_id,) in cursor.fetchall():
                try:
                    cursor.execute(f"KILL {int(thread_id)}")
                    killed += 1
                except Exception:  # it ended on its own meanwhile
                    pass
            return killed
        finally:
            admin.close()
    return 0


def hold_write_lock(seconds: float) -> None:
    """SQLite's nearest thing to an outage: one connection holds the write lock for a while
    (a long transaction, a backup), so every writer must wait its turn on busy_timeout."""
    import sqlite3

    connection = sqlite3.connect(config.sqlite_path(), timeout=60, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        time.sleep(seconds)
        connection.execute("COMMIT")
    finally:
        connection.close()


def restart_server(timeout: float = 120.0) -> float:
    """Restart the database server; return the seconds until it answered again."""
    vendor = config.vendor()
    command = os.environ.get("CHAOS_RESTART_COMMAND") or RESTART_COMMANDS[vendor]
    started = time.monotonic()
    subprocess.run(["bash", "-c", command], check=True, stdin=subprocess.DEVNULL)
    deadline = started + timeout
    while True:
        try:
            (_pg_admin() if vendor == "postgres" else _mysql_admin()).close()
            return time.monotonic() - started
        except Exception:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{vendor} did not answer {timeout:g} s after {shlex.quote(command)}"
                ) from None
            time.sleep(0.5)
