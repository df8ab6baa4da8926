"""The filters of `manage.py jobs` (`--status`, `--queue`, `--name`, `--older-than`, `--id`):
read from the command line, checked there (a bad value is one line, never a traceback), and
applied to a queryset as conditions the job table's indexes serve."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import CommandParser
from django.db.models import Q, QuerySet
from django.utils import timezone

from ..exceptions import InvalidJobError
from ..models import Job, reference_q
from ..references import Reference, format_reference, parse_reference
from ..states import Status
from ..validation import INT64_MAX, check_name
from .base import MAX_DAYS

#: Job ids `--id` may name in all: more is a selection for the other filters.
MAX_IDS = 1000

DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([smhd]?)")
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DURATION_SECONDS = MAX_DAYS * 86400


def duration(text: str) -> timedelta:
    """An argparse type: `30s`, `15m`, `2h`, `7d`, or a plain number of seconds."""
    match = DURATION.fullmatch(text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: write 30s, 15m, 2h, 7d or a number of seconds"
        )
    seconds = float(match.group(1)) * UNIT_SECONDS[match.group(2)]
    if seconds > MAX_DURATION_SECONDS:
        raise argparse.ArgumentTypeError(f"{text} is too long (the most is {MAX_DAYS:g}d)")
    return timedelta(seconds=seconds)


def job_id(text: str) -> Reference:
    """An argparse type: one job id (a positive integer, as the admin lists it: that job,
    whatever its nonce) or reference (`4711-3f9a…`: that job only, references.py)."""
    text = text.strip()
    if "-" in text.lstrip("-"):
        reference = parse_reference(text)
        if reference is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a job id or reference")
        return reference
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a job id") from None
    if not 1 <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"{text} is not a job id (ids start at 1)")
    return Reference(value, None)


def job_ids(text: str) -> list[Reference]:
    """An argparse type: job ids or references separated by commas (`--id 12,13`)."""
    return [job_id(part) for part in text.split(",") if part.strip()] or [job_id(text)]


def text_filter(what: str, limit: int) -> Any:
    """An argparse type: a queue or job name as the job table can store it."""

    def parse(text: str) -> str:
        try:
            return check_name(text, what, limit)
        except InvalidJobError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def add_filter_arguments(parser: CommandParser, *, age: str = "created") -> None:
    """The filters every `jobs` subcommand but `show` takes; `age` is what `--older-than`
    measures from (`created`, or `finished` for purge)."""
    parser.add_argument(
        "--status",
        action="append",
        choices=[status.value for status in Status],
        help="Only jobs in this status (repeatable).",
    )
    parser.add_argument(
        "--queue",
        type=text_filter("--queue", Job._meta.get_field("queue").max_length or 100),
        help="Only jobs of this queue.",
    )
    parser.add_argument(
        "--name",
        type=text_filter("--name", Job._meta.get_field("name").max_length or 255),
        help="Only jobs with this registered name (exact).",
    )
    parser.add_argument(
        "--older-than",
        type=duration,
        metavar="DURATION",
        help=f"Only jobs {age} more than this long ago: 30s, 15m, 2h, 7d, or seconds.",
    )
    parser.add_argument(
        "--id",
        dest="ids",
        action="append",
        type=job_ids,
        metavar="ID",
        help=(
            "Only these jobs, by id or reference (4711-3f9a…): repeatable, or "
            f"comma-separated (at most {MAX_IDS})."
        ),
    )


@dataclass(frozen=True)
class JobFilters:
    """The filters one command line gave; no filter at all is falsy."""

    statuses: tuple[str, ...] = ()
    queue: str | None = None
    name: str | None = None
    older_than: timedelta | None = None
    #: By id (nonce None: that id, whatever the row's nonce) or by reference.
    ids: tuple[Reference, ...] = ()

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> JobFilters:
        ids = tuple(dict.fromkeys(i for group in options.get("ids") or () for i in group))
        if len(ids) > MAX_IDS:
            raise ValueError(
                f"--id names {len(ids)} jobs; the most is {MAX_IDS}. Select more with the "
                "other filters (--status, --queue, --name, --older-than)."
            )
        return cls(
            statuses=tuple(dict.fromkeys(options.get("status") or ())),
            queue=options.get("queue"),
            name=options.get("name"),
            older_than=options.get("older_than"),
            ids=ids,
        )

    def __bool__(self) -> bool:
        return bool(
            self.statuses or self.queue or self.name or self.older_than is not None or self.ids
        )

    def cutoff(self, now: datetime | None = None) -> datetime | None:
        if self.older_than is None:
            return None
        return (now or timezone.now()) - self.older_than

    def apply(
        self, queryset: QuerySet[Job], *, age_field: str = "created_at", now: datetime | None = None
    ) -> QuerySet[Job]:
        """`queryset` narrowed by every filter given; `--older-than` compares `age_field`."""
        if self.statuses:
            queryset = queryset.filter(status__in=self.statuses)
        if self.queue:
            queryset = queryset.filter(queue=self.queue)
        if self.name:
            queryset = queryset.filter(name=self.name)
        cutoff = self.cutoff(now)
        if cutoff is not None:
            queryset = queryset.filter(**{f"{age_field}__lt": cutoff})
        if self.ids:
            plain = [ref.id for ref in self.ids if ref.nonce is None]
            named = Q(id__in=plain) if plain else Q()
            for ref in self.ids:
                if ref.nonce is not None:
                    named |= reference_q(ref)
            queryset = queryset.filter(named)
        return queryset

    def describe(self, *, age: str = "created") -> str:
        """`in queue 'mail', named 'shop.export', created more than 2:00:00 ago`, or ''."""
        parts = []
        if self.queue:
            parts.append(f"in queue {self.queue!r}")
        if self.name:
            parts.append(f"named {self.name!r}")
        if self.older_than is not None:
            parts.append(f"{age} more than {_span(self.older_than)} ago")
        if self.ids:
            shown = ", ".join(format_reference(*ref) for ref in self.ids[:10])
            parts.append(f"with id {shown}{', …' if len(self.ids) > 10 else ''}")
        return ", ".join(parts)


def _span(delta: timedelta) -> str:
    """`90s`, `15m`, `2h`, `7d`, `1.5h`: a duration as it would be typed."""
    seconds = delta.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
