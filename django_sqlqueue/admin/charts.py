"""Small charts drawn on the server as inline SVG: no JavaScript, nothing fetched from elsewhere.

Colours come from CSS classes (static/django_sqlqueue/dashboard.css), which take the admin's
own variables for text and grid lines and a light and a dark shade for each series, so a
chart reads in the admin's light and dark themes alike. Each bar and point carries a <title>,
which browsers show on hover, and each chart a text summary for screen readers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

WIDTH = 600
HEIGHT = 210
LEFT = 56
RIGHT = 12
TOP = 12
BOTTOM = 28
#: X-axis labels drawn at most.
X_LABELS = 7
#: The height of a line of an x-axis label.
LINE = 15


@dataclass(frozen=True)
class Series:
    label: str
    #: CSS class giving the series its colour (sq-s-completed, sq-s-q0 ...).
    css: str
    values: Sequence[float | None]


def nice_ceiling(value: float) -> float:
    """The axis' top: 1, 2, 2.5 or 5 times a power of ten, at least `value`."""
    if value <= 0:
        return 1.0
    power = 1.0
    while power * 10 <= value:
        power *= 10
    while power > value:
        power /= 10
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def whole_ceiling(value: float) -> float:
    """The axis' top for counts of jobs: 2, 4, 6 or 10 times a power of ten, at least
    `value`, so that its half, the middle tick, is a whole number too."""
    power = 1.0
    while True:
        for step in (2, 4, 6, 10):
            if step * power >= value:
                return step * power
        power *= 10


def plain_number(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def _frame(
    title: str,
    summary: str,
    top: float,
    labels: Sequence[str],
    axis: Callable[[float], str],
    body: list[str],
) -> SafeString:
    """The frame around a chart's `body`: its grid, the y-axis and, under the plot, the
    x-axis labels, each on one line or more (a label's lines are split on newlines; the
    chart grows by a line for each more)."""
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    lines = max((label.count("\n") + 1 for label in labels), default=1)
    height = HEIGHT + LINE * (lines - 1)
    parts = [
        f'<svg class="sq-chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title><desc>{escape(summary)}</desc>",
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - fraction)
        parts.append(
            f'<line class="sq-grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="sq-axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(axis(top * fraction))}</text>"
        )
    count = len(labels)
    if count:
        every = max(1, -(-count // X_LABELS))
        for index in range(0, count, every):
            x = LEFT + plot_w * (index + 0.5) / count
            spans = "".join(
                f'<tspan x="{x:.1f}" dy="{LINE if number else 0}">{escape(line)}</tspan>'
                for number, line in enumerate(labels[index].split("\n"))
            )
            parts.append(
                f'<text class="sq-axis sq-x" x="{x:.1f}" y="{HEIGHT - 8}" '
                f'text-anchor="middle">{spans}</text>'
            )
    parts.extend(body)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every text above is escaped


def stacked_bars(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    axis: Callable[[float], str] = plain_number,
    ticks: Sequence[str] | None = None,
) -> SafeString:
    """One bar per label, its series stacked in order: counts, so the y-axis counts whole
    jobs. `labels` name the bars on hover, `ticks` (the labels by default) under the axis."""
    count = len(labels)
    totals = [sum((s.values[i] or 0) for s in series) for i in range(count)]
    top = whole_ceiling(max(totals, default=0))
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    slot = plot_w / max(count, 1)
    bar = max(1.0, slot * 0.8)
    body = []
    for index in range(count):
        base = 0.0
        x = LEFT + slot * index + (slot - bar) / 2
        for s in series:
            value = s.values[index] or 0
            if value <= 0:
                continue
            y = TOP + plot_h * (1 - (base + value) / top)
            height = plot_h * value / top
            body.append(
                f'<rect class="{s.css}" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" '
                f'height="{max(height, 0.5):.1f}"><title>{escape(labels[index])} '
                f"{escape(s.label)}: {axis(value)}</title></rect>"
            )
            base += value
    summary = ", ".join(f"{s.label} {axis(sum(v or 0 for v in s.values))}" for s in series)
    return _frame(title, summary, top, ticks or labels, axis, body)


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    axis: Callable[[float], str] = plain_number,
    top: float | None = None,
    ticks: Sequence[str] | None = None,
    whole: bool = False,
) -> SafeString:
    """One polyline per series; a gap where a value is None. `whole`: the values count
    jobs, and so does the y-axis."""
    count = len(labels)
    highest = max((v for s in series for v in s.values if v is not None), default=0.0)
    top = top or (whole_ceiling(highest) if whole else nice_ceiling(highest))
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    body = []
    for s in series:
        runs: list[list[str]] = [[]]
        for index, value in enumerate(s.values):
            if value is None:
                runs.append([])
                continue
            x = LEFT + plot_w * (index + 0.5) / max(count, 1)
            y = TOP + plot_h * (1 - min(value, top) / top)
            runs[-1].append(f"{x:.1f},{y:.1f}")
            body.append(
                f'<circle class="{s.css}" cx="{x:.1f}" cy="{y:.1f}" r="2.2">'
                f"<title>{escape(labels[index])} {escape(s.label)}: {axis(value)}</title></circle>"
            )
        for run in runs:
            if len(run) > 1:
                body.insert(0, f'<polyline class="{s.css}" points="{" ".join(run)}"/>')
    summary = ", ".join(
        # Translators: a line chart's text for screen readers: a series and its highest value.
        _("%(series)s up to %(value)s")
        % {
            "series": s.label,
            "value": axis(max((v for v in s.values if v is not None), default=0)),
        }
        for s in series
    )
    return _frame(title, summary, top, ticks or labels, axis, body)


def legend(series: Sequence[Series]) -> SafeString:
    items = [
        format_html('<li><span class="sq-swatch {}"></span>{}</li>', s.css, s.label) for s in series
    ]
    return format_html('<ul class="sq-legend">{}</ul>', mark_safe("".join(items)))
