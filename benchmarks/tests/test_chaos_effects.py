"""The chaos harness's re-run budget and atomic-jobs checks, and the pieces around them (the
atomic jobs' execution ledger, aimed kills, bursts, log counts), on hand-made evidence: each
check passes on a consistent run and fails when its promise is broken.

The consistent run is the one tests/workers/test_chaos_short.py builds for the other checks:
a worker SIGKILLed while running job 2 (which ran again), a supervisor SIGKILLed.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.chaos import aim, ledger
from benchmarks.chaos.checks import run_checks
from benchmarks.chaos.effects import (
    HANDED_BACK,
    LEASE_LOST,
    check_atomic_counter,
    check_rerun_budget,
    reruns,
)
from benchmarks.chaos.evidence import Evidence, count_log_patterns
from benchmarks.chaos.facts import Facts
from benchmarks.chaos.report import figures, markdown_table
from tests.workers.test_chaos_short import (
    PID_A,
    PID_B,
    PID_C,
    T0,
    W_A,
    W_B,
    W_C,
    consistent_run,
    entry,
    ran,
    row,
)

ROOT = Path(__file__).resolve().parents[2]
W_D, PID_D = "host:100:ddd", 103
BUDGET = "a killed worker re-ran at most the job it was running"
ATOMIC = "atomic jobs changed the database exactly once"
HISTORY = "recorded outcomes match the handlers (at most one completion, always last)"
PLAN = "the harness did what it planned"


def verdicts(evidence: Evidence) -> dict[str, Any]:
    return {check.name: check for check in run_checks(evidence, grace=2, interrupt_grace=5)}


def with_atomic_jobs(counter: int | None = 2) -> Evidence:
    """The consistent run plus two atomic jobs: job 10 completed at once; job 11's first
    attempt was running on W_A when supervisor A was SIGKILLed (T0 + 8), inside its
    transaction, and came back when its lease expired; the second attempt completed. Each
    completion added one: the counter is 2."""
    ev = copy.deepcopy(consistent_run())
    ev.jobs += [
        row(10, "atomic", "completed", [entry(1, W_C, "completed", T0 + 2)], hold=0.05),
        row(
            11,
            "atomic",
            "completed",
            [entry(1, W_A, "lost", T0 + 12), entry(2, W_C, "completed", T0 + 13)],
            hold=0.05,
        ),
    ]
    ev.executions += [
        ran(10, 1, PID_C, W_C, T0 + 1.9, T0 + 2),
        ran(11, 1, PID_A, W_A, T0 + 7.95, None),
        ran(11, 2, PID_C, W_C, T0 + 12.9, T0 + 13),
    ]
    for execution in ev.executions[-3:]:
        execution.kind = "atomic"
    ev.units.append(
        {
            "tx": "u10",
            "mode": "commit",
            "outcome": "committed",
            "started": T0,
            "ended": T0 + 0.01,
            "jobs": [
                {"kind": "atomic", "token": f"t{n}", "params": {"hold": 0.05}, "key": None,
                 "id": n, "dedup": False}
                for n in (10, 11)
            ],
        }
    )  # fmt: skip
    ev.orders.add("u10")
    ev.counter = counter
    return ev


def test_the_consistent_run_stays_within_its_budget() -> None:
    results = verdicts(consistent_run())
    assert results[BUDGET].passed, results[BUDGET].detail
    assert results[BUDGET].detail.startswith(
        "1 re-runs after kills (1 worker, 0 supervisor) for a budget of 2 (1 worker SIGKILLs, "
        "1 workers of 1 SIGKILLed supervisors)"
    )
    assert results[ATOMIC].passed  # no atomic jobs, no counter: nothing to compare


def test_a_killed_worker_that_reran_two_jobs_breaks_the_budget() -> None:
    """What batched recording does: job 30 had finished on W_B, unrecorded, when W_B was
    killed running job 2; the supervisor handed job 30 back and it ran again."""
    ev = copy.deepcopy(consistent_run())
    ev.jobs.append(
        row(
            30,
            "fast",
            "completed",
            [
                entry(1, W_B, "released", T0 + 5.1, "before starting it"),
                entry(1, W_C, "completed", T0 + 6),
            ],
        )
    )
    ev.executions += [
        ran(30, 1, PID_B, W_B, T0 + 3.5, T0 + 3.6),
        ran(30, 1, PID_C, W_C, T0 + 5.9, T0 + 6),
    ]
    check = check_rerun_budget(Facts(ev))
    assert not check.passed
    assert check.detail.startswith("2 re-runs after kills (2 worker, 0 supervisor)")
    assert "1 in flight at a kill but handed back unspent" in check.detail
    assert check.examples == [
        f"pid {PID_B} (worker SIGKILL) re-ran 2 jobs: 2 slow attempt 1, 30 fast attempt 1",
        f"job 30 fast attempt 1 ran in pid {PID_B} from {T0 + 3.5:.3f}, killed at "
        f"{T0 + 5:.3f} (worker SIGKILL), yet was handed back unspent: before starting it",
    ]


def test_a_supervisor_kill_may_rerun_one_job_per_worker() -> None:
    ev = with_atomic_jobs()
    ev.events[3]["pids"].append(PID_D)  # supervisor A had a second worker, also running a job
    history = [entry(1, W_D, "lost", T0 + 12), entry(2, W_C, "completed", T0 + 13)]
    ev.jobs.append(row(31, "fast", "completed", history))
    ev.executions += [
        ran(31, 1, PID_D, W_D, T0 + 7.9, None),
        ran(31, 2, PID_C, W_C, T0 + 12.9, T0 + 13),
    ]
    check = check_rerun_budget(Facts(ev))
    assert check.passed, check.examples
    assert check.detail.startswith(
        "3 re-runs after kills (1 worker, 2 supervisor) for a budget of 3 (1 worker SIGKILLs, "
        "2 workers of 1 SIGKILLed supervisors)"
    )


def test_reruns_a_kill_does_not_owe() -> None:
    """A job recovered from a live worker before the kill (its lease had lapsed), a job
    handed back at shutdown, and a recorded failure before a retry are not the kill's."""
    ev = copy.deepcopy(consistent_run())
    job = next(j for j in ev.jobs if j.id == 1)
    job.history.insert(0, entry(1, W_B, "lost", T0 + 2.0, "lease expired"))
    ev.executions.insert(0, ran(1, 1, PID_B, W_B, T0 + 0.5, None))
    flaky = next(j for j in ev.jobs if j.id == 3)
    flaky.history.insert(1, entry(2, W_D, "released", T0 + 2.5, "shutting down"))
    ev.executions.append(ran(3, 2, PID_D, W_D, T0 + 2.4, None))
    found = reruns(Facts(ev))
    assert sorted(r.cause for r in found) == [HANDED_BACK, LEASE_LOST, "worker SIGKILL"]
    check = check_rerun_budget(Facts(ev))
    assert check.passed and "other re-runs: 1 lease lost, 1 handed back" in check.detail
    # Flaky job 3's failed first attempt was recorded: not a re-run at all.
    assert not [r for r in found if r.execution.attempt == 1 and r.job.id == 3]


