"""A schedule as code or settings declare it, and every way a declaration can be wrong.

Declarations are checked here, not where they are made: `@job(cron=...)` runs at import time,
where an exception would stop the project from starting with a traceback; the system checks
report each problem instead, naming the schedule and the fix (checks.py), and the supervisors
skip a schedule that has one. Nothing here touches the database or the registry.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from ..exceptions import InvalidJobError
from ..validation import check_arguments, check_name, check_priority, check_queue
from .cron import Cron, CronError, parse_zone

#: What a supervisor does with ticks that no supervisor enqueued in time.
MISSED_LATEST, MISSED_SKIP, MISSED_ALL = "latest", "skip", "all"
MISSED_POLICIES = (MISSED_LATEST, MISSED_SKIP, MISSED_ALL)
#: missed="all": the most missed ticks enqueued at once (the latest ones).
MISSED_ALL_LIMIT = 100
#: missed="skip": a tick enqueued later than this after its time counts as missed.
SKIP_LATE_AFTER = timedelta(minutes=1)
#: A key leaves room in the job's idempotency key (255) for `schedule:` and the tick's time.
MAX_KEY_LENGTH = 200
#: The keys of one SQLQUEUE["SCHEDULES"] entry.
ENTRY_KEYS = ("job", "cron", "kwargs", "timezone", "queue", "priority", "missed")
SOURCE_CODE, SOURCE_SETTINGS = "code", "settings"

#: System check ids, one per kind of problem (docs/schedules.md lists them).
E_ENTRY = "django_sqlqueue.E020"
E_CRON = "django_sqlqueue.E021"
E_TIMEZONE = "django_sqlqueue.E022"
E_JOB = "django_sqlqueue.E023"
E_KWARGS = "django_sqlqueue.E024"
E_OPTION = "django_sqlqueue.E025"


@dataclass(frozen=True)
class ScheduleSpec:
    """One declared schedule, its values as given (checked by `problems`)."""

    key: str
    job_name: str
    cron: Any
    kwargs: Any = field(default_factory=dict)
    #: None: the project's TIME_ZONE.
    timezone: Any = None
    #: None: the job's own queue and priority.
    queue: Any = None
    priority: Any = None
    missed: Any = MISSED_LATEST
    source: str = SOURCE_CODE
    #: Where it is declared, as messages name it.
    origin: str = ""

    @property
    def zone_name(self) -> str:
        return self.timezone if self.timezone is not None else default_zone()

    @property
    def label(self) -> str:
        return f"Schedule {self.key!r} ({self.origin})" if self.origin else f"Schedule {self.key!r}"


def default_zone() -> str:
    """The project's TIME_ZONE: cron times are wall-clock times where the project lives."""
    return str(getattr(settings, "TIME_ZONE", None) or "UTC")


@dataclass(frozen=True)
class Problem:
    """A declaration that cannot run: the system check's id, message and hint."""

    id: str
    message: str
    hint: str = ""


def code_spec(
    name: str,
    origin: str,
    *,
    cron: Any,
    timezone: Any = None,
    missed: Any = None,
    kwargs: Any = None,
) -> ScheduleSpec:
    """The schedule of `@job(name, cron=...)`, keyed by the job's name."""
    return ScheduleSpec(
        key=name,
        job_name=name,
        cron=cron,
        kwargs={} if kwargs is None else kwargs,
        timezone=timezone,
        missed=MISSED_LATEST if missed is None else missed,
        source=SOURCE_CODE,
        origin=f"@job on {origin}",
    )


SETTINGS_ORIGIN = "SQLQUEUE['SCHEDULES']"


def settings_spec(key: Any, entry: Any) -> tuple[ScheduleSpec | None, list[Problem]]:
    """One SQLQUEUE["SCHEDULES"] entry as a spec, or the problems that make it unreadable."""
    label = f"Schedule {key!r} ({SETTINGS_ORIGIN})"
    example = "{'job': 'send_report', 'cron': '0 3 * * *'}"
    if not isinstance(entry, Mapping):
        return None, [
            Problem(
                E_ENTRY,
                f"{label} must be a dict, not {type(entry).__name__}.",
                f"Write it as {example}, with optional {', '.join(ENTRY_KEYS[2:])}.",
            )
        ]
    problems = []
    for unknown in sorted(set(entry) - set(ENTRY_KEYS), key=str):
        close = difflib.get_close_matches(str(unknown), ENTRY_KEYS, n=1)
        problems.append(
            Problem(
                E_ENTRY,
                f"{label} has an unknown key {unknown!r}.",
                (f"Did you mean {close[0]!r}? " if close else "")
                + f"Known keys: {', '.join(ENTRY_KEYS)}.",
            )
        )
    missing = [name for name in ("job", "cron") if name not in entry]
    if missing:
        problems.append(
            Problem(
                E_ENTRY,
                f"{label} has no {' and no '.join(repr(m) for m in missing)}.",
                f"Every schedule names its job and its cron, e.g. {example}.",
            )
        )
        return None, problems
    spec = ScheduleSpec(
        key=key,
        job_name=entry["job"],
        cron=entry["cron"],
        kwargs=entry.get("kwargs", {}),
        timezone=entry.get("timezone"),
        queue=entry.get("queue"),
        priority=entry.get("priority"),
        missed=entry.get("missed", MISSED_LATEST),
        source=SOURCE_SETTINGS,
        origin=SETTINGS_ORIGIN,
    )
    return spec, problems


