"""Where a chaos run keeps its database and files; shared by the harness and its settings.

Every database object and file the harness creates has `chaos` in its name, so it never
touches another engineer's databases on shared servers. Children learn the run's choices
from the environment variables below.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .. import databases

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
    return databases.pg_params(dbname or db_name())


def mysql_params(database: str | None = None) -> dict[str, Any]:
    return databases.mysql_params(database)


def django_database() -> dict[str, Any]:
    """DATABASES['default'] of the chaos project."""
    return databases.django_database_named(vendor(), db_name(), sqlite_path())
