"""Where a chaos run keeps its database and files; shared by the harness and its settings.

Every database object and file the harness creates has `chaos` in its name, so it never
touches another engineer's databases on shared servers. Children learn the run's choices
from the environment variables below.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

VENDORS = ("sqlite", "postgres", "mysql")
SETTINGS_MODULE = "benchmarks.chaos.settings"
DEFAULT_DB_NAME = "chaos_sqlqueue"

ENV_VENDOR = "CHAOS_DB"
ENV_DB_NAME = "CHAOS_DB_NAME"
ENV_DIR = "CHAOS_DIR"
ENV_LEASE = "CHAOS_LEASE"


def vendor() -> str:
    value = os.environ.get(ENV_VENDOR, "sqlite")
    if value not in VENDORS:
        raise ValueError(f"{ENV_VENDOR} must be one of {', '.join(VENDORS)}, not {value!r}")
    return value


def db_name() -> str:
    name = os.environ.get(ENV_DB_NAME, DEFAULT_DB_NAME)
    if "chaos" not in name or not name.replace("_", "").isalnum():
        raise ValueError(f"{ENV_DB_NAME} must be a plain identifier containing 'chaos': {name!r}")
    return name


def work_dir() -> Path:
    path = Path(os.environ.get(ENV_DIR, "/tmp/chaos_sqlqueue"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def lease_seconds() -> float:
    return float(os.environ.get(ENV_LEASE, "4"))


def sqlite_path() -> Path:
    return work_dir() / f"{db_name()}.sqlite3"


def pg_params(dbname: str | None = None) -> dict[str, Any]:
    return {
        "host": os.environ.get("PGHOST", "127.0.0.1"),
        "port": int(os.environ.get("PGPORT", "5432")),
        "user": os.environ.get("PGUSER", "postgres"),
        "dbname": dbname or db_name(),
    }


def mysql_params(database: str | None = None) -> dict[str, Any]:
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


def django_database() -> dict[str, Any]:
    """DATABASES['default'] of the chaos project."""
    chosen = vendor()
    if chosen == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(sqlite_path())}
    if chosen == "postgres":
        pg = pg_params()
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": pg["dbname"],
            "USER": pg["user"],
            "HOST": pg["host"],
            "PORT": str(pg["port"]),
        }
    my = mysql_params(db_name())
    return {
        "ENGINE": "django.db.backends.mysql",
        "NAME": my["database"],
        "USER": my["user"],
        "PASSWORD": my["password"],
        "HOST": my["host"],
        "PORT": str(my["port"]),
        "OPTIONS": {"charset": "utf8mb4"},
    }
