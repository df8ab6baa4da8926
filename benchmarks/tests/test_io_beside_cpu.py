"""The io_beside_cpu scenario's own logic: each phase's command, the enqueue order of the two
kinds of jobs, the CPU-bound job's work, and the plan (ours alone)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from benchmarks import markers
from benchmarks.cli import parse_args, plan
from benchmarks.jobsapp.work import burn
from benchmarks.scenarios import SCENARIOS, variant_label
from benchmarks.scenarios.io_beside_cpu import CPU, PHASES, command, enqueue_order, ran_dry, run
from benchmarks.systems import Unsupported, system_class


def test_the_queues_get_slots_of_their_own_but_in_the_shared_phase() -> None:
    assert command("beside", 50, 1)[-6:] == [
        "runworkers",
        "-n",
        "1",
        "--burst",
        "--queues",
        "io:50,cpu:1",
    ]
    assert command("alone", 50, 1) == command("beside", 50, 1)
    assert command("shared", 50, 1)[-6:] == [
        "runworkers",
        "-n",
        "1",
        "--burst",
        "--concurrency",
        "51",
    ]
    assert PHASES[0] == "beside"  # a cold first phase counts against the ratio


def test_cpu_jobs_are_interleaved_among_the_io_jobs_with_ids_of_their_own() -> None:
    order = enqueue_order(6, 2)
    assert order == [
        (False, [0, 1]),
        (True, [CPU]),
        (False, [2, 3]),
        (True, [CPU + 1]),
        (False, [4, 5]),
    ]
    assert enqueue_order(3, 0) == [(False, [0, 1, 2])]


def test_the_cpu_queue_ran_dry_only_if_every_cpu_job_finished_before_the_io_drain() -> None:
    assert ran_dry([1.0, 2.0], cpu_jobs=2, io_end=3.0)
    assert not ran_dry([1.0, 4.0], cpu_jobs=2, io_end=3.0)
    assert not ran_dry([1.0], cpu_jobs=2, io_end=3.0)  # one still queued or running


def test_a_cpu_job_marks_itself_and_burns_its_threads_cpu_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_MARKER_DIR", str(tmp_path))
    began = time.thread_time()
    burn(CPU + 7, cpu_ms=30)
    assert time.thread_time() - began >= 0.030
    assert [i for i, _ in markers.read()] == [CPU + 7]
    markers.clear()


def test_only_io_marks_are_checked_for_exactly_once() -> None:
    marks = [(0, 1.0), (1, 1.0), (CPU, 1.0)]
    io_marks = [(i, t) for i, t in marks if i < CPU]
    assert markers.verify_exactly_once(range(2), io_marks) == ""
    assert markers.verify_exactly_once(range(3), io_marks) == "1 never ran"


def test_the_peers_have_no_queues_with_slots_of_their_own() -> None:
    cls = system_class("huey")
    with pytest.raises(Unsupported):
        run(cls.__new__(cls), SCENARIOS["io_beside_cpu"].quick[0])


def test_the_scenario_runs_ours_alone_on_every_database() -> None:
    steps = plan(parse_args(["run", "--scenarios", "io_beside_cpu", "--quick", "--no-warmup"]))
    assert {(s["db"], s["system"]) for s in steps} == {
        ("sqlite", "sqlqueue"),
        ("postgres", "sqlqueue"),
        ("mysql", "sqlqueue"),
    }
    assert {variant_label(s["params"]) for s in steps} == {
        "io_jobs=200 sleep_ms=100 cpu_jobs=10 cpu_ms=200 io_slots=50 cpu_slots=1"
    }
    full = plan(
        parse_args(["run", "--scenarios", "io_beside_cpu", "--db", "sqlite", "--no-warmup"])
    )
    assert [(s["system"], s["params"]["io_jobs"], s["params"]["cpu_jobs"]) for s in full] == [
        ("sqlqueue", 1_000, 40)
    ] * 3
