"""Checks on enqueue input, so bad input fails in the caller and never later in a worker."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timedelta
from datetime import timezone as dt_timezone
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db.models import Model, QuerySet
from django.utils import timezone

from .exceptions import InvalidJobError
from .states import PRIORITY_MAX, PRIORITY_MIN

MAX_NAME_LENGTH = 255
MAX_QUEUE_LENGTH = 100
MAX_KEY_LENGTH = 255
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: The attempts columns are 32-bit on every database.
MAX_ATTEMPTS_LIMIT = 2**31 - 1
#: Longer would overflow the interval timer, and no attempt is meant to run that long.
MAX_TIMEOUT_SECONDS = 365 * 24 * 3600
#: The earliest time every supported database stores (MySQL's DATETIME starts at year 1000;
#: the latest, the end of year 9999 in UTC, is Python's own limit).
EARLIEST_RUN_AT = datetime(1000, 1, 1, tzinfo=dt_timezone.utc)
#: MariaDB and MySQL refuse JSON nested deeper than 32 levels (the stored array adds one).
MAX_DEPTH = 30
#: PostgreSQL's jsonb prints floats this large without a fraction: they come back as ints.
FLOAT_EXPONENT_LIMIT = 1e16


def _describe(value: Any) -> str:
    return type(value).__qualname__


def conversion_hint(value: Any) -> str:
    """How to pass `value` as JSON instead, for the types people pass most: '' if unknown."""
    if isinstance(value, datetime):
        return "pass `.isoformat()` and read it back with `datetime.fromisoformat()`"
    if isinstance(value, (date, time)):
        return f"pass `.isoformat()` and read it back with `{type(value).__name__}.fromisoformat()`"
    if isinstance(value, timedelta):
        return "pass `.total_seconds()`"
    if isinstance(value, Decimal):
        return "pass `str(value)` and read it back with `Decimal()` (a float loses digits)"
    if isinstance(value, (UUID, PurePath)):
        return "pass `str(value)`"
    if isinstance(value, (set, frozenset)):
        return "pass a list, e.g. `sorted(value)`"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "pass text: `.decode()`, or base64 for binary data"
    if isinstance(value, Enum):
        return "pass `.value`"
    if isinstance(value, Model):
        return "pass its primary key, `.pk`, and fetch the row in the job"
    if isinstance(value, QuerySet):
        return "pass a list of primary keys, `list(queryset.values_list('pk', flat=True))`"
    return ""


def _find_unserializable(value: Any, depth: int = 0) -> tuple[list[str], str] | None:
    """The first part of `value` that JSON would not give back as is: its path below
    `value` (innermost step first, so paths are only built for a problem) and why."""
    if depth > MAX_DEPTH:
        return [], f"nesting deeper than {MAX_DEPTH} levels (MariaDB and MySQL refuse such JSON)"
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        reason = string_reason(value)
        return ([], reason) if reason else None
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            return [], "an integer beyond 64 bits, which not every database keeps exactly"
        return None
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return [], f"{value!r}, which JSON cannot represent"
        if abs(value) >= FLOAT_EXPONENT_LIMIT:
            return [], (
                f"the float {value!r}, which PostgreSQL would give back as an integer; "
                "pass it as an int or a string"
            )
        return None
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _find_unserializable(item, depth + 1)
            if found:
                found[0].append(f"[{index}]")
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return [], f"a dict key of type {_describe(key)} (JSON keys must be str)"
            reason = string_reason(key)
            if reason:
                return [f" key {key!r}"], reason
            found = _find_unserializable(item, depth + 1)
            if found:
                found[0].append(f"[{key!r}]")
                return found
        return None
    if isinstance(value, tuple):
        return [], "a tuple (it would come back as a list; pass a list)"
    hint = conversion_hint(value)
    return [], f"type {_describe(value)}, which is not JSON" + (f"; {hint}" if hint else "")


def string_reason(value: str) -> str | None:
    if "\x00" in value:
        return "a string containing a NUL character, which PostgreSQL cannot store"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a string that is not valid UTF-8 (lone surrogate)"
    return None


def _string_problem(value: str, path: str) -> tuple[str, str] | None:
    reason = string_reason(value)
    return (path, reason) if reason else None


def check_json(value: Any, path: str) -> None:
    """Raise InvalidJobError unless `value` survives a JSON round trip unchanged."""
    try:
        found = _find_unserializable(value)
    except RecursionError:
        found = ([], "nesting too deep to store")
    if found:
        steps, why = found
        raise InvalidJobError(
            f"Job argument {path}{''.join(reversed(steps))} cannot be stored: {why}."
        )


def json_size(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON (about what the database stores)."""
    return _utf8_length(_COMPACT.encode(value))


