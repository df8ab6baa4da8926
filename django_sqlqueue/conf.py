"""The `SQLQUEUE` settings dict: one table of settings, each with its default, the check its
value must pass and the line that documents it; typed access to the values in force.

The system checks and the runtime read values through the same `parse` functions, so a value
the checks accept is exactly a value the workers can use (docs/settings.md follows the table;
a test keeps them in step).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from .backoff import Backoff
from .options import parse_rate
from .validation import check_priority, check_queue

#: Values of SQLQUEUE["SQLITE_SYNCHRONOUS"], as SQLite's PRAGMA synchronous names them.
SQLITE_SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
#: Values of SQLQUEUE["SQLITE_TRANSACTION_MODE"], as Django's SQLite OPTIONS take them.
SQLITE_TRANSACTION_MODES = ("DEFERRED", "IMMEDIATE", "EXCLUSIVE")


class SettingError(ValueError):
    """A setting's value is unusable; the message says what it must be."""


Parse = Callable[[Any], Any]


def number(minimum: float, *, integer: bool = False) -> Parse:
    """A number (an int when `integer`) of at least `minimum`."""
    kind = "an integer" if integer else "a number"

    def parse(value: Any) -> Any:
        accepted = (int,) if integer else (int, float)
        if (
            isinstance(value, bool)
            or not isinstance(value, accepted)
            or not math.isfinite(value)
            or value < minimum
        ):
            raise SettingError(f"must be {kind} of at least {minimum}, got {value!r}.")
        return value if integer else float(value)

    return parse


def positive_or_none(value: Any) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise SettingError(f"must be None or a positive number, got {value!r}.")
    return float(value)


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise SettingError(f"must be True or False, got {value!r}.")
    return value


