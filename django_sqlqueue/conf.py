"""The `SQLQUEUE` settings dict: defaults, and typed access to the values in force."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from .backoff import Backoff

DEFAULTS: dict[str, Any] = {
    # Alias of the database (in DATABASES) that holds the job tables.
    "DATABASE": "default",
    "DEFAULT_QUEUE": "default",
    "DEFAULT_PRIORITY": 0,
    "MAX_ATTEMPTS": 5,
    # Retry delay after attempt n: BACKOFF_BASE * 2**(n-1) seconds, capped, with jitter.
    "BACKOFF_BASE": 2.0,
    "BACKOFF_MAX": 3600.0,
    "BACKOFF_JITTER": 0.5,
    # A claimed job's lease; a live worker renews it every HEARTBEAT_SECONDS.
    "LEASE_SECONDS": 60,
    "HEARTBEAT_SECONDS": None,  # None: a third of LEASE_SECONDS
    # Seconds an attempt may run (None: no limit), unless the job sets `timeout=`.
    "DEFAULT_TIMEOUT": None,
    # Seconds running jobs get to finish after SIGTERM before they are handed back.
    "GRACE_PERIOD": 30,
    # Longest sleep of an idle worker between polls (PostgreSQL also wakes on NOTIFY).
    "POLL_INTERVAL": 1.0,
    # Most jobs one worker claims per round trip; it claims fewer when jobs take long.
    "BATCH_SIZE": 20,
    # Put SQLite databases in WAL mode and set a busy timeout on every connection.
    "SQLITE_TUNE": True,
    "SQLITE_BUSY_TIMEOUT": 20.0,
    # PRAGMA synchronous for tuned SQLite connections (None: leave SQLite's default, FULL).
    # NORMAL in WAL mode survives any process crash; a power loss or OS crash may lose the
    # last transactions (never corrupts). FULL syncs every commit, at several times the cost.
    "SQLITE_SYNCHRONOUS": "NORMAL",
    # Supervisors delete completed jobs older than this many days, a batch at a time, so the
    # table does not grow without end. None keeps them (then run `purgejobs` from cron).
    # Dead and cancelled jobs are kept for inspection until purged.
    "PRUNE_COMPLETED_AFTER_DAYS": 7,
    # Import `jobs` modules of installed apps at start-up, as the admin does with `admin`.
    "AUTODISCOVER": True,
}


@dataclass(frozen=True)
class QueueSettings:
    database: str
    default_queue: str
    default_priority: int
    max_attempts: int
    backoff: Backoff
    lease_seconds: float
    heartbeat_seconds: float
    default_timeout: float | None
    grace_period: float
    poll_interval: float
    batch_size: int
    sqlite_tune: bool
    sqlite_busy_timeout: float
    sqlite_synchronous: str | None
    autodiscover: bool
    prune_completed_after_days: float | None


def user_settings() -> dict[str, Any]:
    value = getattr(settings, "SQLQUEUE", None) or {}
    return dict(value) if isinstance(value, dict) else {}


_cached: QueueSettings | None = None


def _forget(*, setting: str, **kwargs: Any) -> None:
    global _cached
    if setting == "SQLQUEUE":
        _cached = None


setting_changed.connect(_forget, dispatch_uid="django_sqlqueue_settings")


def get_settings() -> QueueSettings:
    """The settings in force (cached; override_settings clears the cache)."""
    global _cached
    if _cached is None:
        _cached = _read_settings()
    return _cached


def _read_settings() -> QueueSettings:
    merged = {**DEFAULTS, **user_settings()}
    lease = float(merged["LEASE_SECONDS"])
    heartbeat = merged["HEARTBEAT_SECONDS"]
    return QueueSettings(
        database=merged["DATABASE"],
        default_queue=merged["DEFAULT_QUEUE"],
        default_priority=int(merged["DEFAULT_PRIORITY"]),
        max_attempts=int(merged["MAX_ATTEMPTS"]),
        backoff=Backoff(
            base=float(merged["BACKOFF_BASE"]),
            cap=float(merged["BACKOFF_MAX"]),
            jitter=float(merged["BACKOFF_JITTER"]),
        ),
        lease_seconds=lease,
        heartbeat_seconds=float(heartbeat) if heartbeat else lease / 3,
        default_timeout=(
            float(merged["DEFAULT_TIMEOUT"]) if merged["DEFAULT_TIMEOUT"] is not None else None
        ),
        grace_period=float(merged["GRACE_PERIOD"]),
        poll_interval=float(merged["POLL_INTERVAL"]),
        batch_size=int(merged["BATCH_SIZE"]),
        sqlite_tune=bool(merged["SQLITE_TUNE"]),
        sqlite_busy_timeout=float(merged["SQLITE_BUSY_TIMEOUT"]),
        sqlite_synchronous=merged["SQLITE_SYNCHRONOUS"],
        autodiscover=bool(merged["AUTODISCOVER"]),
        prune_completed_after_days=(
            float(merged["PRUNE_COMPLETED_AFTER_DAYS"])
            if merged["PRUNE_COMPLETED_AFTER_DAYS"] is not None
            else None
        ),
    )


def database_alias() -> str:
    return str(user_settings().get("DATABASE", DEFAULTS["DATABASE"]))
