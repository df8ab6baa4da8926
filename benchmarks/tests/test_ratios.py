"""The issue-27 ratio table (benchmarks/ratios.py) on made-up results: medians of matching
variants only, the best peer, targets per database, and ratios left out when a side is
missing."""

from __future__ import annotations

from typing import Any

from benchmarks.ratios import ratio_table


def result(db: str, scenario: str, system: str, value: float, **params: Any) -> dict[str, Any]:
    metric = params.pop("metric", "jobs_per_s")
    return {
        "db": db,
        "scenario": scenario,
        "system": system,
        "params": params,
        "status": "ok",
        "metrics": {metric: value},
    }


def rows(table: str) -> list[list[str]]:
    lines = table.splitlines()[2:]  # below the header
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_medians_of_matching_variants_against_the_best_peer() -> None:
    results = [
        *(result("sqlite", "enqueue", "sqlqueue", v, mode="single") for v in (900, 1000, 5000)),
        result("sqlite", "enqueue", "sqlqueue", 99_999, mode="bulk"),  # another variant
        result("sqlite", "enqueue", "huey", 600, mode="single"),
        result("sqlite", "enqueue", "tasks_db", 100, mode="single"),
        result("sqlite", "enqueue_floor", "raw", 2000, mode="create"),
    ]
    table = rows(ratio_table(results))
    assert table == [
        [
            "sqlite",
            "enqueue, single ÷ Django's create() of the same columns",
            "1,000",
            "2,000 (Django create())",
            "0.50",
            "≥ 0.9: NOT met",
        ],
        [
            "sqlite",
            "enqueue, single ÷ the best peer's",
            "1,000",
            "600 (Huey)",
            "1.67",
            "≥ 1.5: met",
        ],
    ]


def test_targets_per_database_and_missing_sides() -> None:
    results = [
        result("postgres", "drain", "sqlqueue", 3000, jobs=30_000, workers=4),
        result("postgres", "drain", "procrastinate", 500, jobs=30_000, workers=4),
        result("mysql", "drain", "sqlqueue", 3000, jobs=30_000, workers=4),  # no peer ran
        result(
            "postgres",
            "drain",
            "sqlqueue",
            9000,
            jobs=30_000,
            workers=1,
            metric="steady_jobs_per_s",
        ),
        result("postgres", "floor", "raw", 1000, workers=1, batch=1, jobs=10_000),
    ]
    table = rows(ratio_table(results))
    assert [(row[0], row[4], row[5]) for row in table] == [
        ("postgres", "6.00", "≥ 5: met"),
        ("postgres", "9.00", "-"),  # the floor target is SQLite's
    ]
    assert ratio_table([results[2]]) == ""


def test_start_up_is_bounded_from_above_by_the_bare_check() -> None:
    """A time: lower is better, so the target is a most, and a slower start-up misses it."""
    results = [
        *(
            result("sqlite", "startup", "sqlqueue", v, workers=1, metric="startup_s")
            for v in (1.0, 1.2, 9.0)
        ),
        result("sqlite", "startup", "sqlqueue", 0.1, workers=4, metric="startup_s"),  # not -n 1
        result("sqlite", "check_floor", "raw", 0.8, starts=5, metric="startup_s"),
        result("postgres", "startup", "sqlqueue", 2.0, workers=1, metric="startup_s"),
        result("postgres", "check_floor", "raw", 1.0, starts=5, metric="startup_s"),
    ]
    table = rows(ratio_table(results))
    assert [(row[0], row[2], row[3], row[4], row[5]) for row in table] == [
        ("postgres", "2.00", "1.00 (manage.py check)", "2.00", "≤ 1.5: NOT met"),
        ("sqlite", "1.20", "0.80 (manage.py check)", "1.50", "≤ 1.5: met"),
    ]


def test_the_drain_is_set_against_the_default_modes_own_floor() -> None:
    """Only the floor that commits each completion, as the default mode does, is the drain's:
    a floor that commits a batch's completions together is faster and says nothing of it."""
    drain = result("postgres", "drain", "sqlqueue", 2700, jobs=30_000, workers=4)
    batched = result("postgres", "floor", "raw", 9000, workers=4, batch=20, jobs=30_000)
    each = result(
        "postgres", "floor", "raw", 3000, workers=4, batch=20, jobs=30_000, commits="each"
    )
    assert rows(ratio_table([drain, batched])) == []
    assert [(row[3], row[4], row[5]) for row in rows(ratio_table([drain, batched, each]))] == [
        ("3,000 (raw driver)", "0.90", "-")
    ]