def jitter(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingError(f"must be a number from 0 to 1, got {value!r}.")
    try:
        return Backoff(jitter=float(value)).jitter
    except ValueError as exc:
        raise SettingError(f"{exc} Got {value!r}.") from None


def queue_name(value: Any) -> str:
    try:
        return check_queue(value)
    except ValueError as exc:
        raise SettingError(str(exc)) from None


def queue_rate_limits(value: Any) -> dict[str, Any]:
    """{"mail": "100/m"}: queue name to its rate limit (options.RateLimit)."""

    if not isinstance(value, dict):
        raise SettingError(f'must be a dict such as {{"mail": "100/m"}}, got {value!r}.')
    limits = {}
    for queue, rate in value.items():
        try:
            limits[check_queue(queue)] = parse_rate(rate, f"queue {queue!r}")
        except ValueError as exc:
            raise SettingError(str(exc)) from None
    return limits


def priority(value: Any) -> int:
    try:
        return check_priority(value)
    except ValueError as exc:
        raise SettingError(str(exc)) from None


def sqlite_synchronous(value: Any) -> str | None:
    if value is None:
        return None
    if str(value).upper() not in SQLITE_SYNCHRONOUS_MODES:
        raise SettingError(
            f"is {value!r}; use one of {', '.join(SQLITE_SYNCHRONOUS_MODES)}, or None."
        )
    return str(value).upper()


def sqlite_transaction_mode(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value.upper() not in SQLITE_TRANSACTION_MODES:
        raise SettingError(
            f"is {value!r}; use one of {', '.join(SQLITE_TRANSACTION_MODES)}, or None."
        )
    return value.upper()


def schedules(value: Any) -> dict[str, Any]:
    """A dict of schedules by key; each entry is checked on its own (scheduling/specs.py)."""
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise SettingError(
            "must be a dict of schedules by name, e.g. {'nightly': {'job': 'send_report', "
            f"'cron': '0 3 * * *'}}}}, got {type(value).__name__}."
        )
    return dict(value)


def token_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) < 16 or value != value.strip():
        raise SettingError("must be None or a string of at least 16 characters, without spaces.")
    return value


def database_alias(value: Any) -> str:
    if not isinstance(value, str) or value not in settings.DATABASES:
        raise SettingError(
            f"is {value!r}, which is not in DATABASES; use one of: {', '.join(settings.DATABASES)}."
        )
    return value


def database_alias_or_none(value: Any) -> str | None:
    return None if value is None else database_alias(value)


@dataclass(frozen=True)
class Setting:
    """One key of SQLQUEUE: its default, how its value is checked and read, its doc line."""

    name: str
    default: Any
    parse: Parse
    doc: str
    #: The system check id of a bad value.
    error_id: str = "django_sqlqueue.E003"


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "DATABASE",
        "default",
        database_alias,
        "Database alias holding the job tables.",
        error_id="django_sqlqueue.E005",
    ),
    Setting(
        "LISTEN_DATABASE",
        None,
        database_alias_or_none,
        "Alias of a direct (unpooled) connection to the queue's PostgreSQL, for LISTEN only.",
        error_id="django_sqlqueue.E005",
    ),
    Setting("DEFAULT_QUEUE", "default", queue_name, "Queue of jobs that name none."),
    Setting("DEFAULT_PRIORITY", 0, priority, "Priority of jobs that set none."),
    Setting("MAX_ATTEMPTS", 5, number(1, integer=True), "Attempts before a job is dead."),
    Setting("BACKOFF_BASE", 2.0, number(0), "First retry delay, in seconds."),
    Setting("BACKOFF_MAX", 3600.0, number(0), "Longest retry delay, in seconds."),
    Setting("BACKOFF_JITTER", 0.5, jitter, "Random share taken off each delay."),
    Setting("LEASE_SECONDS", 60, number(1), "Lease of a claimed job."),
    Setting("HEARTBEAT_SECONDS", None, positive_or_none, "How often workers renew leases."),
    Setting("DEFAULT_TIMEOUT", None, positive_or_none, "Time limit of an attempt."),
    Setting("GRACE_PERIOD", 30, number(0), "Seconds to finish running jobs at shutdown."),
    Setting(
        "CANCEL_GRACE_SECONDS",
        5,
        number(0),
        "Seconds a cancelled running job gets to stop by itself.",
    ),
    Setting("POLL_INTERVAL", 1.0, number(0.001), "Longest sleep of an idle worker."),
    Setting("BATCH_SIZE", 20, number(1, integer=True), "Most jobs claimed per round trip."),
    Setting(
        "QUEUE_RATE_LIMITS",
        {},
        queue_rate_limits,
        'Most job starts per period, per queue: {"mail": "100/m"}.',
    ),
    Setting(
        "POSTGRESQL_ASYNC_COMPLETION",
        True,
        flag,
        "Completions commit without waiting for PostgreSQL's disk flush.",
    ),
    Setting(
        "BATCH_COMPLETION",
        False,
        flag,
        "Record successes in batches (faster; a crash re-runs them).",
    ),
    Setting(
        "PRUNE_COMPLETED_AFTER_DAYS",
        7,
        positive_or_none,
        "Age at which supervisors delete completed jobs.",
    ),
    Setting("SQLITE_TUNE", True, flag, "WAL mode, busy timeout and transaction mode on SQLite."),
    Setting("SQLITE_BUSY_TIMEOUT", 20.0, number(0), "Seconds an SQLite writer waits for the lock."),
    Setting("SQLITE_SYNCHRONOUS", "NORMAL", sqlite_synchronous, "`PRAGMA synchronous` on SQLite."),
    Setting(
        "SQLITE_TRANSACTION_MODE",
        "IMMEDIATE",
        sqlite_transaction_mode,
        "How `atomic()` begins on SQLite, unless OPTIONS set `transaction_mode`.",
    ),
    Setting(
        "MAX_ARGUMENTS_BYTES",
        1_048_576,
        number(1, integer=True),
        "Largest size of a job's arguments, as JSON.",
    ),
    Setting(
        "MAX_RESULT_BYTES",
        1_048_576,
        number(1, integer=True),
        "Largest size of a job's result, as JSON.",
    ),
    Setting("AUTODISCOVER", True, flag, "Import every app's `jobs.py` at start-up."),
    Setting(
        "SCHEDULES",
        {},
        schedules,
        "Recurring jobs by name: job, cron, kwargs, time zone.",
    ),
    Setting(
        "JSON_LOGS",
        False,
        flag,
        "JSON log lines, one per finished attempt, from `runworkers`.",
    ),
    Setting(
        "METRICS_TOKEN",
        None,
        token_or_none,
        "Bearer token that may read the metrics view.",
    ),
)

SETTINGS_BY_NAME = {setting.name: setting for setting in SETTINGS}
DEFAULTS: dict[str, Any] = {setting.name: setting.default for setting in SETTINGS}


