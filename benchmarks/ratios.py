"""The per-job cost targets as ratios of medians measured side by side in one run: ours
against Django's own `create()`, the best peer and the raw driver. Only ratios whose two
sides are both in the results are printed (a run of some scenarios prints some ratios)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .report import LABELS, fmt

PEERS = ("tasks_db", "procrastinate", "huey")


@dataclass(frozen=True)
class Side:
    """One median: a scenario's variant (params that must match) and system, one metric."""

    scenario: str
    params: dict[str, Any]
    systems: tuple[str, ...]
    metric: str = "jobs_per_s"
    #: What the table calls it (default: the system's label).
    label: str = ""


@dataclass(frozen=True)
class Target:
    name: str
    ours: Side
    against: Side
    #: The bound the ratio should meet, per database (None: no target there): the least it
    #: should be, or with `at_most` (a time, where lower is better) the most.
    least: Callable[[str], float | None]
    at_most: bool = False

    def verdict(self, db: str, ratio: float) -> str:
        bound = self.least(db)
        if bound is None:
            return "-"
        met = ratio <= bound if self.at_most else ratio >= bound
        return f"{'≤' if self.at_most else '≥'} {bound:g}: {'met' if met else 'NOT met'}"


def everywhere(value: float) -> Callable[[str], float]:
    return lambda db: value


def per_db(**values: float) -> Callable[[str], float | None]:
    return lambda db: values.get(db)


def ours(scenario: str, metric: str = "jobs_per_s", **params: Any) -> Side:
    return Side(scenario, params, ("sqlqueue",), metric)


def peers(scenario: str, **params: Any) -> Side:
    return Side(scenario, params, PEERS)


TARGETS = (
    Target(
        "enqueue, single ÷ Django's create() of the same columns",
        ours("enqueue", mode="single"),
        Side("enqueue_floor", {"mode": "create"}, ("raw",), label="Django create()"),
        everywhere(0.9),
    ),
    Target(
        "enqueue, single ÷ the best peer's",
        ours("enqueue", mode="single"),
        peers("enqueue", mode="single"),
        everywhere(1.5),
    ),
    Target(
        "drain 3,000, -n 4 ÷ the best peer's",
        ours("drain", jobs=3_000, workers=4),
        peers("drain", jobs=3_000, workers=4),
        everywhere(1.0),
    ),
    Target(
        "drain 30,000, -n 4 ÷ the best peer's",
        ours("drain", jobs=30_000, workers=4),
        peers("drain", jobs=30_000, workers=4),
        per_db(sqlite=2.0, postgres=5.0, mysql=4.0),
    ),
    Target(
        # No target of its own: what the drain target above stands on.
        "drain 30,000, -n 4 ÷ the raw floor of the default mode (4 processes, 20 claimed, "
        "a commit per completion)",
        ours("drain", jobs=30_000, workers=4),
        Side("floor", {"workers": 4, "batch": 20, "commits": "each"}, ("raw",), label="raw driver"),
        per_db(),
    ),
    Target(
        "steady drain 30,000, -n 1 ÷ the raw per-job floor (1 process, one at a time)",
        ours("drain", "steady_jobs_per_s", jobs=30_000, workers=1),
        Side("floor", {"workers": 1, "batch": 1}, ("raw",), label="raw driver"),
        per_db(sqlite=0.75),
    ),
    Target(
        "start-up, exec -> first job, -n 1 ÷ a bare project's `manage.py check`",
        ours("startup", "startup_s", workers=1),
        Side("check_floor", {}, ("raw",), "startup_s", label="manage.py check"),
        everywhere(1.5),
        at_most=True,
    ),
)


def median_of(
    results: list[dict[str, Any]], db: str, side: Side, lower_is_better: bool = False
) -> tuple[float, str] | None:
    """The best median among `side`'s systems on `db`, and which system gave it."""
    best: tuple[float, str] | None = None
    for system in side.systems:
        values = [
            r["metrics"][side.metric]
            for r in results
            if r["db"] == db
            and r["scenario"] == side.scenario
            and r["system"] == system
            and r["status"] == "ok"
            and not r.get("warmup")
            and side.metric in r["metrics"]
            and all(r["params"].get(k) == v for k, v in side.params.items())
        ]
        if values:
            value = statistics.median(values)
            if best is None or (value < best[0] if lower_is_better else value > best[0]):
                best = (value, system)
    return best


def ratio_table(results: list[dict[str, Any]]) -> str:
    """Markdown: each target whose two sides were measured, per database."""
    lines = [
        "| DB | ratio | ours | against | ratio | target |",
        "|---|---|---|---|---|---|",
    ]
    for db in sorted({r["db"] for r in results}):
        for target in TARGETS:
            mine = median_of(results, db, target.ours, target.at_most)
            theirs = median_of(results, db, target.against, target.at_most)
            if mine is None or theirs is None or not theirs[0]:
                continue
            ratio = mine[0] / theirs[0]
            verdict = target.verdict(db, ratio)
            label = target.against.label or LABELS.get(theirs[1], theirs[1])
            lines.append(
                f"| {db} | {target.name} | {fmt(mine[0])} | {fmt(theirs[0])} ({label}) "
                f"| {ratio:.2f} | {verdict} |"
            )
    return "\n".join(lines) if len(lines) > 2 else ""
