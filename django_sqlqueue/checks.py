"""System checks: misconfiguration is reported at start-up, with the fix."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.db import connections

from .backoff import Backoff
from .conf import DEFAULTS, user_settings
from .sqlite_tuning import SYNCHRONOUS_MODES
from .states import PRIORITY_MAX, PRIORITY_MIN

NUMBERS = {
    "MAX_ATTEMPTS": 1,
    "BACKOFF_BASE": 0,
    "BACKOFF_MAX": 0,
    "LEASE_SECONDS": 1,
    "GRACE_PERIOD": 0,
    "POLL_INTERVAL": 0.001,
    "BATCH_SIZE": 1,
    "SQLITE_BUSY_TIMEOUT": 0,
}


@checks.register(checks.Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    raw = getattr(settings, "SQLQUEUE", None)
    if raw is not None and not isinstance(raw, dict):
        return [
            checks.Error(
                f"SQLQUEUE must be a dict, not {type(raw).__name__}.", id="django_sqlqueue.E001"
            )
        ]
    errors: list[checks.CheckMessage] = []
    conf = user_settings()
    for key in sorted(set(conf) - set(DEFAULTS)):
        errors.append(
            checks.Error(
                f"Unknown SQLQUEUE setting {key!r}.",
                hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                id="django_sqlqueue.E002",
            )
        )
    for key, minimum in NUMBERS.items():
        if key not in conf:
            continue
        value = conf[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
            errors.append(
                checks.Error(
                    f"SQLQUEUE[{key!r}] must be a number of at least {minimum}, got {value!r}.",
                    id="django_sqlqueue.E003",
                )
            )
    for key in ("HEARTBEAT_SECONDS", "DEFAULT_TIMEOUT", "PRUNE_COMPLETED_AFTER_DAYS"):
        value = conf.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
        ):
            errors.append(
                checks.Error(
                    f"SQLQUEUE[{key!r}] must be None or a positive number, got {value!r}.",
                    id="django_sqlqueue.E003",
                )
            )
    if "BACKOFF_JITTER" in conf:
        try:
            Backoff(jitter=float(conf["BACKOFF_JITTER"]))
        except (TypeError, ValueError) as exc:
            errors.append(
                checks.Error(f"SQLQUEUE['BACKOFF_JITTER']: {exc}", id="django_sqlqueue.E003")
            )
    synchronous = conf.get("SQLITE_SYNCHRONOUS", DEFAULTS["SQLITE_SYNCHRONOUS"])
    if synchronous is not None and str(synchronous).upper() not in SYNCHRONOUS_MODES:
        errors.append(
            checks.Error(
                f"SQLQUEUE['SQLITE_SYNCHRONOUS'] is {synchronous!r}.",
                hint=f"Use one of {', '.join(SYNCHRONOUS_MODES)}, or None.",
                id="django_sqlqueue.E003",
            )
        )
    lease = conf.get("LEASE_SECONDS", DEFAULTS["LEASE_SECONDS"])
    heartbeat = conf.get("HEARTBEAT_SECONDS")
    if (
        isinstance(heartbeat, (int, float))
        and isinstance(lease, (int, float))
        and heartbeat >= lease
    ):
        errors.append(
            checks.Error(
                "SQLQUEUE['HEARTBEAT_SECONDS'] must be shorter than LEASE_SECONDS, or leases "
                "of live workers would expire between heartbeats.",
                id="django_sqlqueue.E004",
            )
        )
    priority = conf.get("DEFAULT_PRIORITY", DEFAULTS["DEFAULT_PRIORITY"])
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not PRIORITY_MIN <= priority <= PRIORITY_MAX
    ):
        errors.append(
            checks.Error(
                f"SQLQUEUE['DEFAULT_PRIORITY'] must be an integer from {PRIORITY_MIN} to "
                f"{PRIORITY_MAX}, got {priority!r}.",
                id="django_sqlqueue.E003",
            )
        )
    queue = conf.get("DEFAULT_QUEUE", DEFAULTS["DEFAULT_QUEUE"])
    if not isinstance(queue, str) or not queue.strip() or len(queue) > 100:
        errors.append(
            checks.Error(
                f"SQLQUEUE['DEFAULT_QUEUE'] must be a non-empty string of at most 100 "
                f"characters, got {queue!r}.",
                id="django_sqlqueue.E003",
            )
        )
    alias = conf.get("DATABASE", DEFAULTS["DATABASE"])
    if alias not in settings.DATABASES:
        errors.append(
            checks.Error(
                f"SQLQUEUE['DATABASE'] is {alias!r}, which is not in DATABASES.",
                hint=f"Use one of: {', '.join(settings.DATABASES)}.",
                id="django_sqlqueue.E005",
            )
        )
    return errors


@checks.register(checks.Tags.database)
def check_database(databases: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The queue database must support atomic claims (`migrate` and `check --database` run it)."""
    alias = user_settings().get("DATABASE", DEFAULTS["DATABASE"])
    if databases is None or alias not in databases or alias not in connections:
        return []
    connection = connections[alias]
    if connection.vendor == "sqlite":
        import sqlite3

        if sqlite3.sqlite_version_info < (3, 35, 0):
            return [
                checks.Error(
                    f"SQLite {sqlite3.sqlite_version} is too old: django-sqlqueue claims jobs "
                    "with UPDATE … RETURNING, which needs SQLite 3.35 or newer.",
                    id="django_sqlqueue.E010",
                )
            ]
    elif connection.vendor in ("postgresql", "mysql"):
        if not connection.features.has_select_for_update_skip_locked:
            return [
                checks.Error(
                    f"{connection.display_name} on database {alias!r} has no "
                    "SELECT … FOR UPDATE SKIP LOCKED, which workers need to claim jobs "
                    "without blocking each other.",
                    hint="Use MySQL 8.0.1+, MariaDB 10.6+ or PostgreSQL 9.5+.",
                    id="django_sqlqueue.E011",
                )
            ]
    else:
        return [
            checks.Error(
                f"django-sqlqueue does not support the {connection.vendor!r} database backend.",
                hint="Use PostgreSQL, MySQL/MariaDB or SQLite.",
                id="django_sqlqueue.E012",
            )
        ]
    return []
