"""Small HTML pieces the job and worker pages are built from: badges, times, JSON, errors.

Every word shown goes through gettext, so the admin speaks the language Django has activated.
Timestamps are numeric (`2026-11-29 12:34:56`), which reads the same in every language; month
names in short dates come from Django's own translated calendar.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.formats import number_format
from django.utils.functional import Promise
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from ..attempts import AttemptOutcome
from ..states import Status

EMPTY = "-"

#: Status → CSS modifier; the colours live in django_sqlqueue/admin.css.
BADGE_CLASSES = {
    Status.WAITING.value: "waiting",
    Status.PENDING.value: "pending",
    Status.RUNNING.value: "running",
    Status.COMPLETED.value: "completed",
    Status.FAILED.value: "failed",
    Status.DEAD.value: "dead",
    Status.CANCELLED.value: "cancelled",
}

#: One word per status, for badges and counts; the status's full label shows on hover.
SHORT_STATUS_LABELS: dict[str, Promise] = {
    Status.WAITING.value: pgettext_lazy("job status", "Waiting"),
    Status.PENDING.value: pgettext_lazy("job status", "Pending"),
    Status.RUNNING.value: pgettext_lazy("job status", "Running"),
    Status.COMPLETED.value: pgettext_lazy("job status", "Completed"),
    Status.FAILED.value: pgettext_lazy("job status", "Failed"),
    Status.DEAD.value: pgettext_lazy("job status", "Dead"),
    Status.CANCELLED.value: pgettext_lazy("job status", "Cancelled"),
}

#: How an attempt ended, as the attempt history shows it.
OUTCOME_LABELS: dict[str, Promise] = {
    AttemptOutcome.COMPLETED.value: pgettext_lazy("attempt outcome", "completed"),
    AttemptOutcome.ERROR.value: pgettext_lazy("attempt outcome", "error"),
    AttemptOutcome.RETRY.value: pgettext_lazy("attempt outcome", "retry"),
    AttemptOutcome.DISCARD.value: pgettext_lazy("attempt outcome", "discarded"),
    AttemptOutcome.TIMEOUT.value: pgettext_lazy("attempt outcome", "timeout"),
    AttemptOutcome.UNKNOWN.value: pgettext_lazy("attempt outcome", "no handler"),
    AttemptOutcome.BAD_RESULT.value: pgettext_lazy("attempt outcome", "bad result"),
    AttemptOutcome.LOST.value: pgettext_lazy("attempt outcome", "lost"),
    AttemptOutcome.RELEASED.value: pgettext_lazy("attempt outcome", "released"),
    AttemptOutcome.CANCELLED.value: pgettext_lazy("attempt outcome", "cancelled"),
}


def short_status(status: str) -> str:
    """`Dead`, `Failed`: one translated word; an unknown value as it is."""
    label = SHORT_STATUS_LABELS.get(status)
    return str(label) if label is not None else status


def status_label(status: str) -> str:
    """The full label (`Failed (retry scheduled)`); an unknown value as it is."""
    return str(Status(status).label) if status in BADGE_CLASSES else status


def status_badge(status: str) -> SafeString:
    """A coloured badge: the status in one word, its full label on hover."""
    return format_html(
        '<span class="sq-badge sq-{}" data-status="{}" title="{}">{}</span>',
        BADGE_CLASSES.get(status, "unknown"),
        status,
        status_label(status),
        short_status(status),
    )


def outcome_label(outcome: str) -> str:
    label = OUTCOME_LABELS.get(outcome)
    return str(label) if label is not None else outcome


def badge(text: str, css: str, title: str = "") -> SafeString:
    if title:
        return format_html('<span class="sq-badge sq-{}" title="{}">{}</span>', css, title, text)
    return format_html('<span class="sq-badge sq-{}">{}</span>', css, text)


def human_seconds(seconds: float | None) -> str:
    """`850 µs`, `4.2 ms`, `0.25s`, `42s`, `3m 20s`, `5h 02m`, `3d 4h`: short enough for a
    table cell, and never `0.00s` for a job that took a few milliseconds."""
    if seconds is None:
        return EMPTY
    if seconds < 0:
        return "-" + human_seconds(-seconds)
    if seconds < 0.001:
        return _("%(microseconds)d µs") % {"microseconds": round(seconds * 1_000_000)}
    if seconds < 0.01:
        return _("%(milliseconds)s ms") % {
            "milliseconds": number_format(seconds * 1000, decimal_pos=1)
        }
    if seconds < 10:
        # 0.25 in English, 0,25 in French: the active language's decimal separator.
        return _("%(seconds)ss") % {"seconds": number_format(seconds, decimal_pos=2)}
    whole = int(seconds)
    if whole < 60:
        return _("%(seconds)ds") % {"seconds": whole}
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return _("%(minutes)dm %(seconds)02ds") % {"minutes": minutes, "seconds": secs}
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return _("%(hours)dh %(minutes)02dm") % {"hours": hours, "minutes": minutes}
    days, hours = divmod(hours, 24)
    return _("%(days)dd %(hours)dh") % {"days": days, "hours": hours}


def relative(value: datetime, now: datetime | None = None) -> str:
    """`3m 20s ago` or `in 5m 00s`."""
    delta = (value - (now or timezone.now())).total_seconds()
    if abs(delta) < 1:
        return _("now")
    if delta > 0:
        return _("in %(duration)s") % {"duration": human_seconds(delta)}
    return _("%(duration)s ago") % {"duration": human_seconds(-delta)}


def _local(value: datetime) -> datetime:
    return timezone.localtime(value) if timezone.is_aware(value) else value


def full_time(value: datetime) -> str:
    return dateformat.format(_local(value), "Y-m-d H:i:s")


def moment(value: datetime | None, now: datetime | None = None) -> SafeString | str:
    """A timestamp as `2026-11-29 12:34:56`, with its distance from now on hover."""
    if value is None:
        return EMPTY
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        relative(value, now),
        full_time(value),
    )


def compact_time(value: datetime, now: datetime | None = None) -> str:
    """The time today, the day and time this year, the date otherwise."""
    now = now or timezone.now()
    local = _local(value)
    today = _local(now).date()
    if local.date() == today:
        return dateformat.format(local, "H:i:s")
    if local.year == today.year:
        return dateformat.format(local, "M d, H:i")
    return dateformat.format(local, "Y-m-d")


def compact_moment(value: datetime | None, now: datetime | None = None) -> SafeString | str:
    """A timestamp short enough for a list column; the full one and its age on hover."""
    if value is None:
        return EMPTY
    return format_html(
        '<time datetime="{}" title="{} ({})">{}</time>',
        value.isoformat(),
        full_time(value),
        relative(value, now),
        compact_time(value, now),
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


#: `package.module.SomeError: text`: the exception's dotted path before the message.
DOTTED_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*(?::|$))")


def short_error(line: str) -> str:
    """`SupplierUnavailable: …` for `shop.jobs.SupplierUnavailable: …`: the class name is
    what tells errors apart in a narrow column; the job page has the full path."""
    return DOTTED_EXCEPTION.sub("", line, count=1)


def first_line(text: str, limit: int = 100) -> str:
    """The first line of an error, cut to `limit` characters: what fits in a table cell."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def timedelta_between(start: datetime | None, end: datetime | None) -> timedelta | None:
    if start is None or end is None:
        return None
    return end - start


def running_note(job: Any) -> SafeString | str:
    """A running job's progress (`context.progress()`) and pending cancel request, if any."""
    parts: list[SafeString] = []
    if job.progress is not None:
        parts.append(
            format_html(
                '<span class="sq-sub sq-progress"><progress max="100" value="{}">{}%</progress> '
                "{}%{}</span>",
                job.progress,
                job.progress,
                job.progress,
                format_html(" · {}", job.progress_message) if job.progress_message else "",
            )
        )
    if job.cancel_requested_at is not None:
        parts.append(
            format_html(
                '<span class="sq-sub sq-cancel-requested" title="{}">{}</span>',
                _("Its worker stops it; it then ends cancelled."),
                _("cancel requested"),
            )
        )
    return format_html_join("", "{}", ((part,) for part in parts)) if parts else ""


def changelist_url(**params: str) -> str:
    """The job list, filtered by these query parameters."""
    return reverse("admin:django_sqlqueue_job_changelist") + "?" + urlencode(params)
