"""The benchmark databases: connection settings, and a fresh empty database for every run.

Every database object this harness creates has `bench` in its name, so it never touches
another engineer's test databases on the same servers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

VENDORS = ("sqlite", "postgres", "mysql")
#: What `--tune-peers` gives the Django-based peers on SQLite: django-sqlqueue's own tuning.
PEER_SQLITE_TUNING = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000"
#: Another name (it must contain "bench") lets a profiling session run beside a benchmark.
DB_NAME = os.environ.get("BENCH_DB_NAME", "bench_sqlqueue")
if "bench" not in DB_NAME:
    raise ValueError(f"BENCH_DB_NAME must contain 'bench', not {DB_NAME!r}")


def bench_dir() -> Path:
    path = Path(os.environ.get("BENCH_DIR", "/tmp/bench"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def sqlite_path() -> Path:
    return bench_dir() / f"{DB_NAME}.sqlite3"


def huey_path() -> Path:
    return bench_dir() / f"{DB_NAME}_huey.sqlite3"


def pg_params(dbname: str = DB_NAME) -> dict[str, Any]:
    return {
        "host": os.environ.get("PGHOST", "127.0.0.1"),
        "port": int(os.environ.get("PGPORT", "5432")),
        "user": os.environ.get("PGUSER", "postgres"),
        "dbname": dbname,
    }


def mysql_params(database: str | None = DB_NAME) -> dict[str, Any]:
    params: dict[str, Any] = {
        "host": os.environ.get("MYSQL_HOST", "127.0.0.1"),
        "port": int(os.environ.get("MYSQL_PORT", "3306")),
        "user": os.environ.get("MYSQL_USER", "root"),
        "password": os.environ.get("MYSQL_PASSWORD", ""),
        "charset": "utf8mb4",
    }
    if database:
        params["database"] = database
    return params


def django_database(vendor: str) -> dict[str, Any]:
    """The DATABASES["default"] entry: Django's defaults, nothing tuned for the benchmark."""
    return django_database_named(vendor, DB_NAME, sqlite_path())


def django_database_named(vendor: str, name: str, sqlite_file: Path) -> dict[str, Any]:
    """A DATABASES entry with Django's defaults: `sqlite_file`, or database `name` on the
    servers this harness connects to (the chaos harness uses it with its own names)."""
    if vendor == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(sqlite_file)}
    if vendor == "postgres":
        pg = pg_params(name)
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": pg["dbname"],
            "USER": pg["user"],
            "HOST": pg["host"],
            "PORT": str(pg["port"]),
        }
    if vendor == "mysql":
        my = mysql_params(name)
        return {
            "ENGINE": "django.db.backends.mysql",
            "NAME": my["database"],
            "USER": my["user"],
            "PASSWORD": my["password"],
            "HOST": my["host"],
            "PORT": str(my["port"]),
            "OPTIONS": {"charset": "utf8mb4"},
        }
    raise ValueError(f"unknown database {vendor!r}; expected one of {', '.join(VENDORS)}")


def recreate(vendor: str) -> None:
    """Drop and create the benchmark database (and Huey's file), before Django connects."""
    if vendor == "sqlite":
        for base in (sqlite_path(), huey_path()):
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{base}{suffix}").unlink(missing_ok=True)
    elif vendor == "postgres":
        import psycopg

        with psycopg.connect(**pg_params("postgres"), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {DB_NAME}")
    elif vendor == "mysql":
        import MySQLdb

        conn = MySQLdb.connect(**mysql_params(None))
        try:
            cursor = conn.cursor()
            cursor.execute(f"DROP DATABASE IF EXISTS {DB_NAME}")
            cursor.execute(f"CREATE DATABASE {DB_NAME} CHARACTER SET utf8mb4")
        finally:
            conn.close()
    else:
        raise ValueError(f"unknown database {vendor!r}")


def server_version(vendor: str) -> str:
    if vendor == "sqlite":
        import sqlite3

        return f"SQLite {sqlite3.sqlite_version}"
    if vendor == "postgres":
        import psycopg

        with psycopg.connect(**pg_params("postgres")) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return f"PostgreSQL {row[0] if row else '?'}"
    import MySQLdb

    conn = MySQLdb.connect(**mysql_params(None))
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT VERSION()")
        return f"MariaDB/MySQL {cursor.fetchone()[0]}"
    finally:
        conn.close()
