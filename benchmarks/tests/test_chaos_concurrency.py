"""The chaos harness under `--concurrency C`: supervisors run `runworkers --concurrency C`, io
jobs join the mix, and the re-run budget allows each killed process the jobs it had in flight
(up to C, each once, each attempt spent) — on hand-made evidence, as the other checks are.

The consistent run is tests/workers/test_chaos_short.py's: worker W_B (pid PID_B) SIGKILLed at
T0 + 5 while running job 2, which ran again.
"""

from __future__ import annotations

import copy
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from benchmarks.chaos import ledger, mix
from benchmarks.chaos.checks import check_faults_happened, run_checks
from benchmarks.chaos.effects import (
    check_rerun_budget,
    in_flight_at_kills,
    kill_figures,
    rerun_check_name,
)
from benchmarks.chaos.evidence import Evidence, read_evidence, save_evidence
from benchmarks.chaos.facts import Facts
from benchmarks.chaos.fleet import Fleet
from benchmarks.chaos.harness import Harness, Options
from benchmarks.chaos.report import figures, markdown_table, print_report
from tests.workers.test_chaos_short import (
    PID_B,
    PID_C,
    T0,
    W_B,
    W_C,
    consistent_run,
    entry,
    ran,
    row,
)

LOST = "Worker was lost: process was killed by SIGKILL"


def with_jobs_in_flight(concurrency: int, extra: int = 2) -> Evidence:
    """The consistent run, with `extra` more jobs in flight in W_B when it was killed: one
    still in its handler, one whose handler had returned but whose outcome was not written yet
    (a slot waiting for the outcomes' writer). The supervisor spent their attempts (lost);
    each ran once more on W_C."""
    ev = copy.deepcopy(consistent_run())
    ev.concurrency = concurrency
    for n in range(extra):
        job_id = 40 + n
        history = [entry(1, W_B, "lost", T0 + 5.1, LOST), entry(2, W_C, "completed", T0 + 6 + n)]
        ev.jobs.append(row(job_id, "fast", "completed", history))
        ended = T0 + 4.8 if n % 2 else None
        ev.executions += [
            ran(job_id, 1, PID_B, W_B, T0 + 4.2 + n / 10, ended),
            ran(job_id, 2, PID_C, W_C, T0 + 5.9 + n, T0 + 6 + n),
        ]
        ev.units.append(
            {
                "tx": f"u{job_id}",
                "mode": "autocommit",
                "outcome": "committed",
                "started": T0,
                "ended": T0 + 0.01,
                "jobs": [
                    {"kind": "fast", "token": f"t{job_id}", "params": {}, "key": None,
                     "id": job_id, "dedup": False}
                ],
            }
        )  # fmt: skip
    return ev


def test_a_process_killed_with_three_jobs_in_flight_may_rerun_each_once() -> None:
    ev = with_jobs_in_flight(concurrency=4)
    check = check_rerun_budget(Facts(ev))
    assert check.name == rerun_check_name(4)
    assert check.passed, (check.detail, check.examples)
    assert check.detail.startswith(
        "3 re-runs after kills (3 worker, 0 supervisor) for a budget of 8 (4 for each of 2 "
        "processes: 1 worker SIGKILLs, 1 workers of 1 SIGKILLed supervisors); 0 killed "
        "processes re-ran more than 4 jobs or one twice"
    )
    assert sorted(e.job_id for e in in_flight_at_kills(Facts(ev))[PID_B]) == [2, 40, 41]
    assert kill_figures(Facts(ev)) == {
        "kills": 2,
        "processes_killed": 2,
        "jobs_in_flight_at_kills": 3,
        "most_in_flight_at_a_kill": 3,
    }
    results = {c.name: c for c in run_checks(ev, grace=2, interrupt_grace=5)}
    assert len(results) == 25
    assert all(c.passed for c in results.values()), [
        (c.name, c.examples) for c in results.values() if not c.passed
    ]


