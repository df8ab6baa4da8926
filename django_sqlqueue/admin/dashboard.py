"""The queue dashboard in the admin: the last hour or day as charts, read from the per-minute
rollup and the queue samples (metrics/rollups.py), never from the job table.

Three queries whatever the job table holds: the rollup by minute and outcome (with the wait
buckets), the rollup by queue, job name and outcome (the tables under the charts), and the
samples.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Sum
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _

from ..conf import get_settings
from ..models import WAIT_BUCKETS, WAIT_COLUMNS, Job, JobRollup, QueueSample
from ..outcomes import OUTCOMES
from . import charts

#: Queues the backlog chart draws at most (the largest backlogs).
MAX_QUEUES = 6
#: Outcomes that count as failures in the failure rate.
FAILURES = ("failed", "dead", "lost")
#: Job names the table lists at most (the most failures first, then the most attempts).
MAX_NAMES = 10


def new_totals() -> dict[str, float]:
    return dict.fromkeys((*OUTCOMES, "seconds"), 0.0)


def sum_of(entry: dict[str, float], outcomes: tuple[str, ...] = OUTCOMES) -> float:
    return sum(entry[outcome] for outcome in outcomes)


def summed(entry: dict[str, float]) -> dict[str, Any]:
    """A table row: attempts, completed, failures, failure rate, mean run time."""
    finished = int(sum_of(entry))
    failures = int(sum_of(entry, FAILURES))
    timed = finished - int(entry["lost"])  # a lost attempt has no run time
    return {
        "finished": finished,
        "completed": int(entry["completed"]),
        "failures": failures,
        "rate": percent_text(100 * failures / finished) if finished else "-",
        "mean": seconds_text(entry["seconds"] / timed) if timed else "-",
    }


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    span: timedelta
    bucket: timedelta

    @property
    def per_minute(self) -> bool:
        return self.bucket == timedelta(minutes=1)

    @property
    def note(self) -> str:
        """What one bar or point of its charts stands for."""
        if self.per_minute:
            return _("Each bar and point is one minute.")
        return _("Drawn in 10-minute buckets: each bar and point sums ten minutes.")


def windows() -> dict[str, Window]:
    return {
        "hour": Window("hour", _("Last hour"), timedelta(hours=1), timedelta(minutes=1)),
        "day": Window("day", _("Last 24 hours"), timedelta(days=1), timedelta(minutes=10)),
    }


def bucket_starts(window: Window, now: datetime) -> list[datetime]:
    """The buckets' start times, oldest first, the last one holding `now`."""
    step = int(window.bucket.total_seconds())
    epoch = int(now.timestamp())
    last = datetime.fromtimestamp(epoch - epoch % step, tz=now.tzinfo)
    count = int(window.span / window.bucket)
    return [last - window.bucket * (count - 1 - i) for i in range(count)]