def check_size(value: Any, what: str, limit: int | None, setting: str) -> None:
    """Raise InvalidJobError if `value`, as JSON, is larger than `limit` bytes."""
    if limit is None:
        return
    _check_limit(json_size(value), what, limit, setting)


def _check_limit(size: int, what: str, limit: int, setting: str) -> None:
    if size > limit:
        raise InvalidJobError(
            f"{what} {size} bytes as JSON; the limit is {setting}, {limit}. Pass large data "
            "by reference (a file name, a primary key)."
        )


def check_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any], max_bytes: int | None = None
) -> None:
    """Every argument storable as it is, and all of them within `max_bytes` as JSON."""
    encode_arguments(args, kwargs, max_bytes)


def encode_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any], max_bytes: int | None = None
) -> tuple[str, str]:
    """`check_arguments`, returning the JSON texts of the arguments to store: the size check
    measures the very text the INSERT sends, so each enqueue encodes its arguments once."""
    for index, value in enumerate(args):
        if not _plainly_storable(value):
            check_json(value, f"args[{index}]")
    for key, value in kwargs.items():
        if not isinstance(key, str):
            raise InvalidJobError(
                f"Keyword argument names must be strings; got {key!r} ({_describe(key)})."
            )
        if not _plainly_storable(key):
            problem = _string_problem(key, f"keyword {key!r}")
            if problem:
                raise InvalidJobError(f"Job argument {problem[0]} cannot be stored: {problem[1]}.")
        if not _plainly_storable(value):
            check_json(value, key)
    args_list, kwargs_dict = list(args), dict(kwargs)
    args_text, kwargs_text = _COMPACT.encode(args_list), _COMPACT.encode(kwargs_dict)
    if max_bytes is not None:
        # The bytes of `[args,kwargs]` as compact UTF-8 JSON, as json_size counts them.
        size = _utf8_length(args_text) + _utf8_length(kwargs_text) + 3
        _check_limit(size, "The job's arguments are", max_bytes, "MAX_ARGUMENTS_BYTES")
    return _stored_text(args_text, args_list), _stored_text(kwargs_text, kwargs_dict)


#: Compact JSON with characters as they are: what `json_size` measures.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
#: Compact JSON with non-ASCII characters escaped, as stored: a MySQL connection in Django's
#: default `utf8` (three bytes at most) charset cannot take four-byte characters.
_ASCII_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _plainly_storable(value: Any) -> bool:
    """The common scalars that need no walk: ASCII text without NUL, 64-bit ints, None and
    bools (False sends the value through `check_json`, which says what is wrong if anything)."""
    kind = type(value)
    if kind is str:
        return value.isascii() and "\x00" not in value
    if kind is int:
        return INT64_MIN <= value <= INT64_MAX
    return value is None or kind is bool


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def _stored_text(text: str, value: Any) -> str:
    return text if text.isascii() else _ASCII_COMPACT.encode(value)


def check_name(name: Any, what: str = "Job name", limit: int = MAX_NAME_LENGTH) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidJobError(f"{what} must be a non-empty string, got {name!r}.")
    if len(name) > limit:
        raise InvalidJobError(f"{what} is {len(name)} characters long; the limit is {limit}.")
    problem = _string_problem(name, what)
    if problem:
        raise InvalidJobError(f"{what} cannot be stored: {problem[1]}.")
    return name


