"""The `SQLQUEUE` settings dict: one table of settings, each with its default, the check its
value must pass and the line that documents it; typed access to the values in force.

The system checks and the runtime read values through the same `parse` functions, so a value
the checks accept is exactly a value the workers can use (docs/settings.md follows the table;
a test keeps them in step).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar, overload

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
T = TypeVar("T")


@overload
def number(minimum: float) -> Callable[[Any], float]: ...


@overload
def number(minimum: float, *, integer: Literal[True]) -> Callable[[Any], int]: ...


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


def flag_or_none(value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise SettingError(f"must be True, False or None, got {value!r}.")
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


#: Most jobs one worker process runs at once (-c/--concurrency, a queue's slots).
MAX_CONCURRENCY = 1000


def slot_count(value: Any, subject: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise SettingError(
            f"{subject}must be an integer from 1 to {MAX_CONCURRENCY}, got {value!r}."
        )
    return value


def queue_slots(value: Any) -> dict[str, int]:
    """{"webhooks": {"concurrency": 50}}: queues whose jobs get worker processes of their
    own, with that many slots each (runtime/worker_plans.py)."""
    example = '{"webhooks": {"concurrency": 50}}'
    if not isinstance(value, dict):
        raise SettingError(f"must be a dict such as {example}, got {value!r}.")
    slots = {}
    for queue, options in value.items():
        name = queue_name(queue)
        if not isinstance(options, dict) or set(options) != {"concurrency"}:
            raise SettingError(
                f'queue {queue!r} must map to {{"concurrency": <slots>}}, got {options!r}.'
            )
        slots[name] = slot_count(options["concurrency"], f"queue {queue!r}: concurrency ")
    return slots


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


class Setting(Generic[T]):
    """One key of SQLQUEUE: its default, the function that checks its value and reads it as
    the runtime uses it, and the line that documents it.

    Declared as an attribute of `QueueSettings` (its key is the attribute's name in capitals,
    unless `key` says otherwise), where it reads as the value in force, typed by `parse`. The
    system checks, the runtime and docs/settings.md's test all read this one declaration.
    """

    def __init__(
        self,
        default: Any,
        parse: Callable[[Any], T],
        doc: str,
        *,
        error_id: str = "django_sqlqueue.E003",
        key: str = "",
    ) -> None:
        self.default = default
        self.parse = parse
        self.doc = doc
        #: The system check id of a bad value.
        self.error_id = error_id
        self.name = key
        self.attribute = ""

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.attribute = attribute
        self.name = self.name or attribute.upper()

    @overload
    def __get__(self, instance: None, owner: type) -> Setting[T]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> T: ...

    def __get__(self, instance: object | None, owner: type) -> Setting[T] | T:
        # Only reached from the class: an instance holds its values in its own __dict__,
        # which shadows this (non-data) descriptor, so reading a setting is a dict lookup.
        if instance is None:
            return self
        raise AttributeError(self.attribute)

    def __repr__(self) -> str:
        return f"<Setting {self.name}>"


class QueueSettings:
    """The `SQLQUEUE` settings in force, typed: one `Setting` per key (a new setting is one row
    here, and a section of docs/settings.md), and what is derived from them."""

    database = Setting(
        "default",
        database_alias,
        "Database alias holding the job tables.",
        error_id="django_sqlqueue.E005",
    )
    listen_database = Setting(
        None,
        database_alias_or_none,
        "Alias of a direct (unpooled) connection to the queue's PostgreSQL, for LISTEN only.",
        error_id="django_sqlqueue.E005",
    )
    default_queue = Setting("default", queue_name, "Queue of jobs that name none.")
    default_priority = Setting(0, priority, "Priority of jobs that set none.")
    max_attempts = Setting(5, number(1, integer=True), "Attempts before a job is dead.")
    backoff_base = Setting(2.0, number(0), "First retry delay, in seconds.")
    backoff_max = Setting(3600.0, number(0), "Longest retry delay, in seconds.")
    backoff_jitter = Setting(0.5, jitter, "Random share taken off each delay.")
    lease_seconds = Setting(60, number(1), "Lease of a claimed job.")
    heartbeat_every = Setting(
        None, positive_or_none, "How often workers renew leases.", key="HEARTBEAT_SECONDS"
    )
    default_timeout = Setting(None, positive_or_none, "Time limit of an attempt.")
    grace_period = Setting(30, number(0), "Seconds to finish running jobs at shutdown.")
    cancel_grace_seconds = Setting(
        5, number(0), "Seconds a cancelled running job gets to stop by itself."
    )
    poll_interval = Setting(1.0, number(0.001), "Longest sleep of an idle worker.")
    batch_size = Setting(20, number(1, integer=True), "Most jobs claimed per round trip.")
    concurrency = Setting(1, slot_count, "Jobs each worker process runs at once, in threads.")
    queues = Setting(
        {},
        queue_slots,
        'Queues with worker processes of their own: {"webhooks": {"concurrency": 50}}.',
    )
    queue_rate_limits = Setting(
        {}, queue_rate_limits, 'Most job starts per period, per queue: {"mail": "100/m"}.'
    )
    postgresql_async_completion = Setting(
        None,
        flag_or_none,
        "Completions commit without waiting for the disk flush (None: unless the server "
        "has synchronous standbys).",
    )
    batch_completion = Setting(
        False, flag, "Record successes in batches (faster; a crash re-runs them)."
    )
    prune_completed_after_days = Setting(
        7, positive_or_none, "Age at which supervisors delete completed jobs."
    )
    sqlite_tune = Setting(True, flag, "WAL mode, busy timeout and transaction mode on SQLite.")
    sqlite_busy_timeout = Setting(20.0, number(0), "Seconds an SQLite writer waits for the lock.")
    sqlite_synchronous = Setting("NORMAL", sqlite_synchronous, "`PRAGMA synchronous` on SQLite.")
    sqlite_transaction_mode = Setting(
        "IMMEDIATE",
        sqlite_transaction_mode,
        "How `atomic()` begins on SQLite, unless OPTIONS set `transaction_mode`.",
    )
    max_arguments_bytes = Setting(
        1_048_576, number(1, integer=True), "Largest size of a job's arguments, as JSON."
    )
    max_result_bytes = Setting(
        1_048_576, number(1, integer=True), "Largest size of a job's result, as JSON."
    )
    autodiscover = Setting(True, flag, "Import every app's `jobs.py` at start-up.")
    schedules = Setting({}, schedules, "Recurring jobs by name: job, cron, kwargs, time zone.")
    json_logs = Setting(False, flag, "JSON log lines, one per finished attempt, from `runworkers`.")
    metrics_token = Setting(None, token_or_none, "Bearer token that may read the metrics view.")

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        """The values of `given` (SQLQUEUE as the project sets it), each checked by its
        setting; ImproperlyConfigured names a bad one. Missing keys take their defaults."""
        given = given or {}
        for setting in SETTINGS:
            value = given.get(setting.name, setting.default)
            try:
                self.__dict__[setting.attribute] = setting.parse(value)
            except SettingError as exc:
                raise ImproperlyConfigured(f"SQLQUEUE[{setting.name!r}] {exc}") from None
        self.__dict__["backoff"] = Backoff(
            base=self.backoff_base, cap=self.backoff_max, jitter=self.backoff_jitter
        )
        self.__dict__["heartbeat_seconds"] = self.heartbeat_every or self.lease_seconds / 3

    #: The retry delays of jobs that set no backoff of their own (BACKOFF_*).
    backoff: Backoff
    #: Seconds between two lease renewals: HEARTBEAT_SECONDS, or a third of the lease.
    heartbeat_seconds: float

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("QueueSettings are read-only; change SQLQUEUE (override_settings).")

    def __repr__(self) -> str:
        values = ", ".join(f"{s.name}={self.__dict__[s.attribute]!r}" for s in SETTINGS)
        return f"QueueSettings({values})"


#: Every setting, in the order QueueSettings declares them.
SETTINGS: tuple[Setting[Any], ...] = tuple(
    value for value in vars(QueueSettings).values() if isinstance(value, Setting)
)

SETTINGS_BY_NAME = {setting.name: setting for setting in SETTINGS}
DEFAULTS: dict[str, Any] = {setting.name: setting.default for setting in SETTINGS}


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
    return QueueSettings(user_settings())


def database_alias_setting() -> str:
    """The queue database's alias as configured, unchecked (for code that runs before the
    system checks and must not fail on a bad value elsewhere in SQLQUEUE)."""
    return str(user_settings().get("DATABASE", DEFAULTS["DATABASE"]))


def listen_database_setting() -> str | None:
    """SQLQUEUE['LISTEN_DATABASE'] as configured if it names an alias in DATABASES, else None
    (the settings check reports a bad value)."""
    value = user_settings().get("LISTEN_DATABASE")
    return value if isinstance(value, str) and value in settings.DATABASES else None
