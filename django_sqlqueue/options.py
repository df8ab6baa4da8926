"""What `@job(...)` declares about a job, declared once.

`JobOptions` is a frozen dataclass, as Django's own `Task` is: the `@job` decorator is built
from it (registry.py), every value is checked when the decorator runs, and the registry, the
enqueue path, the worker runtime, flow control and the scheduler read it. A new
option is one field here, its check in `__post_init__`, and its docs. Pure: no database,
importable before Django's app registry is ready.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any

from .backoff import BackoffSpec, validate_backoff
from .exceptions import InvalidJobError
from .validation import check_max_attempts, check_name, check_priority, check_queue, check_timeout

#: "100/m": starts per second, minute or hour.
RATE_PATTERN = re.compile(r"^\s*(\d+)\s*/\s*(s|m|h)\s*$")
RATE_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
#: Longest `unique_for` window: ten years (a datetime can add it to any date it holds).
MAX_UNIQUE_WINDOW = timedelta(days=3650)


@dataclass(frozen=True)
class RateLimit:
    """At most `limit` starts in any `period` seconds."""

    limit: int
    period: float
    text: str


def parse_rate(value: Any, where: str) -> RateLimit:
    """ "N/s", "N/m" or "N/h" with N ≥ 1; InvalidJobError naming `where` otherwise."""
    match = RATE_PATTERN.match(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) < 1:
        raise InvalidJobError(
            f"{where}: rate_limit must be a string like '100/m' (N starts per second 's', "
            f"minute 'm' or hour 'h', N at least 1), got {value!r}."
        )
    return RateLimit(int(match.group(1)), RATE_PERIODS[match.group(2)], value.strip())


@dataclass(frozen=True)
class JobOptions:
    """A job's options, as `@job("send_email", queue="mail", max_attempts=5)` declares them,
    checked at once. Options left out fall back to the `SQLQUEUE` settings when the job is
    enqueued (docs/jobs.md has every option)."""

    name: str
    _: KW_ONLY
    #: The queue its jobs go to (default: DEFAULT_QUEUE).
    queue: str | None = None
    #: -100..100, highest first (default: DEFAULT_PRIORITY).
    priority: int | None = None
    #: Attempts before the dead letter (default: MAX_ATTEMPTS).
    max_attempts: int | None = None
    #: Seconds (or a timedelta) an attempt may run (default: DEFAULT_TIMEOUT).
    timeout: float | timedelta | None = None
    #: Seconds, a `Backoff`, or a callable of the attempt number (default: the settings').
    backoff: BackoffSpec | None = None
    #: The handler's first argument is a `JobContext`.
    takes_context: bool = False
    #: Successes may be recorded in batches (a crash re-runs the unrecorded ones); None: as
    #: BATCH_COMPLETION says.
    batch_completion: bool | None = None
    #: The handler's writes and the job's completion commit in one transaction.
    atomic: bool = False
    #: A recurring job: its cron expression (docs/schedules.md), and with it `timezone`
    #: (default: TIME_ZONE), `missed` ("latest", "skip" or "all") and `cron_kwargs`.
    cron: str | None = None
    timezone: str | None = None
    missed: str | None = None
    cron_kwargs: Mapping[str, Any] | None = None
    #: Flow control (docs/flow-control.md): one active job per arguments, or one per window.
    unique: bool = False
    unique_for: timedelta | float | None = None
    #: The arguments that make two jobs the same (default: all of them).
    unique_by: Sequence[str] | None = None
    #: At most this many jobs of one key run at once; the key is the job name, or
    #: `concurrency_key` (a format string over the arguments, or a callable of them).
    concurrency: int | None = None
    concurrency_key: str | Callable[..., str] | None = None
    #: At most N starts per period: "100/m".
    rate_limit: str | None = None

    # Checks ----------------------------------------------------------------------------

    def __post_init__(self) -> None:
        if callable(self.name):
            raise InvalidJobError('@job needs a name: write @job("send_email"), not @job.')
        check_name(self.name)
        where = f"@job({self.name!r})"
        if self.queue is not None:
            check_queue(self.queue)
        if self.priority is not None:
            check_priority(self.priority)
        if self.max_attempts is not None:
            check_max_attempts(self.max_attempts)
        self._normalise("timeout", check_timeout(self.timeout))
        try:
            validate_backoff(self.backoff)
        except ValueError as exc:
            raise InvalidJobError(str(exc)) from exc
        self._check_flags(where)
        self._check_schedule(where)
        self._check_flow(where)

    def _normalise(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _check_flags(self, where: str) -> None:
        for name in ("takes_context", "atomic", "unique"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidJobError(
                    f"{where}: {name} must be True or False, got {getattr(self, name)!r}."
                )
        if self.batch_completion is not None and not isinstance(self.batch_completion, bool):
            raise InvalidJobError(
                f"batch_completion must be True, False or None, got {self.batch_completion!r}."
            )
        if self.atomic and self.batch_completion:
            raise InvalidJobError(
                f"Job {self.name!r}: atomic=True records the completion in the job's own "
                "transaction, so it cannot be batched; drop batch_completion=True."
            )

    def _check_schedule(self, where: str) -> None:
        """The cron fields themselves are scheduling/'s to check (system checks E020 to E025)."""
        if self.cron is None:
            given = [
                name
                for name in ("timezone", "missed", "cron_kwargs")
                if getattr(self, name) is not None
            ]
            if given:
                raise InvalidJobError(
                    f"{where}: {', '.join(given)} only apply to a recurring job; add cron=."
                )

    def _check_flow(self, where: str) -> None:
        window = self.unique_for
        if window is not None:
            if isinstance(window, (int, float)) and not isinstance(window, bool):
                seconds = float(window)
                window = (
                    timedelta(seconds=seconds)
                    if math.isfinite(seconds) and 0 < seconds <= MAX_UNIQUE_WINDOW.total_seconds()
                    else None
                )
            if not isinstance(window, timedelta) or not timedelta(0) < window <= MAX_UNIQUE_WINDOW:
                raise InvalidJobError(
                    f"{where}: unique_for must be a positive timedelta (or seconds) of at most "
                    f"{MAX_UNIQUE_WINDOW.days} days, got {self.unique_for!r}."
                )
            self._normalise("unique_for", window)
        if self.unique_by is not None:
            names = (self.unique_by,) if isinstance(self.unique_by, str) else self.unique_by
            names = tuple(names)
            if not names or not all(isinstance(n, str) for n in names):
                raise InvalidJobError(
                    f"{where}: unique_by must name the arguments to compare, such as "
                    f"('user_id',); got {self.unique_by!r}."
                )
            if not self.is_unique:
                raise InvalidJobError(
                    f"{where}: unique_by only says which arguments make jobs the same; add "
                    "unique=True or unique_for=."
                )
            self._normalise("unique_by", names)
        concurrency = self.concurrency
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            raise InvalidJobError(
                f"{where}: concurrency must be a whole number of jobs, at least 1, "
                f"got {concurrency!r}."
            )
        key = self.concurrency_key
        if key is not None:
            if concurrency is None:
                raise InvalidJobError(
                    f"{where}: concurrency_key needs concurrency=N, the number of jobs with one "
                    "key that may run at once."
                )
            if not isinstance(key, str) and not callable(key):
                raise InvalidJobError(
                    f"{where}: concurrency_key must be a format string over the job's "
                    f"arguments, such as 'account:{{account_id}}', or a callable; got {key!r}."
                )
        if self.rate_limit is not None:
            parse_rate(self.rate_limit, where)

    # What readers derive -----------------------------------------------------------------

    @property
    def timeout_seconds(self) -> float | None:
        """`timeout` in seconds (a timedelta was converted when the decorator ran)."""
        timeout = self.timeout
        return timeout.total_seconds() if isinstance(timeout, timedelta) else timeout

    @property
    def unique_window(self) -> timedelta | None:
        """`unique_for` as a timedelta (seconds were converted when the decorator ran)."""
        window = self.unique_for
        return timedelta(seconds=window) if isinstance(window, (int, float)) else window

    @property
    def is_unique(self) -> bool:
        return self.unique or self.unique_for is not None

    @cached_property
    def rate(self) -> RateLimit | None:
        """The parsed `rate_limit`."""
        return None if self.rate_limit is None else parse_rate(self.rate_limit, self.name)

    @property
    def gated(self) -> bool:
        """True if a worker must check this job's limits before it starts it."""
        return self.concurrency is not None or self.rate_limit is not None

    @property
    def uses_flow_control(self) -> bool:
        return self.is_unique or self.gated


__all__ = ["MAX_UNIQUE_WINDOW", "JobOptions", "RateLimit", "parse_rate"]