def check_note(value: Any, what: str, limit: int) -> str:
    """Free text an operator attaches (who paused a queue, and why): str, storable, short
    enough for its column. ValueError says which and how long it may be."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {_describe(value)}.")
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value)} characters long; the limit is {limit}.")
    reason = string_reason(value)
    if reason:
        raise ValueError(f"{what} cannot be stored: {reason}.")
    return value


def check_queue(queue: Any) -> str:
    """A queue name: also no comma, since `runworkers --queues a,b` splits on commas."""
    check_name(queue, "queue", MAX_QUEUE_LENGTH)
    if queue != queue.strip():
        raise InvalidJobError(
            f"Queue name {queue!r} has spaces around it, and `runworkers --queues` strips "
            "them: no worker would ever claim its jobs."
        )
    if "," in queue:
        raise InvalidJobError(
            f"Queue name {queue!r} contains a comma, which `runworkers --queues` could "
            f"never select; use another character."
        )
    return queue


def check_priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidJobError(f"priority must be an integer, got {_describe(priority)}.")
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise InvalidJobError(
            f"priority must be between {PRIORITY_MIN} and {PRIORITY_MAX}, got {priority}."
        )
    return priority


def check_max_attempts(max_attempts: Any) -> int:
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
        raise InvalidJobError(f"max_attempts must be an integer, got {_describe(max_attempts)}.")
    if not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT:
        raise InvalidJobError(
            f"max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, got {max_attempts}."
        )
    return max_attempts


def check_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout <= MAX_TIMEOUT_SECONDS
    ):
        raise InvalidJobError(
            f"timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_SECONDS} "
            f"(a year), got {timeout!r}."
        )
    return float(timeout)


def resolve_run_at(run_at: Any, delay: Any, now: datetime | None = None) -> datetime:
    """The time a job may first run, from at most one of `run_at` and `delay`."""
    now = now or timezone.now()
    if run_at is not None and delay is not None:
        raise InvalidJobError("Pass run_at or delay, not both.")
    if delay is not None:
        if isinstance(delay, (int, float)) and not isinstance(delay, bool):
            if not math.isfinite(delay):
                raise InvalidJobError(f"delay must be a finite number of seconds, got {delay!r}.")
            try:
                delay = timedelta(seconds=delay)
            except OverflowError:
                raise InvalidJobError(f"delay of {delay!r} seconds is too long.") from None
        if not isinstance(delay, timedelta):
            raise InvalidJobError(f"delay must be a timedelta or seconds, got {_describe(delay)}.")
        if delay < timedelta(0):
            raise InvalidJobError("delay must not be negative.")
        try:
            run_at = now + delay
            as_utc(run_at)
        except OverflowError:
            raise InvalidJobError(f"delay of {delay} puts the job past year 9999.") from None
        return run_at
    if run_at is None:
        return now
    if not isinstance(run_at, datetime):
        raise InvalidJobError(f"run_at must be a datetime, got {_describe(run_at)}.")
    if settings.USE_TZ and timezone.is_naive(run_at):
        raise InvalidJobError(
            "run_at is a naive datetime while USE_TZ is on; pass an aware datetime "
            "(for example django.utils.timezone.now() + timedelta(...))."
        )
    try:
        utc = as_utc(run_at)  # what the database will store
        if not settings.USE_TZ and timezone.is_aware(run_at):
            run_at = timezone.make_naive(run_at)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or utc < EARLIEST_RUN_AT:
        raise InvalidJobError(
            f"run_at {run_at} is out of the range a database stores: from "
            f"{EARLIEST_RUN_AT:%Y-%m-%d} to the end of year 9999 in UTC."
        )
    return run_at


def as_utc(moment: datetime) -> datetime:
    """An aware UTC datetime for `moment` (a naive one is in the current time zone)."""
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, timezone.get_current_timezone())
    return moment.astimezone(dt_timezone.utc)


#: Most jobs one job may wait for (one row each, written with it).
MAX_DEPENDENCIES = 1000
DEPENDENCY_FAILURE_CHOICES = ("cancel", "run")


def check_after(after: Any) -> tuple[int, ...]:
    """The ids of the jobs given as `after=` (jobs, ids, or one of either), in order, once each."""
    if after is None:
        return ()
    items = [after] if isinstance(after, int) or hasattr(after, "pk") else after
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise InvalidJobError(
            f"after= takes a job, a job id, or a list of them; got {type(after).__name__}."
        )
    ids: dict[int, None] = {}
    for item in items:
        job_id = getattr(item, "pk", item)
        if job_id is None:
            raise InvalidJobError(f"after= names {item!r}, which was never stored.")
        if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
            raise InvalidJobError(
                f"after= takes jobs (as enqueue returns them) or their ids; got {item!r}."
            )
        ids[job_id] = None
    if len(ids) > MAX_DEPENDENCIES:
        raise InvalidJobError(
            f"after= names {len(ids)} jobs; a job waits for at most {MAX_DEPENDENCIES}."
        )
    return tuple(ids)


def check_dependency_failure(value: Any, after: tuple[int, ...]) -> bool:
    """True for on_dependency_failure="run"; "cancel" (the default) is False."""
    if value is None:
        return False
    if value not in DEPENDENCY_FAILURE_CHOICES:
        raise InvalidJobError(f"on_dependency_failure must be 'cancel' or 'run', not {value!r}.")
    if not after:
        raise InvalidJobError("on_dependency_failure needs after= (the jobs to wait for).")
    return bool(value == "run")
