"""A cron expression in words, for the common shapes ("every day at 03:00"); None otherwise.

Small on purpose: the admin and `manage.py schedules` show the expression itself beside the
words, so an unusual schedule loses nothing when it gets no sentence. Every word goes through
gettext, and day and month names come from Django's own translated calendar.
"""

from __future__ import annotations

import re

from django.utils.dates import MONTHS, WEEKDAYS
from django.utils.text import get_text_list
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
DAY_NAMES = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
NUMBER = re.compile(r"^\d+$")
STEP = re.compile(r"^\*/(\d+)$")


def describe(expression: str) -> str | None:
    """`every day at 03:00`, `every 2 seconds`, `on weekdays at 09:30`, or None."""
    fields = ALIASES.get(expression.strip().lower(), expression).split()
    if len(fields) == 5:
        fields.append("0")
    if len(fields) != 6:
        return None
    minute, hour, day, month, weekday, second = (f.lower() for f in fields)
    calendar_free = day == month == weekday == "*"
    if calendar_free and hour == "*" and minute == "*":
        return _seconds(second)
    if second != "0" and not NUMBER.match(second):
        return None
    if calendar_free and hour == "*":
        if minute == "*" and second == "0":
            return _("every minute")
        step = STEP.match(minute)
        if step and second == "0":
            n = int(step.group(1))
            return ngettext("every minute", "every %(n)d minutes", n) % {"n": n}
        if NUMBER.match(minute):
            return _("every hour at minute %(minute)s") % {"minute": f"{int(minute):02d}"}
        return None
    if not (NUMBER.match(minute) and (NUMBER.match(hour) or STEP.match(hour))):
        return None
    step = STEP.match(hour)
    if step:
        if not calendar_free:
            return None
        n = int(step.group(1))
        return ngettext(
            "every hour at minute %(minute)s",
            "every %(n)d hours at minute %(minute)s",
            n,
        ) % {"n": n, "minute": f"{int(minute):02d}"}
    at = f"{int(hour):02d}:{int(minute):02d}" + (f":{int(second):02d}" if second != "0" else "")
    return _on_days(day, month, weekday, at)


def _seconds(second: str) -> str | None:
    if second == "*":
        return _("every second")
    step = STEP.match(second)
    if step:
        n = int(step.group(1))
        return ngettext("every second", "every %(n)d seconds", n) % {"n": n}
    if second == "0":
        return _("every minute")
    return None


def _on_days(day: str, month: str, weekday: str, at: str) -> str | None:
    if day == month == "*":
        if weekday == "*":
            return _("every day at %(time)s") % {"time": at}
        days = _weekdays(weekday)
        if days is None:
            return None
        if days == [1, 2, 3, 4, 5]:
            return _("on weekdays at %(time)s") % {"time": at}
        if days == [0, 6]:
            return _("on weekends at %(time)s") % {"time": at}
        names = [str(WEEKDAYS[(d - 1) % 7]) for d in days]
        return _("every %(days)s at %(time)s") % {
            "days": get_text_list(names, _("and")),
            "time": at,
        }
    if weekday != "*" or not NUMBER.match(day):
        return None
    if month == "*":
        return _("on day %(day)d of every month at %(time)s") % {"day": int(day), "time": at}
    if NUMBER.match(month) and 1 <= int(month) <= 12:
        return _("every year on %(month)s %(day)d at %(time)s") % {
            "month": MONTHS[int(month)],
            "day": int(day),
            "time": at,
        }
    return None


def _weekdays(field: str) -> list[int] | None:
    """Cron weekdays (0 or 7 is Sunday) as sorted numbers 0-6, for lists and ranges."""
    days: set[int] = set()
    for part in field.split(","):
        bounds = [DAY_NAMES.get(b, int(b) if NUMBER.match(b) else -1) for b in part.split("-")]
        if len(bounds) > 2 or any(not 0 <= b <= 7 for b in bounds):
            return None
        low, high = bounds[0], bounds[-1]
        if high < low:
            return None
        days.update(d % 7 for d in range(low, high + 1))
    return sorted(days)
