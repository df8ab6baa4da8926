"""System checks: misconfiguration is reported at start-up, with the fix.

Setting values are checked by the very functions the runtime reads them with (conf.SETTINGS),
so the checks cannot drift from what the workers accept.
"""

from __future__ import annotations

import difflib
from collections import Counter
from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError, connections

from .conf import SETTINGS, SETTINGS_BY_NAME, SettingError, database_alias_setting, user_settings
from .databases import UnsupportedDatabase, queue_database, vendor_class
from .scheduling.declarations import declared_schedules


@checks.register(checks.Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    raw = getattr(settings, "SQLQUEUE", None)
    if raw is not None and not isinstance(raw, dict):
        return [
            checks.Error(
                f"SQLQUEUE must be a dict, not {type(raw).__name__}.", id="django_sqlqueue.E001"
            )
        ]
    conf = user_settings()
    errors: list[checks.CheckMessage] = [
        unknown_setting(key) for key in sorted(set(conf) - set(SETTINGS_BY_NAME), key=str)
    ]
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        value = conf.get(setting.name, setting.default)
        try:
            values[setting.name] = setting.parse(value)
        except SettingError as exc:
            errors.append(checks.Error(f"SQLQUEUE[{setting.name!r}] {exc}", id=setting.error_id))
    lease, heartbeat = values.get("LEASE_SECONDS"), values.get("HEARTBEAT_SECONDS")
    if lease is not None and heartbeat is not None and heartbeat >= lease:
        errors.append(
            checks.Error(
                "SQLQUEUE['HEARTBEAT_SECONDS'] must be shorter than LEASE_SECONDS, or leases "
                "of live workers would expire between heartbeats.",
                id="django_sqlqueue.E004",
            )
        )
    return errors


@checks.register(checks.Tags.compatibility)
def check_clock(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Leases are compared as stored times: with USE_TZ off they are local wall-clock times,
    which jump when a time zone's clocks change, and every running job would look lost."""
    if settings.USE_TZ or str(settings.TIME_ZONE or "UTC").upper() in ("UTC", "ETC/UTC"):
        return []
    return [
        checks.Warning(
            f"USE_TZ is False and TIME_ZONE is {settings.TIME_ZONE!r}: job times and leases are "
            "stored in local time, so when the clocks change (daylight saving time) running "
            "jobs can be recovered as lost and run twice, and due jobs wait an hour.",
            hint="Set USE_TZ = True (Django's default), or TIME_ZONE = 'UTC'.",
            id="django_sqlqueue.W030",
        )
    ]


@checks.register(checks.Tags.compatibility)
def check_schedules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every recurring job (docs/schedules.md) can run: valid cron and time zone, a
    registered job that accepts the kwargs, known options. The supervisors skip the others."""
    return [
        checks.Error(problem.message, hint=problem.hint or None, id=problem.id)
        for problem in declared_schedules().problems
    ]


def unknown_setting(key: Any) -> checks.CheckMessage:
    known = [setting.name for setting in SETTINGS]
    close = difflib.get_close_matches(str(key).upper(), known, n=1)
    hint = f"Did you mean {close[0]!r}? " if close else ""
    return checks.Error(
        f"Unknown SQLQUEUE setting {key!r}.",
        hint=f"{hint}Known settings: {', '.join(sorted(known))}.",
        id="django_sqlqueue.E002",
    )


def checked_queue_alias(databases: Any) -> str | None:
    """The queue database's alias when the database checks run on it (Django passes the
    aliases to check), else None."""
    alias = database_alias_setting()
    if databases is None or alias not in databases or alias not in connections:
        return None
    return alias


@checks.register(checks.Tags.database)
def check_database(databases: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The queue database must support atomic claims (`migrate` and `check --database` run it)."""
    alias = checked_queue_alias(databases)
    if alias is None:
        return []
    connection = connections[alias]
    try:
        database = vendor_class(connection.vendor)
    except UnsupportedDatabase:
        return [
            checks.Error(
                f"django-sqlqueue does not support the {connection.vendor!r} database backend.",
                hint="Use PostgreSQL, MySQL/MariaDB or SQLite.",
                id="django_sqlqueue.E012",
            )
        ]
    return database.check(alias, connection)


#: Due jobs the handlers check reads, in claim order: the claim index serves the read, so it
#: costs the same on a million-row table as on an empty one.
HANDLERS_SAMPLE = 1000


@checks.register(checks.Tags.database)
def check_job_handlers(databases: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W031: the next due jobs (up to HANDLERS_SAMPLE, as the workers would claim them) whose
    name has no handler in this process: a worker started here would send them to the dead
    letter. `runworkers` runs it at start-up, as `check --database` and `migrate` do."""
    alias = checked_queue_alias(databases)
    if alias is None:
        return []
    from .registry import registry

    try:
        sample = queue_database(alias).claimer().next_due(HANDLERS_SAMPLE)
    except DatabaseError:
        return []  # no table yet (before migrate) or no connection: other checks say so
    # django.tasks jobs (a backend set) are run by importing their task, not by a handler.
    missing = Counter(name for name, backend in sample if not backend and name not in registry)
    return [
        checks.Warning(
            f"{count} of the next due jobs {'is' if count == 1 else 'are'} named {name!r}, "
            "which has no handler in this process: a worker started here sends "
            f"{'it' if count == 1 else 'them'} to the dead letter ('no handler').",
            hint=(
                "A worker knows the @job functions of the jobs.py module of each installed "
                "app (imported at start-up while SQLQUEUE['AUTODISCOVER'] is True) and of the "
                f"modules those import: declare @job({name!r}) there, or import its module "
                "from an AppConfig.ready(). Workers that serve other queues with other code "
                "may silence this check."
            ),
            id="django_sqlqueue.W031",
        )
        for name, count in sorted(missing.items())
    ]
