"""The mixed scenario's own logic: job order, makespan, ideal, spread over workers, the
markers per process, and the plan (every system, both of ours side by side)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import markers
from benchmarks.cli import parse_args, plan
from benchmarks.scenarios import SCENARIOS, variant_label
from benchmarks.scenarios.mixed import arrange, drain_time, ideal, makespan, runs, spread


def test_after_puts_every_slow_job_behind_the_fast_ones() -> None:
    assert arrange(4, 2, "after") == [False] * 4 + [True] * 2


@pytest.mark.parametrize(("fast", "slow"), [(3000, 40), (300, 8), (5, 5), (0, 3), (7, 0)])
def test_interleaved_spreads_the_slow_jobs_evenly(fast: int, slow: int) -> None:
    flags = arrange(fast, slow, "interleaved")
    assert (len(flags), sum(flags)) == (fast + slow, slow)
    fast_before = [flags[:position].count(False) for position, f in enumerate(flags) if f]
    gap = fast / (slow + 1)
    for k, seen in enumerate(fast_before):
        assert abs(seen - (k + 1) * gap) < 1, (k, seen)


def test_interleaved_3000_and_40_has_a_slow_job_every_73_fast_ones() -> None:
    flags = arrange(3000, 40, "interleaved")
    positions = [p for p, slow in enumerate(flags) if slow]
    assert positions[:3] == [73, 147, 221] and positions[-1] == 2926 + 39
    with pytest.raises(ValueError, match="order"):
        arrange(3, 1, "random")


def test_runs_keep_the_enqueue_order() -> None:
    flags = [False, False, True, False, True, True]
    assert list(runs(flags)) == [(False, [0, 1]), (True, [2]), (False, [3]), (True, [4, 5])]
    assert list(runs([])) == []
    flags = arrange(300, 8, "interleaved")
    assert [i for _, ids in runs(flags) for i in ids] == list(range(308))


def test_makespan_runs_to_the_end_of_the_last_slow_job() -> None:
    starts = {0: 100.0, 1: 100.1, 2: 100.2, 3: 101.0}
    assert makespan(starts, {2: 0.3}) == pytest.approx(1.0)  # the no-op job 3 ends last
    assert makespan(starts, {2: 0.9}) == pytest.approx(1.1)  # the slow job 2 ends last
    assert makespan({}, {}) != makespan({}, {})  # NaN: nothing ran


def test_the_ideal_is_the_fast_drain_plus_the_slow_work_spread_over_all_workers() -> None:
    # The case: 40 jobs of 0.3 s on 4 workers take 3 s at best, after the fast drain.
    assert ideal(0.5, 40, 300, 4) == pytest.approx(3.5)
    assert drain_time([3.0, 1.0, 2.5]) == 2.0


def test_spread_counts_every_worker_even_those_that_ran_no_slow_job() -> None:
    slow = {10, 11, 12, 13, 14}
    by_process = {101: [1, 10, 11, 12, 13], 102: [2, 14], 103: [3, 4]}
    assert spread(by_process, slow, 4) == [4, 1, 0, 0]
    assert spread({}, slow, 2) == [0, 0]


def test_marks_are_read_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_MARKER_DIR", str(tmp_path))
    monkeypatch.setattr(markers, "_fd", None)
    (tmp_path / "4242-abc.marks").write_text("1 10.5\n2 10.75\n3")  # a line cut short
    (tmp_path / "77-def.marks").write_text("4 11.0\n")
    assert markers.read_by_process() == {4242: [(1, 10.5), (2, 10.75)], 77: [(4, 11.0)]}


def test_the_mixed_scenario_runs_for_every_system_ours_side_by_side() -> None:
    steps = plan(parse_args(["run", "--scenarios", "mixed", "--quick", "--no-warmup"]))
    first_run = [s["system"] for s in steps if s["db"] == "postgres" and s["run"] == 1][:4]
    assert first_run == ["sqlqueue", "sqlqueue_batch", "tasks_db", "procrastinate"]
    assert {(s["db"], s["system"]) for s in steps} == {
        ("sqlite", "sqlqueue"),
        ("sqlite", "sqlqueue_batch"),
        ("sqlite", "tasks_db"),
        ("sqlite", "huey"),
        ("postgres", "sqlqueue"),
        ("postgres", "sqlqueue_batch"),
        ("postgres", "tasks_db"),
        ("postgres", "procrastinate"),
        ("mysql", "sqlqueue"),
        ("mysql", "sqlqueue_batch"),
        ("mysql", "tasks_db"),
    }
    labels = {variant_label(s["params"]) for s in steps}
    assert labels == {
        "fast=300 slow=8 slow_ms=300 order=after slow_task=own mode=continuous workers=4",
        "fast=300 slow=8 slow_ms=300 order=interleaved slow_task=own mode=continuous workers=4",
        "fast=300 slow=8 slow_ms=300 order=after slow_task=own mode=burst workers=4",
    }
    full = [variant_label(p) for p in SCENARIOS["mixed"].variants(quick=False)]
    assert full == [
        "fast=3000 slow=40 slow_ms=300 order=after slow_task=own mode=continuous workers=4",
        "fast=3000 slow=40 slow_ms=300 order=interleaved slow_task=own mode=continuous workers=4",
        "fast=3000 slow=40 slow_ms=300 order=after slow_task=shared mode=continuous workers=4",
        "fast=3000 slow=40 slow_ms=300 order=after slow_task=own mode=burst workers=4",
    ]