def test_an_execution_started_after_the_kill_is_another_process() -> None:
    ev = copy.deepcopy(consistent_run())
    ev.events[2]["t"] = T0 + 2.5  # job 2 started at T0 + 4 in a new process with that pid
    assert [r.cause for r in reruns(Facts(ev))] == [LEASE_LOST]


def test_the_atomic_counter_must_equal_the_completed_atomic_jobs() -> None:
    results = verdicts(with_atomic_jobs())
    assert results[ATOMIC].passed, results[ATOMIC].detail
    assert results[ATOMIC].detail == (
        "counter 2, 2 atomic jobs completed (of 2, in 3 executions, 1 of them SIGKILLed "
        "inside their transaction)"
    )
    assert results[BUDGET].passed, results[BUDGET].detail  # A's kill re-ran job 11 only
    for wrong in (3, 1, None):  # the killed attempt's increment survived; one lost; no row
        check = check_atomic_counter(Facts(with_atomic_jobs(counter=wrong)))
        assert not check.passed, wrong


def test_a_run_without_a_kill_inside_an_atomic_job_proves_nothing_about_them() -> None:
    ev = with_atomic_jobs()
    assert verdicts(ev)[PLAN].passed
    ev.executions = [e for e in ev.executions if not (e.job_id == 11 and e.attempt == 1)]
    plan = verdicts(ev)[PLAN]
    assert not plan.passed and plan.examples == ["no worker was killed inside an atomic job"]


def fault(start: float) -> dict[str, Any]:
    return {
        "type": "db_fault",
        "t": start,
        "mode": "cut",
        "start": start,
        "end": start + 1,
        "cut": 4,
    }


def broken_transaction(ev: Evidence, at: float, error: str) -> None:
    """Job 10's first attempt failed with `error` at `at`; the second completed."""
    failed = entry(1, W_C, "error", at, error)
    ev.jobs[-2].history = [failed, entry(2, W_C, "completed", at + 1)]
    ev.executions.insert(-2, ran(10, 2, PID_C, W_C, at + 0.9, at + 1))
    ev.executions[-3].kind = "atomic"