@pytest.mark.parametrize("concurrency", [1, 2])
def test_more_reruns_than_slots_break_the_budget(concurrency: int) -> None:
    ev = with_jobs_in_flight(concurrency)
    check = check_rerun_budget(Facts(ev))
    assert check.name == rerun_check_name(concurrency)
    assert not check.passed
    assert check.examples == [
        f"pid {PID_B} (worker SIGKILL) re-ran 3 jobs: 2 slow attempt 1, 40 fast attempt 1, "
        "41 fast attempt 1"
    ]


def test_the_one_slot_check_keeps_its_name_and_figures() -> None:
    check = check_rerun_budget(Facts(consistent_run()))
    assert check.name == "a killed worker re-ran at most the job it was running"
    assert check.detail.startswith(
        "1 re-runs after kills (1 worker, 0 supervisor) for a budget of 2 (1 worker SIGKILLs, "
        "1 workers of 1 SIGKILLed supervisors); 0 killed workers re-ran more than one job; "
        "other re-runs: none"
    )


def test_a_job_in_flight_at_a_kill_must_have_its_attempt_spent() -> None:
    """Job 41 ran in W_B until the kill, yet the supervisor handed it back as never started:
    its cell did not name it. Within the budget, still a broken promise."""
    ev = with_jobs_in_flight(concurrency=8)
    job = next(j for j in ev.jobs if j.id == 41)
    job.history[0].update(outcome="released", error="Worker was lost before starting it.")
    job.history[1]["attempt"] = 1
    ev.executions[-1].attempt = 1
    check = check_rerun_budget(Facts(ev))
    assert not check.passed
    assert "1 in flight at a kill but handed back unspent" in check.detail
    assert check.examples == [
        f"job 41 fast attempt 1 ran in pid {PID_B} from {T0 + 4.3:.3f}, killed at "
        f"{T0 + 5:.3f} (worker SIGKILL), yet was handed back unspent: Worker was lost before "
        "starting it."
    ]


def test_a_job_rerun_twice_for_one_kill_breaks_the_promise() -> None:
    ev = with_jobs_in_flight(concurrency=8, extra=1)
    job = next(j for j in ev.jobs if j.id == 40)
    job.history.insert(1, entry(2, W_B, "lost", T0 + 5.2, LOST))
    job.history[-1]["attempt"] = 3
    ev.executions.insert(-1, ran(40, 2, PID_B, W_B, T0 + 4.9, None))
    ev.executions[-1].attempt = 3
    check = check_rerun_budget(Facts(ev))
    assert not check.passed
    assert check.examples[0].startswith(f"pid {PID_B} (worker SIGKILL) re-ran 3 jobs: 2 slow")


def test_with_slots_the_harness_must_kill_a_process_with_several_jobs_in_flight() -> None:
    one = copy.deepcopy(consistent_run())
    one.concurrency = 4
    plan = check_faults_happened(Facts(one))
    assert not plan.passed
    assert plan.examples == ["no kill met two or more jobs in flight in one process"]
    plan = check_faults_happened(Facts(with_jobs_in_flight(concurrency=4)))
    assert plan.passed, plan.examples
    assert plan.detail.endswith(
        "3 jobs in flight in the killed processes at their kill (at most 3 in one)"
    )
    # One slot: the plan is what it always was.
    assert check_faults_happened(Facts(consistent_run())).passed


def test_figures_report_and_table_count_the_jobs_in_flight(tmp_path: Path) -> None:
    ev = with_jobs_in_flight(concurrency=4)
    numbers = figures(ev)
    assert numbers["concurrency"] == 4
    assert (numbers["kill_reruns"], numbers["rerun_budget"]) == (3, 8)
    assert (numbers["jobs_in_flight_at_kills"], numbers["most_in_flight_at_a_kill"]) == (3, 3)
    lines: list[str] = []
    print_report(ev, run_checks(ev, 2, 5), lines.append)
    assert (
        "kills: 2 (2 worker processes, concurrency 4), jobs in flight at kills: 3 (at most 3 in "
        "one process)"
    ) in lines
    checks = [{"name": c.name, "passed": c.passed} for c in run_checks(ev, 2, 5)]
    table = markdown_table([{**numbers, "checks": checks}])
    assert "| Jobs in flight at kills (most in one process) | 3 (3, --concurrency 4) |" in table
    old = {k: v for k, v in numbers.items() if k != "jobs_in_flight_at_kills"}
    assert "| Jobs in flight at kills (most in one process) | — |" in markdown_table(
        [{**old, "checks": checks}]
    )
    save_evidence(ev, tmp_path / "evidence.json")
    assert read_evidence(tmp_path / "evidence.json") == ev