def quantile(counts: list[float], q: float) -> float | None:
    """The q-quantile of waits counted in WAIT_BUCKETS, interpolated inside its bucket."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0.0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            lower = WAIT_BUCKETS[index - 1] if index else 0.0
            upper = WAIT_BUCKETS[index]
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * (rank - seen) / count
        seen += count
    return WAIT_BUCKETS[-2]


def local(moment: datetime) -> datetime:
    """In the current time zone (naive datetimes, with USE_TZ off, already are)."""
    return timezone.localtime(moment) if timezone.is_aware(moment) else moment


def seconds_text(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.3g} s"
    if value < 7200:
        return f"{value / 60:.3g} min"
    return f"{value / 3600:.3g} h"


def percent_text(value: float) -> str:
    return f"{value:.3g}%"


class DashboardData:
    """The window's numbers, folded into its buckets."""

    def __init__(self, window: Window, now: datetime, alias: str) -> None:
        self.window = window
        self.starts = bucket_starts(window, now)
        self.since = self.starts[0]
        step = window.bucket.total_seconds()
        self.index = {int(start.timestamp() // step): i for i, start in enumerate(self.starts)}
        self.step = step
        size = len(self.starts)
        self.finished = {outcome: [0.0] * size for outcome in OUTCOMES}
        self.waits = [[0.0] * len(WAIT_BUCKETS) for _ in range(size)]
        self.read_rollup(alias)
        self.read_totals(alias)
        self.backlog: dict[str, list[float | None]] = {}
        self.read_samples(alias)

    def slot(self, moment: datetime) -> int | None:
        return self.index.get(int(moment.timestamp() // self.step))

    def read_rollup(self, alias: str) -> None:
        sums = {name: Sum(name) for name in ("count", *WAIT_COLUMNS)}
        rows = (
            JobRollup.objects.using(alias)
            .filter(minute__gte=self.since)
            .values("minute", "outcome")
            .order_by()
            .annotate(**{f"total_{name}": value for name, value in sums.items()})
        )
        for row in cast("Iterable[dict[str, Any]]", rows):
            slot = self.slot(row["minute"])
            if slot is None:
                continue
            if row["outcome"] in self.finished:
                self.finished[row["outcome"]][slot] += row["total_count"] or 0
            waits = self.waits[slot]
            for index, name in enumerate(WAIT_COLUMNS):
                waits[index] += row[f"total_{name}"] or 0

    def read_totals(self, alias: str) -> None:
        """Attempts per queue, job name and outcome: the tables under the charts."""
        rows = (
            JobRollup.objects.using(alias)
            .filter(minute__gte=self.since)
            .values("queue", "name", "outcome")
            .order_by()
            .annotate(total=Sum("count"), seconds=Sum("duration_sum"))
        )
        queues: dict[str, dict[str, float]] = defaultdict(new_totals)
        names: dict[tuple[str, str], dict[str, float]] = defaultdict(new_totals)
        for row in rows:
            for entry in (queues[row["queue"]], names[(row["name"], row["queue"])]):
                if row["outcome"] in OUTCOMES:
                    entry[row["outcome"]] += row["total"] or 0
                entry["seconds"] += row["seconds"] or 0.0
        self.per_queue = [{"queue": queue, **summed(queues[queue])} for queue in sorted(queues)]
        ranked = sorted(names, key=lambda key: (-sum_of(names[key], FAILURES), -sum_of(names[key])))
        self.per_name = [
            {"name": name, "queue": queue, **summed(names[(name, queue)])}
            for name, queue in ranked[:MAX_NAMES]
        ]

    def read_samples(self, alias: str) -> None:
        rows = (
            QueueSample.objects.using(alias)
            .filter(minute__gte=self.since)
            .order_by("minute")
            .values_list("minute", "queue", "pending", "failed")
        )
        backlog: dict[str, list[float | None]] = {}
        for minute, queue, pending, failed in rows:
            slot = self.slot(minute)
            if slot is None:
                continue
            values = backlog.setdefault(queue, [None] * len(self.starts))
            # A bucket of several minutes shows its largest sample.
            values[slot] = max(values[slot] or 0, pending + failed)
        largest = sorted(backlog, key=lambda q: -max(v or 0 for v in backlog[q]))
        self.backlog = {queue: backlog[queue] for queue in sorted(largest[:MAX_QUEUES])}

    # Charts --------------------------------------------------------------------------------

    def labels(self) -> list[str]:
        """Each bucket's name on hover: its time, and in the day view its date too."""
        shape = "H:i" if self.window.per_minute else "M j, H:i"
        return [date_format(local(start), shape) for start in self.starts]

    def ticks(self) -> list[str]:
        """Under the x-axis: the time, and in the day view the date on a second line."""
        if self.window.per_minute:
            return self.labels()
        return [date_format(local(start), "H:i\nM j") for start in self.starts]

    def charts(self) -> list[dict[str, Any]]:
        labels, ticks = self.labels(), self.ticks()
        outcome_names = {
            "completed": _("completed"),
            "failed": _("failed, will retry"),
            "dead": _("dead"),
            "cancelled": _("cancelled"),
            "lost": _("lost with its worker"),
        }
        finished = [
            charts.Series(outcome_names[o], f"sq-s-{o}", self.finished[o]) for o in OUTCOMES
        ]
        per = _("per minute") if self.window.per_minute else _("per 10 minutes")
        backlog = [
            charts.Series(queue, f"sq-s-q{i}", values)
            for i, (queue, values) in enumerate(self.backlog.items())
        ]
        waits = [
            charts.Series(_("p50"), "sq-s-p50", [quantile(w, 0.5) for w in self.waits]),
            charts.Series(_("p95"), "sq-s-p95", [quantile(w, 0.95) for w in self.waits]),
        ]
        rates = []
        for i in range(len(self.starts)):
            total = sum(self.finished[o][i] for o in OUTCOMES)
            bad = sum(self.finished[o][i] for o in FAILURES)
            rates.append(100 * bad / total if total else None)
        failure = [charts.Series(_("failure rate"), "sq-s-dead", rates)]
        return [
            {
                "id": "finished",
                "title": _("Attempts finished %(per)s, by outcome") % {"per": per},
                "svg": charts.stacked_bars(_("Attempts finished"), labels, finished, ticks=ticks),
                "legend": charts.legend(finished),
            },
            {
                "id": "backlog",
                "title": _("Backlog per queue (pending and failed jobs)"),
                "svg": charts.line_chart(
                    _("Backlog per queue"), labels, backlog, ticks=ticks, whole=True
                ),
                "legend": charts.legend(backlog),
                "empty": not backlog,
            },
            {
                "id": "wait",
                "title": _("Wait from run_at to start, p50 and p95"),
                "svg": charts.line_chart(_("Wait"), labels, waits, axis=seconds_text, ticks=ticks),
                "legend": charts.legend(waits),
            },
            {
                "id": "failures",
                "title": _("Failure rate (failed, dead and lost attempts)"),
                "svg": charts.line_chart(
                    _("Failure rate"), labels, failure, axis=percent_text, top=100, ticks=ticks
                ),
                "legend": charts.legend(failure),
            },
        ]


def dashboard_view(model_admin: admin.ModelAdmin[Job], request: HttpRequest) -> TemplateResponse:
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    options = windows()
    window = options.get(request.GET.get("range", ""), options["hour"])
    now = timezone.now()
    data = DashboardData(window, now, get_settings().database)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": _("Job queue dashboard"),
        "opts": model_admin.model._meta,
        "window": window,
        "windows": options.values(),
        "charts": data.charts(),
        "per_queue": data.per_queue,
        "per_name": data.per_name,
        "since": local(data.since),
        "now": local(now),
    }
    return TemplateResponse(request, "django_sqlqueue/admin/dashboard.html", context)