def problems(
    spec: ScheduleSpec, find_handler: Callable[[str], Any | None], now: datetime
) -> list[Problem]:
    """Everything that stops `spec` from running; `find_handler(name)` is the registry's
    handler of that job name, or None."""
    found: list[Problem] = []
    label = spec.label
    try:
        check_name(spec.key, "the key", MAX_KEY_LENGTH)
    except InvalidJobError as exc:
        found.append(Problem(E_ENTRY, f"{label}: {exc}", "Give the schedule a shorter key."))
    found.extend(_cron_problems(spec, label, now))
    if spec.missed not in MISSED_POLICIES:
        found.append(
            Problem(
                E_OPTION,
                f"{label}: missed={spec.missed!r} is not a policy.",
                "Use 'latest' (run the latest missed tick once, the default), 'skip' or "
                f"'all' (every missed tick, up to {MISSED_ALL_LIMIT}).",
            )
        )
    for option, check in (("queue", check_queue), ("priority", check_priority)):
        value = getattr(spec, option)
        if value is None:
            continue
        try:
            check(value)
        except InvalidJobError as exc:
            found.append(Problem(E_OPTION, f"{label}: {exc}", f"Fix or remove its {option}."))
    handler = find_handler(spec.job_name) if isinstance(spec.job_name, str) else None
    if handler is None:
        found.append(
            Problem(
                E_JOB,
                f"{label} names the job {spec.job_name!r}, which no @job registers.",
                "Name a registered job (a @job in a `jobs.py` module of an installed app, or "
                "in a module imported at start-up), or fix the spelling.",
            )
        )
    found.extend(_kwargs_problems(spec, label, handler))
    return found


def _cron_problems(spec: ScheduleSpec, label: str, now: datetime) -> list[Problem]:
    try:
        parse_zone(spec.zone_name)
    except CronError as exc:
        return [Problem(E_TIMEZONE, f"{label}: {exc}.", "Set timezone to an IANA name.")]
    try:
        Cron(spec.cron, spec.zone_name, hash_id=spec.key).next_after(now)
    except CronError as exc:
        return [
            Problem(
                E_CRON,
                f"{label}: {exc}.",
                "Write 5 fields (minute hour day month weekday), e.g. '0 3 * * *' for 03:00 "
                "every day, or 6 with seconds last, e.g. '* * * * * */10' for every 10 seconds.",
            )
        ]
    return []


def _kwargs_problems(spec: ScheduleSpec, label: str, handler: Any | None) -> list[Problem]:
    hint = "Give the keyword arguments the job's function takes, as JSON values."
    if not isinstance(spec.kwargs, Mapping):
        return [
            Problem(
                E_KWARGS,
                f"{label}: kwargs must be a dict, not {type(spec.kwargs).__name__}.",
                hint,
            )
        ]
    try:
        check_arguments((), spec.kwargs)
    except InvalidJobError as exc:
        return [Problem(E_KWARGS, f"{label}: {exc}", hint)]
    if handler is None:
        return []
    refusal = refused_kwargs(handler, spec.kwargs)
    if refusal:
        return [
            Problem(
                E_KWARGS,
                f"{label}: job {spec.job_name!r} does not accept kwargs {dict(spec.kwargs)!r} "
                f"({refusal}).",
                hint,
            )
        ]
    return []


def refused_kwargs(handler: Any, kwargs: Mapping[str, Any]) -> str | None:
    """Why the handler's function cannot be called with `kwargs` (None: it can)."""
    try:
        signature = inspect.signature(handler.func)
    except (TypeError, ValueError):
        return None
    leading = (None,) if handler.options.takes_context else ()
    try:
        signature.bind(*leading, **kwargs)
    except TypeError as exc:
        return str(exc)
    return None
