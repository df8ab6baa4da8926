"""The I/O-bound scenario's own logic: jobs in flight, each system's layout and commands (the
other scenarios' commands unchanged), and the plan (ours-only variants run ours alone)."""

from __future__ import annotations

import pytest

from benchmarks.cli import parse_args, plan
from benchmarks.markers import most_within
from benchmarks.scenarios import variant_label
from benchmarks.scenarios.io import layout
from benchmarks.systems import Unsupported, system_class


def test_jobs_in_flight_count_a_job_until_its_sleep_is_over() -> None:
    assert most_within([0.0, 0.05, 0.1, 0.12, 0.3], 0.1) == 3  # 0.05, 0.1, 0.12
    assert most_within([1.0, 1.0, 1.0], 0.1) == 3
    assert most_within([], 0.1) == 0


def test_each_system_runs_the_jobs_in_flight_its_own_way() -> None:
    assert layout("sqlqueue", 100, ours_workers=2) == (2, 50)
    assert layout("sqlqueue", 4, ours_workers=4) == (4, 1)
    assert layout("huey", 100, ours_workers=2) == (1, 100)
    assert layout("procrastinate", 100, ours_workers=2) == (1, 100)


def commands(name: str, n: int, burst: bool, concurrency: int | None = None) -> list[list[str]]:
    cls = system_class(name)
    system = cls.__new__(cls)  # no database, no peer imported
    if concurrency is None:  # as every other scenario calls it
        return system.worker_commands(n, burst)
    return system.worker_commands(n, burst, concurrency)


def test_concurrency_reaches_each_systems_command_line_and_one_changes_nothing() -> None:
    assert commands("sqlqueue", 2, True, 50)[0][-6:] == [
        "runworkers",
        "-n",
        "2",
        "--burst",
        "--concurrency",
        "50",
    ]
    assert commands("sqlqueue", 4, True)[0][-4:] == ["runworkers", "-n", "4", "--burst"]
    assert commands("huey", 1, True, 100)[0][-4:] == ["-w", "100", "-k", "thread"]
    assert commands("huey", 4, True)[0][-4:] == ["-w", "4", "-k", "process"]
    assert commands("procrastinate", 1, True, 100) == [
        [*commands("procrastinate", 1, True)[0], "--concurrency", "100"]
    ]
    for name in ("sqlqueue", "huey", "procrastinate", "tasks_db"):
        assert commands(name, 3, False, 1) == commands(name, 3, False)
    with pytest.raises(Unsupported):
        commands("tasks_db", 1, True, 100)


def test_the_io_scenario_runs_the_peers_beside_ours_and_our_own_modes_alone() -> None:
    steps = plan(parse_args(["run", "--scenarios", "io", "--quick", "--no-warmup"]))
    by_variant: dict[str, set[tuple[str, str]]] = {}
    for step in steps:
        by_variant.setdefault(variant_label(step["params"]), set()).add(
            (step["db"], step["system"])
        )
    ours = {("sqlite", "sqlqueue"), ("postgres", "sqlqueue"), ("mysql", "sqlqueue")}
    assert by_variant == {
        "jobs=200 sleep_ms=100 in_flight=100 ours_workers=2": ours
        | {
            ("sqlite", "tasks_db"),
            ("sqlite", "huey"),
            ("postgres", "tasks_db"),
            ("postgres", "procrastinate"),
            ("mysql", "tasks_db"),
        },
        "jobs=200 sleep_ms=100 in_flight=4 ours_workers=4": ours,
        "jobs=200 sleep_ms=100 in_flight=100 ours_workers=2 handler=async": ours,
    }
    full = plan(parse_args(["run", "--scenarios", "io", "--db", "sqlite", "--no-warmup"]))
    assert {s["params"]["jobs"] for s in full} == {2000} and len(full) == 3 * (3 + 1 + 1)