def test_an_atomic_transaction_broken_by_the_database_fault_is_expected() -> None:
    ev = with_atomic_jobs()
    ev.events.append(fault(T0 + 3))
    cut = "OperationalError: consuming input failed: server closed the connection unexpectedly"
    broken_transaction(ev, T0 + 3.5, cut)
    assert verdicts(ev)[HISTORY].passed, verdicts(ev)[HISTORY].examples
    assert "1 atomic attempts failed by a database fault" in verdicts(ev)[HISTORY].detail
    # The same error long after the fault, or another error during it, is a wrong outcome.
    late = with_atomic_jobs()
    late.events.append(fault(T0 - 30))
    broken_transaction(late, T0 + 3.5, cut)
    assert not verdicts(late)[HISTORY].passed
    other = with_atomic_jobs()
    other.events = ev.events
    broken_transaction(other, T0 + 3.5, "ValueError: a bug")
    assert not verdicts(other)[HISTORY].passed


def test_figures_and_table_show_the_budget_and_the_counter() -> None:
    numbers = figures(with_atomic_jobs())
    assert (numbers["kill_reruns"], numbers["rerun_budget"]) == (2, 2)
    assert (numbers["atomic_completed"], numbers["atomic_counter"]) == (2, 2)
    checks = [{"name": c.name, "passed": c.passed} for c in run_checks(with_atomic_jobs(), 2, 5)]
    table = markdown_table([{**numbers, "checks": checks}])
    assert "| Re-runs after kills (budget) | 2 (2) |" in table
    assert "| Atomic jobs completed / counter | 2 / 2 |" in table
    assert "| Checks passed | 25 of 25 |" in table
    old = {k: v for k, v in numbers.items() if not k.startswith(("kill_", "rerun", "atomic"))}
    assert "| Re-runs after kills (budget) | — |" in markdown_table([{**old, "checks": checks}])


def test_bursts_are_single_units_outside_business_transactions() -> None:
    ev = copy.deepcopy(consistent_run())
    ev.jobs.append(row(20, "fast", "completed", [entry(1, W_C, "completed", T0 + 3)]))
    ev.executions.append(ran(20, 1, PID_C, W_C, T0 + 2.9, T0 + 3))
    item = {"kind": "fast", "token": "t20", "params": {}, "key": None, "id": 20}
    burst = {"tx": "u20", "mode": "burst", "outcome": "error", "error": "OperationalError",
             "started": T0, "ended": T0 + 0.1, "jobs": [item]}  # fmt: skip
    ev.units.append(burst)  # its commit's reply was lost, yet the job is there: committed
    failed = {name for name, check in verdicts(ev).items() if not check.passed}
    assert failed == {"no database-is-locked or deadlock error surfaced to a producer"}
    assert figures(ev)["bursts"] == 1 and figures(ev)["transactions"] == 3


def test_kills_are_aimed_at_a_quarter_atomic_a_quarter_batches() -> None:
    assert [aim.choose(d) for d in (0.0, 0.24, 0.25, 0.49, 0.5, 0.99)] == [
        "atomic",
        "atomic",
        "batch",
        "batch",
        None,
        None,
    ]
    assert aim.wait_for(lambda: {7}, seconds=0) == {7}
    assert aim.wait_for(set, seconds=0.05) == set()


def test_kills_aim_at_a_target_no_kill_has_met_yet(empty_ledger: None) -> None:
    """A run's checks ask for one kill inside an atomic job: kills aim there until one lands."""
    assert [aim.choose(d, "atomic") for d in (0.0, 0.3, 0.99)] == ["atomic"] * 3
    ledger.started(6, "t6", "atomic", 1, "w1")  # this process "killed" inside its job
    assert not aim.atomic_kill_landed({os.getpid() + 1})
    assert aim.atomic_kill_landed({os.getpid(), os.getpid() + 1})


def test_the_ledger_keeps_executions_a_kill_cut_short(empty_ledger: None) -> None:
    first = ledger.started(5, "t5", "atomic", 1, "w1")
    ledger.started(6, "t6", "atomic", 1, "w1")  # its process is killed: no end
    ledger.finished(first)
    with (ledger.ledger_dir() / f"{os.getpid()}.jsonl").open("a") as file:
        file.write('{"key": [1, 2], "job_id"')  # a line cut short
    done, killed = ledger.read()
    assert (done["job_id"], killed["job_id"]) == (5, 6)
    assert done["finished"] >= done["started"] and killed["finished"] is None
    assert ledger.running_pids() == {os.getpid()}
    ledger.clear()
    assert ledger.read() == []


def test_chained_tracebacks_of_a_logged_failure_are_expected(tmp_path: Path) -> None:
    log = tmp_path / "supervisor.log"
    log.write_text(
        "WARNING Job 1 chaos.atomic attempt 1/4 traceback:\n"
        "Traceback (most recent call last):\n  ...\npsycopg.OperationalError: cut\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n  ...\ndjango.db.utils.OperationalError: cut\n"
        "ERROR something else\nTraceback (most recent call last):\n  ...\nKeyError: 1\n"
    )
    assert count_log_patterns([log])["unexpected tracebacks"] == 1


def test_the_chaos_apps_migration_matches_its_models(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "benchmarks.chaos.settings",
        "CHAOS_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "django", "makemigrations", "chaos", "--check", "--dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
