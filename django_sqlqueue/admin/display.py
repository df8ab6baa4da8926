"""Small HTML pieces the job and worker pages are built from: badges, times, JSON, errors."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..states import Status

EMPTY = "-"

#: Status → CSS modifier; the colours live in django_sqlqueue/admin.css.
BADGE_CLASSES = {
    Status.PENDING.value: "pending",
    Status.RUNNING.value: "running",
    Status.COMPLETED.value: "completed",
    Status.FAILED.value: "failed",
    Status.DEAD.value: "dead",
    Status.CANCELLED.value: "cancelled",
}


def status_badge(status: str) -> SafeString:
    """A coloured badge: the status in one word, its full label on hover."""
    known = status in BADGE_CLASSES
    label = Status(status).label if known else status
    css = BADGE_CLASSES.get(status, "unknown")
    return format_html(
        '<span class="sq-badge sq-{}" data-status="{}" title="{}">{}</span>',
        css,
        status,
        label,
        status.capitalize() if known else status,
    )


def badge(text: str, css: str) -> SafeString:
    return format_html('<span class="sq-badge sq-{}">{}</span>', css, text)


def human_seconds(seconds: float | None) -> str:
    """`0.25s`, `42s`, `3m 20s`, `5h 02m`, `3d 4h`: short enough for a table cell."""
    if seconds is None:
        return EMPTY
    if seconds < 0:
        return "-" + human_seconds(-seconds)
    if seconds < 10:
        return f"{seconds:.2f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def relative(value: datetime, now: datetime | None = None) -> str:
    """`3m 20s ago` or `in 5m 00s`."""
    delta = (value - (now or timezone.now())).total_seconds()
    if abs(delta) < 1:
        return "now"
    return f"in {human_seconds(delta)}" if delta > 0 else f"{human_seconds(-delta)} ago"


def moment(value: datetime | None, now: datetime | None = None) -> SafeString | str:
    """A timestamp as `2026-11-29 12:34:56`, with its distance from now on hover."""
    if value is None:
        return EMPTY
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        relative(value, now),
        local.strftime("%Y-%m-%d %H:%M:%S"),
    )


def compact_moment(value: datetime | None, now: datetime | None = None) -> SafeString | str:
    """A timestamp short enough for a list column: the time today, the date otherwise."""
    if value is None:
        return EMPTY
    now = now or timezone.now()
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    today = timezone.localtime(now).date() if timezone.is_aware(now) else now.date()
    if local.date() == today:
        text = local.strftime("%H:%M:%S")
    elif local.year == today.year:
        text = local.strftime("%b %d, %H:%M")
    else:
        text = local.strftime("%Y-%m-%d")
    return format_html(
        '<time datetime="{}" title="{} ({})">{}</time>',
        value.isoformat(),
        local.strftime("%Y-%m-%d %H:%M:%S"),
        relative(value, now),
        text,
    )


def parse_moment(value: Any) -> datetime | None:
    """A timestamp stored as ISO text in the attempt history."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, timezone.get_default_timezone())
    return parsed


def pretty_json(value: Any) -> SafeString:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre class="sq-json">{}</pre>', text)


def first_line(text: str, limit: int = 100) -> str:
    """The first line of an error, cut to `limit` characters: what fits in a table cell."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def timedelta_between(start: datetime | None, end: datetime | None) -> timedelta | None:
    if start is None or end is None:
        return None
    return end - start
