"""A cron expression in a time zone, walked as instants: the ticks of a schedule.

croniter reads the expression and walks wall-clock times; this module turns wall-clock times
into instants in the schedule's time zone, deciding what a daylight-saving change does:

- A schedule that names its hours (the hour field is not `*`, e.g. `30 2 * * *`) runs once at
  each matching wall-clock time. A time the clocks skip (02:30 on a spring-forward day) runs
  once, at the instant the clocks jump (03:00); a time they repeat (01:30 on a fall-back day)
  runs once, at its first occurrence.
- A schedule that runs every hour (the hour field is `*` or `*/n`, e.g. `*/15 * * * *`) follows
  the clock as it is: skipped wall-clock times do not happen, repeated ones happen twice, so
  it keeps its spacing in real time across the change.

Pure computation, no I/O: tested with fixed clocks (tests/scheduling/test_cron.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UTC = dt_timezone.utc
ONE_DAY = timedelta(days=1)
ONE_SECOND = timedelta(seconds=1)
TINY = timedelta(microseconds=1)
#: Field counts we accept: minute hour day month weekday, and seconds after them.
FIELD_COUNTS = (5, 6)


class CronError(ValueError):
    """An expression or time zone that cannot make a schedule; the message says why."""


def parse_zone(name: object) -> ZoneInfo:
    """The IANA time zone called `name`; CronError if there is none."""
    if not isinstance(name, str) or not name:
        raise CronError(f"time zone must be an IANA name such as 'Europe/Paris', got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(
            f"unknown time zone {name!r}; use an IANA name such as 'Europe/Paris' or 'UTC'"
        ) from None


def check_expression(expression: object, hash_id: str = "") -> list[list[Any]]:
    """The expanded fields of a valid expression; CronError naming what is wrong."""
    if not isinstance(expression, str) or not expression.strip():
        raise CronError(f"the cron expression must be a non-empty string, got {expression!r}")
    fields = expression.split()
    if not expression.strip().startswith("@") and len(fields) not in FIELD_COUNTS:
        raise CronError(
            f"{expression!r} has {len(fields)} fields; write 5 (minute hour day month weekday) "
            "or 6 (the same, then seconds)"
        )
    # croniter is imported where a cron expression is first read: a project without one (and
    # every process start before it reads one) does not pay its ~20 ms import.
    from croniter import CroniterError, croniter

    try:
        expanded, _ = croniter.expand(expression, hash_id=hash_id.encode() or None)
    except CroniterError as exc:
        raise CronError(f"{expression!r} is not a valid cron expression ({exc})") from None
    if len(expanded) not in FIELD_COUNTS:
        raise CronError(f"{expression!r} is not a 5- or 6-field cron expression")
    return expanded


class Cron:
    """The ticks of `expression` in time zone `zone`, as aware UTC datetimes."""

    def __init__(self, expression: str, zone: str = "UTC", hash_id: str = "") -> None:
        expanded = check_expression(expression, hash_id)
        self.expression = expression
        self.zone_name = zone
        self.zone = parse_zone(zone)
        self.hash_id = hash_id.encode() or None
        #: The hour field is `*` or `*/n`: follow the clock through DST changes (see above).
        fields = expression.split()
        self.follows_clock = expanded[1] == ["*"] or (len(fields) > 1 and fields[1].startswith("*"))
        from croniter import croniter  # see check_expression

        self._iter = croniter(expression, datetime(2000, 1, 1), hash_id=self.hash_id)

    def __repr__(self) -> str:
        return f"<Cron {self.expression!r} {self.zone_name}>"

    # Offsets and transitions, on naive UTC datetimes ---------------------------------------

    def _offset(self, utc: datetime) -> timedelta:
        offset = utc.replace(tzinfo=UTC).astimezone(self.zone).utcoffset()
        return offset or timedelta(0)

    def _transition_in(self, start: datetime, end: datetime) -> datetime | None:
        """The first instant in (start, end] where the zone's offset changes, if any.

        Offsets are probed a day apart (no zone changes twice within a day), then the change
        is pinned down to the second.
        """
        offset = self._offset(start)
        low = start
        while low < end:
            high = min(low + ONE_DAY, end)
            if self._offset(high) != offset:
                # The change lies in (low, high]: bisect on whole seconds.
                lo = int((low - datetime(1970, 1, 1)).total_seconds() // 1)
                hi = int(-(-(high - datetime(1970, 1, 1)).total_seconds() // 1))
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if self._offset(datetime(1970, 1, 1) + timedelta(seconds=mid)) != offset:
                        hi = mid
                    else:
                        lo = mid
                return max(datetime(1970, 1, 1) + timedelta(seconds=hi), start + TINY)
            low = high
        return None

    def _next_wall(self, wall: datetime, inclusive: bool) -> datetime:
        from croniter import CroniterBadDateError  # imported already by __init__

        self._iter.set_current(wall - TINY if inclusive else wall, force=True)
        try:
            return self._iter.get_next(datetime)
        except CroniterBadDateError:
            raise CronError(f"{self.expression!r} never matches a date") from None

    # Walking ----------------------------------------------------------------------------

    def ticks_after(self, after: datetime) -> Iterator[datetime]:
        """Every tick strictly after `after`, ascending, each instant once."""
        start = after.astimezone(UTC).replace(tzinfo=None)
        segment_start, offset = start, self._offset(start)
        wall, inclusive = start + offset, False
        local = after.astimezone(self.zone)
        if local.fold and not self.follows_clock:
            # `after` is in a repeated hour, whose wall-clock times ran at their first
            # occurrence: go on from the end of the repetition.
            first = local.replace(fold=0).astimezone(UTC).replace(tzinfo=None)
            change = self._transition_in(first, start)
            if change is not None:
                segment_start, wall, inclusive = change, change + self._offset(first), True
        last: datetime | None = None
        while True:
            wall = self._next_wall(wall, inclusive)
            instant = wall - offset
            change = self._transition_in(segment_start, instant)
            if change is None:
                candidates = [instant]
                segment_start, inclusive = max(segment_start, instant), False
            else:
                new_offset = self._offset(change)
                candidates = []
                if not self.follows_clock and new_offset > offset and wall < change + new_offset:
                    # A wall-clock time the clocks skipped: it runs when they jump.
                    candidates.append(change)
                if not self.follows_clock and new_offset < offset:
                    # Repeated wall-clock times already ran before the change: go on after them.
                    wall = change + offset
                else:
                    wall = change + new_offset
                segment_start, offset, inclusive = change, new_offset, True
            for candidate in candidates:
                if candidate > start and candidate != last:
                    last = candidate
                    yield candidate.replace(tzinfo=UTC)

    def next_after(self, after: datetime) -> datetime:
        """The first tick strictly after `after`."""
        return next(self.ticks_after(after))

    def ticks_between(
        self, start: datetime, end: datetime, limit: int
    ) -> tuple[list[datetime], int, bool]:
        """The latest `limit` ticks in [start, end] (ascending), how many ticks the range
        holds, and whether that count is exact (else it is a lower bound).

        Walks forward through windows that grow back from `end`, so a fast schedule after a
        long gap costs a few hundred steps, not one per missed tick.
        """
        window = timedelta(minutes=1)
        while True:
            low = max(start, end - window)
            latest: deque[datetime] = deque(maxlen=max(limit, 1))
            count = 0
            for tick in self.ticks_after(low - TINY):
                if tick > end:
                    break
                latest.append(tick)
                count += 1
            if count >= limit or low <= start:
                return (list(latest) if limit else []), count, low <= start
            window *= 8


def wall_clock(instant: datetime, zone: ZoneInfo) -> datetime:
    """`instant` as the schedule's wall clock shows it (for messages and the admin)."""
    return instant.astimezone(zone)