def test_evidence_of_a_run_before_concurrency_reads_as_one_slot(tmp_path: Path) -> None:
    import json

    save_evidence(consistent_run(), tmp_path / "evidence.json")
    data = json.loads((tmp_path / "evidence.json").read_text())
    del data["concurrency"]
    (tmp_path / "evidence.json").write_text(json.dumps(data))
    assert read_evidence(tmp_path / "evidence.json").concurrency == 1


def test_supervisors_get_concurrency_only_when_asked(tmp_path: Path) -> None:
    one = Fleet(3, tmp_path, {}).command("--grace-period", "2")
    # Today's command line, unchanged.
    assert one[1:] == ["-m", "django", "runworkers", "-n", "3", "--grace-period", "2"]
    eight = Fleet(3, tmp_path, {}, concurrency=8).command("--grace-period", "2")
    assert eight[-7:] == ["runworkers", "-n", "3", "--concurrency", "8", "--grace-period", "2"]


def test_producers_enqueue_io_jobs_only_with_slots(tmp_path: Path) -> None:
    def command(concurrency: int) -> list[str]:
        options = Options(vendor="sqlite", seconds=10, concurrency=concurrency)
        return Harness(options, tmp_path, print).producer_command(0, T0, "r1")

    assert not [arg for arg in command(1) if arg.startswith("--io")]
    # 2 supervisors x 3 workers x 8 slots, 24 jobs/s: 40% of them waiting 2.5 s on average
    # keep half the 48 slots busy.
    assert command(8)[-4:] == ["--io-share=0.4", "--io-seconds", "1.25", "3.75"]
    assert mix.io_seconds(2 * 3 * 1000, 24) == (4.0, 12.0)  # the mean is bounded


def test_without_io_jobs_the_mix_draws_as_before() -> None:
    def before(rng: random.Random) -> str:
        kinds = [k for k in mix.KINDS.values() if k.name != "io"]
        return rng.choices(kinds, weights=[k.weight for k in kinds])[0].name

    old, new = random.Random(7), random.Random(7)
    assert [before(old) for _ in range(500)] == [mix.choose_kind(new).name for _ in range(500)]
    rng = random.Random(7)
    drawn = [mix.choose_kind(rng, mix.IO_SHARE).name for _ in range(2000)]
    assert 0.35 < drawn.count("io") / len(drawn) < 0.45
    assert mix.expected_outcome("io", 1, {"seconds": 1.0}) == mix.COMPLETED


def test_the_ledger_keeps_every_execution_of_concurrent_slots(empty_ledger: None) -> None:
    start = threading.Barrier(8)

    def slot(number: int) -> None:
        start.wait()
        for n in range(200):
            key = ledger.started(number * 1000 + n, "t", "atomic", 1, "w1")
            ledger.finished(key)

    threads = [threading.Thread(target=slot, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    executions: list[dict[str, Any]] = ledger.read()
    assert len(executions) == 1600
    assert len({e["job_id"] for e in executions}) == 1600
    assert all(e["finished"] is not None for e in executions)
    ledger.clear()


def test_the_command_line_takes_a_concurrency() -> None:
    from benchmarks.chaos.cli import parse_args

    assert parse_args([]).concurrency == 1
    assert parse_args(["--db", "postgres", "--concurrency", "8"]).concurrency == 8
    assert parse_args(["-c", "4"]).concurrency == 4
    assert parse_args(["--misbehave", "-c", "4"]).concurrency == 4  # its checks allow slots
    with pytest.raises(SystemExit):
        parse_args(["-c", "0"])