@dataclass(frozen=True)
class QueueSettings:
    database: str
    listen_database: str | None
    default_queue: str
    default_priority: int
    max_attempts: int
    backoff: Backoff
    lease_seconds: float
    heartbeat_seconds: float
    default_timeout: float | None
    grace_period: float
    cancel_grace_seconds: float
    poll_interval: float
    batch_size: int
    queue_rate_limits: dict[str, Any]
    batch_completion: bool
    postgresql_async_completion: bool
    sqlite_tune: bool
    sqlite_busy_timeout: float
    sqlite_synchronous: str | None
    sqlite_transaction_mode: str | None
    autodiscover: bool
    prune_completed_after_days: float | None
    json_logs: bool = False
    metrics_token: str | None = None
    max_arguments_bytes: int = 1_048_576
    max_result_bytes: int = 1_048_576


def user_settings() -> dict[str, Any]:
    value = getattr(settings, "SQLQUEUE", None) or {}
    return dict(value) if isinstance(value, dict) else {}


_cached: QueueSettings | None = None


def _forget(*, setting: str, **kwargs: Any) -> None:
    global _cached
    if setting in ("SQLQUEUE", "DATABASES"):
        _cached = None


setting_changed.connect(_forget, dispatch_uid="django_sqlqueue_settings")


def get_settings() -> QueueSettings:
    """The settings in force (cached; override_settings clears the cache).

    A bad value raises ImproperlyConfigured with the system check's message; the checks
    report it first when a management command starts.
    """
    global _cached
    if _cached is None:
        _cached = _read_settings()
    return _cached


def parsed(name: str, value: Any) -> Any:
    """`value` of setting `name` as the runtime uses it; SettingError if it is unusable."""
    return SETTINGS_BY_NAME[name].parse(value)


def _read_settings() -> QueueSettings:
    given = user_settings()
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        value = given.get(setting.name, setting.default)
        try:
            values[setting.name] = setting.parse(value)
        except SettingError as exc:
            raise ImproperlyConfigured(f"SQLQUEUE[{setting.name!r}] {exc}") from None
    lease = values["LEASE_SECONDS"]
    return QueueSettings(
        database=values["DATABASE"],
        listen_database=values["LISTEN_DATABASE"],
        default_queue=values["DEFAULT_QUEUE"],
        default_priority=values["DEFAULT_PRIORITY"],
        max_attempts=values["MAX_ATTEMPTS"],
        backoff=Backoff(
            base=values["BACKOFF_BASE"], cap=values["BACKOFF_MAX"], jitter=values["BACKOFF_JITTER"]
        ),
        lease_seconds=lease,
        heartbeat_seconds=values["HEARTBEAT_SECONDS"] or lease / 3,
        default_timeout=values["DEFAULT_TIMEOUT"],
        grace_period=values["GRACE_PERIOD"],
        cancel_grace_seconds=values["CANCEL_GRACE_SECONDS"],
        poll_interval=values["POLL_INTERVAL"],
        batch_size=values["BATCH_SIZE"],
        queue_rate_limits=values["QUEUE_RATE_LIMITS"],
        batch_completion=values["BATCH_COMPLETION"],
        postgresql_async_completion=values["POSTGRESQL_ASYNC_COMPLETION"],
        sqlite_tune=values["SQLITE_TUNE"],
        sqlite_busy_timeout=values["SQLITE_BUSY_TIMEOUT"],
        sqlite_synchronous=values["SQLITE_SYNCHRONOUS"],
        sqlite_transaction_mode=values["SQLITE_TRANSACTION_MODE"],
        autodiscover=values["AUTODISCOVER"],
        prune_completed_after_days=values["PRUNE_COMPLETED_AFTER_DAYS"],
        json_logs=values["JSON_LOGS"],
        metrics_token=values["METRICS_TOKEN"],
        max_arguments_bytes=values["MAX_ARGUMENTS_BYTES"],
        max_result_bytes=values["MAX_RESULT_BYTES"],
    )


def database_alias_setting() -> str:
    """The queue database's alias as configured, unchecked (for code that runs before the
    system checks and must not fail on a bad value elsewhere in SQLQUEUE)."""
    return str(user_settings().get("DATABASE", DEFAULTS["DATABASE"]))


def listen_database_setting() -> str | None:
    """SQLQUEUE['LISTEN_DATABASE'] as configured if it names an alias in DATABASES, else None
    (the settings check reports a bad value)."""
    value = user_settings().get("LISTEN_DATABASE")
    return value if isinstance(value, str) and value in settings.DATABASES else None
