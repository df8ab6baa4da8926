"""Medians and min-max per (database, scenario, variant, system), as a text table."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from .scenarios import SCENARIOS, variant_label
from .systems import SYSTEMS

LABELS = {
    "sqlqueue": "django-sqlqueue",
    "sqlqueue_batch": "django-sqlqueue, batch completion",
    "tasks_db": "django-tasks-db",
    "procrastinate": "Procrastinate",
    "huey": "Huey",
    "raw": "raw driver",
}


def fmt(value: float) -> str:
    if value != value:  # NaN
        return "nan"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    middle = statistics.median(values)
    if len(values) == 1:
        return fmt(middle)
    return f"{fmt(middle)} ({fmt(min(values))}-{fmt(max(values))})"


def group(results: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str, str], list[dict]]:
    groups: dict[tuple[str, str, str, str], list[dict]] = {}
    for result in results:
        if result.get("warmup") or result["status"] == "superseded":
            continue  # a superseded result was rerun; its reason stays in the JSON
        key = (result["db"], result["scenario"], variant_label(result["params"]), result["system"])
        groups.setdefault(key, []).append(result)
    return groups


def metric_names(scenario: str) -> tuple[str, ...]:
    spec = SCENARIOS[scenario]
    return spec.metrics or (spec.primary,)


def table(results: list[dict[str, Any]]) -> str:
    """Markdown table: one row per (db, scenario, variant, system), median (min-max)."""
    lines = [
        "| DB | scenario | variant | system | result: median (min-max) | runs | load avg | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = {name: i for i, name in enumerate([*SYSTEMS, "raw"])}
    groups = group(results)
    keys = sorted(
        groups,
        key=lambda k: (k[0], list(SCENARIOS).index(k[1]), k[2], order.get(k[3], 99)),
    )
    for key in keys:
        db, scenario, variant, system = key
        runs = groups[key]
        ok = [r for r in runs if r["status"] == "ok"]
        if ok:
            cells = []
            for metric in metric_names(scenario):
                values = [r["metrics"][metric] for r in ok if metric in r["metrics"]]
                cells.append(f"{metric} {summary(values)}")
            text = "; ".join(cells)
        else:
            text = runs[0]["status"]
        problems = sorted({r["problems"] for r in runs if r["problems"]})
        failed = len(runs) - len(ok)
        notes = "; ".join(problems)
        if failed and ok:
            notes = f"{failed} run(s) failed: {notes}"
        load = max(r["loadavg_before"][0] for r in runs)
        lines.append(
            f"| {db} | {scenario} | {variant} | {LABELS.get(system, system)} | {text} "
            f"| {len(ok)}/{len(runs)} | ≤{load:.1f} | {notes} |"
        )
    return "\n".join(lines)


def pivot(results: list[dict[str, Any]], metric: str | None = None) -> str:
    """Markdown: one row per (db, scenario, variant), one column per system, medians."""
    groups = group(results)
    systems = [s for s in [*SYSTEMS, "raw"] if any(k[3] == s for k in groups)]
    rows = sorted({k[:3] for k in groups}, key=lambda k: (k[0], list(SCENARIOS).index(k[1]), k[2]))
    header = "| DB | scenario | variant | " + " | ".join(LABELS[s] for s in systems) + " |"
    lines = [header, "|" + "---|" * (3 + len(systems))]
    for db, scenario, variant in rows:
        name = metric or SCENARIOS[scenario].primary
        cells = []
        for system in systems:
            runs = groups.get((db, scenario, variant, system), [])
            ok = [r["metrics"][name] for r in runs if r["status"] == "ok" and name in r["metrics"]]
            failed = {r["status"] for r in runs} - {"ok"}
            if ok:
                cells.append(summary(ok))
            elif failed:
                cells.append("/".join(sorted(failed)))
            elif runs:
                cells.append("-")  # ran, but this metric was not recorded
            else:
                cells.append("")
        lines.append(f"| {db} | {scenario} | {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
