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
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg class="sq-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
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
            parts.append(
                f'<text class="sq-axis" x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
                f"{escape(labels[index])}</text>"
            )
    parts.extend(body)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every text above is escaped


def stacked_bars(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    axis: Callable[[float], str] = plain_number,
) -> SafeString:
    """One bar per label, its series stacked in order."""
    count = len(labels)
    totals = [sum((s.values[i] or 0) for s in series) for i in range(count)]
    top = nice_ceiling(max(totals, default=0))
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
    return _frame(title, summary, top, labels, axis, body)


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    axis: Callable[[float], str] = plain_number,
    top: float | None = None,
) -> SafeString:
    """One polyline per series; a gap where a value is None."""
    count = len(labels)
    highest = max((v for s in series for v in s.values if v is not None), default=0.0)
    top = top or nice_ceiling(highest)
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
    return _frame(title, summary, top, labels, axis, body)


def legend(series: Sequence[Series]) -> SafeString:
    items = [
        format_html('<li><span class="sq-swatch {}"></span>{}</li>', s.css, s.label) for s in series
    ]
    return format_html('<ul class="sq-legend">{}</ul>', mark_safe("".join(items)))
