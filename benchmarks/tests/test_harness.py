"""The harness's own logic: planning, exactly-once checks, statistics, SQL series.

Run with: .venv/bin/pytest benchmarks/tests
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchmarks import markers
from benchmarks.cli import parse_args, plan
from benchmarks.report import pivot, summary, table
from benchmarks.scenarios import variant_label
from benchmarks.scenarios.latency import percentile
from benchmarks.scenarios.mix import sleep_ms
from benchmarks.scenarios.startup import first_start, summarise
from benchmarks.systems.seeding import _series


def test_runs_are_interleaved_and_rotated() -> None:
    steps = plan(
        parse_args(
            ["run", "--db", "sqlite", "--scenarios", "latency", "--runs", "3", "--no-warmup"]
        )
    )
    order = [(s["run"], s["system"]) for s in steps]
    assert order == [
        (1, "sqlqueue"),
        (1, "tasks_db"),
        (1, "huey"),
        (2, "tasks_db"),
        (2, "huey"),
        (2, "sqlqueue"),
        (3, "huey"),
        (3, "sqlqueue"),
        (3, "tasks_db"),
    ]


def test_peers_only_run_where_they_exist() -> None:
    steps = plan(parse_args(["run", "--scenarios", "latency", "--runs", "1", "--no-warmup"]))
    by_db = {
        db: {s["system"] for s in steps if s["db"] == db} for db in ("sqlite", "postgres", "mysql")
    }
    assert by_db == {
        "sqlite": {"sqlqueue", "tasks_db", "huey"},
        "postgres": {"sqlqueue", "tasks_db", "procrastinate"},
        "mysql": {"sqlqueue", "tasks_db"},
    }


def test_warmups_come_first_per_database() -> None:
    steps = plan(parse_args(["run", "--db", "postgres", "--scenarios", "floor", "--quick"]))
    assert [s["system"] for s in steps if s["warmup"]] == ["sqlqueue", "tasks_db", "procrastinate"]
    assert all(s["warmup"] for s in steps[:3]) and not any(s["warmup"] for s in steps[3:])
    assert {s["system"] for s in steps[3:]} == {"raw"}


def test_variant_filter_is_a_regex() -> None:
    steps = plan(
        parse_args(
            [
                "run",
                "--db",
                "sqlite",
                "--scenarios",
                "drain",
                "--runs",
                "1",
                "--no-warmup",
                "--variants",
                "jobs=3000( |$)",
            ]
        )
    )
    assert {s["params"]["jobs"] for s in steps} == {3000}


@pytest.fixture
def marker_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BENCH_MARKER_DIR", str(tmp_path))
    monkeypatch.setattr(markers, "_fd", None)
    return tmp_path


def test_exactly_once_catches_missing_repeated_and_unknown(marker_dir: Path) -> None:
    for job_id in (0, 1, 1, 7):
        markers.mark(job_id)
    assert markers.count() == 4
    assert markers.verify_exactly_once(range(3)) == (
        "1 never ran, 1 ran more than once, 1 unexpected"
    )
    markers.clear()
    for job_id in range(3):
        markers.mark(job_id)
    assert markers.verify_exactly_once(range(3)) == ""


def test_summary_is_median_with_range() -> None:
    assert summary([3.0, 1.0, 2.0]) == "2.00 (1.00-3.00)"
    assert summary([1500.0, 900.0, 1200.0]) == "1,200 (900-1,500)"
    assert summary([]) == "-"


def test_pivot_leaves_failed_runs_out_of_the_median() -> None:
    base = {
        "db": "sqlite",
        "scenario": "enqueue",
        "params": {"mode": "single", "jobs": 3},
        "system": "sqlqueue",
        "problems": "",
        "loadavg_before": [0.1, 0, 0],
    }
    results = [
        {**base, "status": "ok", "metrics": {"jobs_per_s": 10.0}},
        {**base, "status": "ok", "metrics": {"jobs_per_s": 30.0}},
        {**base, "status": "error", "metrics": {"jobs_per_s": 1000.0}},
    ]
    assert "| 20.0 (10.0-30.0) |" in pivot(results)


def test_both_of_our_modes_stand_side_by_side_in_the_tables() -> None:
    def result(system: str, rate: float) -> dict:
        return {
            "db": "postgres",
            "scenario": "drain",
            "params": {"jobs": 3000, "workers": 4},
            "system": system,
            "status": "ok",
            "problems": "",
            "metrics": {"jobs_per_s": rate},
            "loadavg_before": [0.1, 0, 0],
        }

    results = [
        result("tasks_db", 150.0),
        result("sqlqueue_batch", 5000.0),
        result("sqlqueue", 4000.0),
    ]
    header, _, row = pivot(results).splitlines()
    assert header == (
        "| DB | scenario | variant | django-sqlqueue | django-sqlqueue, batch completion "
        "| django-tasks-db |"
    )
    assert row == "| postgres | drain | jobs=3000 workers=4 | 4,000 | 5,000 | 150 |"
    systems = [line.split(" | ")[3] for line in table(results).splitlines()[2:]]
    assert systems == ["django-sqlqueue", "django-sqlqueue, batch completion", "django-tasks-db"]


def test_percentile_and_mix_sleeps() -> None:
    assert percentile(list(range(101)), 0.95) == 95
    sleeps = [sleep_ms(i) for i in range(1000)]
    assert min(sleeps) == 10 and max(sleeps) == 50


@pytest.mark.parametrize("count", [1, 7, 1234])
def test_sqlite_series_yields_exactly_count_rows(count: int) -> None:
    conn = sqlite3.connect(":memory:")
    assert conn.execute(f"SELECT count(*) FROM {_series('sqlite', count)}").fetchone()[0] == count


def test_startup_is_measured_to_the_first_marker() -> None:
    marks = [(3, 105.75), (1, 100.25), (2, 101.0)]
    assert first_start(marks, since=100.0) == 0.25
    assert first_start([], since=100.0) != first_start([], since=100.0)  # NaN: nothing ran


def test_startup_summary_leaves_starts_that_ran_nothing_out() -> None:
    nan = float("nan")
    assert summarise([0.4, nan, 0.2, 0.3]) == {
        "startup_s": 0.3,
        "startup_min_s": 0.2,
        "startup_max_s": 0.4,
    }
    assert all(value != value for value in summarise([nan]).values())


def test_startup_runs_every_system_where_it_exists() -> None:
    steps = plan(parse_args(["run", "--scenarios", "startup", "--quick", "--no-warmup"]))
    assert {(s["db"], s["system"]) for s in steps} == {
        ("sqlite", "sqlqueue"),
        ("sqlite", "tasks_db"),
        ("sqlite", "huey"),
        ("postgres", "sqlqueue"),
        ("postgres", "tasks_db"),
        ("postgres", "procrastinate"),
        ("mysql", "sqlqueue"),
        ("mysql", "tasks_db"),
    }
    assert {variant_label(s["params"]) for s in steps} == {"workers=1 starts=2"}
    full = plan(parse_args(["run", "--db", "sqlite", "--scenarios", "startup", "--no-warmup"]))
    assert sorted({s["params"]["workers"] for s in full}) == [1, 4]


def test_ours_with_batch_completion_runs_only_where_a_scenario_asks() -> None:
    steps = plan(
        parse_args(
            ["run", "--db", "sqlite", "--scenarios", "drain,latency", "--quick", "--runs", "1"]
        )
    )
    drain = [s["system"] for s in steps if s["scenario"] == "drain" and not s["warmup"]]
    latency = {s["system"] for s in steps if s["scenario"] == "latency"}
    assert drain[:2] == ["sqlqueue", "sqlqueue_batch"]
    assert "sqlqueue_batch" not in latency
    assert "sqlqueue_batch" not in {s["system"] for s in steps if s["warmup"]}
