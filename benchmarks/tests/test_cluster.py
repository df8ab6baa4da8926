"""The cluster harness's own logic: fault planning, attribution of double executions, cut
recovery, fencing, and the JSON summary. No root, no database: made-up evidence.

The real run (namespaces, a private PostgreSQL, a cut) is test_cluster_run.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.chaos.checks import Facts
from benchmarks.chaos.evidence import Evidence, ExecutionRow
from benchmarks.cluster import net, plan
from benchmarks.cluster.checks import (
    CUT,
    KILL,
    RESTART,
    attribute,
    check_cut_recovery,
    check_fencing,
    check_plan,
    cuts_of,
    late_starts,
    numbers,
)
from benchmarks.cluster.summary import run_summary, step_summary
from tests.workers.test_chaos_short import entry, row

T0 = 1_800_000_000.0
LEASE = 4.0
CUT_HOST = "sq1-h2"
ZOMBIE, OTHER, VICTIM = f"{CUT_HOST}:50:zzz", "sq1-h1:60:aaa", "sq1-h1:70:kkk"


def test_hosts_are_counts_run_in_turn() -> None:
    assert plan.parse_hosts("1,2,4") == [1, 2, 4]
    assert plan.parse_hosts("3") == [3]
    for bad in ("0", "1,,2", "two", str(plan.MAX_HOSTS + 1)):
        with pytest.raises(ValueError):
            plan.parse_hosts(bad)


def test_a_cut_outlasts_the_lease_and_the_restart_comes_after_it() -> None:
    faults = plan.plan_faults(60, 3, partition=True, restart_db=True, lease=LEASE)
    assert [(f.kind, f.at, f.seconds) for f in faults] == [
        ("cut", 15.0, 3 * LEASE),
        ("restart-db", 42.0, 0.0),
    ]
    long_cut = plan.plan_faults(
        100, 2, partition=True, restart_db=True, lease=LEASE, cut_seconds=60
    )
    assert long_cut[1].at == 25 + 60 + 2  # after the cut healed, not at 70 %
    # Longer runs repeat the faults once per cycle of about two minutes.
    five_minutes = plan.plan_faults(300, 2, partition=True, restart_db=True, lease=LEASE)
    assert [(f.kind, f.at) for f in five_minutes] == [
        ("cut", 37.5),
        ("restart-db", 105.0),
        ("cut", 187.5),
        ("restart-db", 255.0),
    ]
    with pytest.raises(ValueError, match="outlast the lease"):
        plan.cut_length(LEASE, LEASE)


def test_one_host_has_nobody_to_recover_its_jobs_so_no_cut() -> None:
    assert plan.plan_faults(60, 1, partition=True, restart_db=False, lease=LEASE) == []


def test_a_run_too_short_for_its_faults_says_how_long_it_must_be() -> None:
    with pytest.raises(ValueError, match=r"at least --seconds (\d+)") as error:
        plan.plan_faults(20, 2, partition=True, restart_db=True, lease=LEASE)
    shortest = int(str(error.value).rsplit(" ", 1)[1])
    plan.plan_faults(shortest, 2, partition=True, restart_db=True, lease=LEASE)
    with pytest.raises(ValueError):
        plan.plan_faults(shortest - 1, 2, partition=True, restart_db=True, lease=LEASE)


def test_the_busiest_host_is_cut() -> None:
    assert plan.pick_cut_host({1: 1, 2: 3, 3: 0}, 3) == 2
    assert plan.pick_cut_host({}, 3) == 3  # nobody busy: the last, never host 1
    assert plan.pick_cut_host({1: 2, 2: 2}, 2) == 2


def test_only_namespaces_of_dead_runs_are_stale() -> None:
    names = ["sq10db", "sq10h1", "sq20app", "other", "sq30probe", "sqxdb"]
    assert net.stale_namespaces(names, alive=lambda pid: pid == 20) == ["sq10db", "sq10h1"]


def lost(attempt: int, worker: str, at: float) -> dict[str, Any]:
    return entry(attempt, worker, "lost", T0 + at)


def done(attempt: int, at: float) -> dict[str, Any]:
    return entry(attempt, OTHER, "completed", T0 + at)


def partitioned_run() -> Evidence:
    """Host 2 cut off from T0+10 to T0+22 while running job 1: the zombie finished it after
    the recovery and was fenced; job 2's worker was SIGKILLed; job 3 ran across a database
    restart and was recovered; job 4 is quiet."""
    jobs = [
        row(1, "slow", "completed", [lost(1, ZOMBIE, 15), done(2, 16)]),
        row(2, "fast", "completed", [lost(1, VICTIM, 31), done(2, 32)]),
        row(3, "slow", "completed", [lost(1, OTHER, 44), done(2, 45)]),
        row(4, "fast", "completed", [done(1, 5)]),
    ]
    executions = [
        ExecutionRow(1, "t1", "slow", 1, 50, ZOMBIE, T0 + 9.5, T0 + 11),
        ExecutionRow(1, "t1", "slow", 2, 60, OTHER, T0 + 15.5, T0 + 16),
        ExecutionRow(2, "t2", "fast", 1, 70, VICTIM, T0 + 30, None),
        ExecutionRow(2, "t2", "fast", 2, 60, OTHER, T0 + 31.5, T0 + 32),
        ExecutionRow(3, "t3", "slow", 1, 60, OTHER, T0 + 39.5, None),
        ExecutionRow(3, "t3", "slow", 2, 60, OTHER, T0 + 44.5, T0 + 45),
        ExecutionRow(4, "t4", "fast", 1, 60, OTHER, T0 + 4.9, T0 + 5),
    ]
    units = [
        {"tx": f"u{j}", "mode": "autocommit", "outcome": "committed", "started": T0, "ended": T0,
         "jobs": [{"kind": "fast", "token": f"t{j}", "id": j, "dedup": False}]}
        for j in (1, 2, 3, 4)
    ]  # fmt: skip
    events: list[dict[str, Any]] = [
        {"type": "cut", "t": T0 + 10, "host": 2, "hostname": CUT_HOST, "start": T0 + 10,
         "end": T0 + 22, "held": [1], "fenced": 1},
        {"type": "kill_worker", "t": T0 + 30.5, "pids": [70], "worker_ids": [VICTIM],
         "supervisor": "h1.1", "busy": True},
        {"type": "db_fault", "t": T0 + 40, "mode": "restart", "start": T0 + 40, "end": T0 + 41,
         "cut": -1},
    ]  # fmt: skip
    return Evidence("postgres", 60, LEASE, jobs, executions, set(), units, events)


def test_every_unrecorded_execution_is_attributed_to_its_fault() -> None:
    evidence = partitioned_run()
    reasons, unattributed = attribute(Facts(evidence), cuts_of(evidence))
    assert dict(reasons) == {CUT: 1, KILL: 1, RESTART: 1}
    assert unattributed == []


def test_a_double_execution_without_a_fault_is_unattributed() -> None:
    evidence = partitioned_run()
    evidence.events = [e for e in evidence.events if e["type"] != "db_fault"]
    reasons, unattributed = attribute(Facts(evidence), cuts_of(evidence))
    assert dict(reasons) == {CUT: 1, KILL: 1}
    assert len(unattributed) == 1 and unattributed[0].startswith("job 3 slow attempt 1")
    # An execution the queue never heard of at all (no history entry) is unattributed too.
    evidence = partitioned_run()
    evidence.executions.append(ExecutionRow(4, "t4", "fast", 2, 60, OTHER, T0 + 50, T0 + 51))
    assert len(attribute(Facts(evidence), cuts_of(evidence))[1]) == 1


def test_the_cut_hosts_jobs_must_be_recovered_within_the_lease_bound() -> None:
    evidence = partitioned_run()
    assert check_cut_recovery(Facts(evidence), cuts_of(evidence)).passed
    assert numbers(evidence)["cut_recovery_seconds"] == [5.0]
    late = partitioned_run()
    late.jobs[0].history[0] = entry(1, ZOMBIE, "lost", T0 + 21)
    assert not check_cut_recovery(Facts(late), cuts_of(late)).passed
    never = partitioned_run()
    never.jobs[0].history = [entry(1, OTHER, "completed", T0 + 30)]
    assert not check_cut_recovery(Facts(never), cuts_of(never)).passed
    # Completed by the cut host just as the cut began: it was not really held.
    raced = partitioned_run()
    raced.jobs[0].history = [entry(1, ZOMBIE, "completed", T0 + 10.2)]
    assert check_cut_recovery(Facts(raced), cuts_of(raced)).passed
    # Given back unstarted just before the cut (no entry of its own), run at once elsewhere.
    given_back = partitioned_run()
    given_back.jobs[0].history = [entry(1, OTHER, "completed", T0 + 10.2)]
    assert check_cut_recovery(Facts(given_back), cuts_of(given_back)).passed
    assert numbers(given_back)["cut_recovery_seconds"] == [0.1]  # its start, 0.1 s in
    # ... but taken elsewhere only after the lease bound: late, as a slow recovery is.
    given_back.jobs[0].history = [entry(1, OTHER, "completed", T0 + 30)]
    assert not check_cut_recovery(Facts(given_back), cuts_of(given_back)).passed
    # A cut host that ran it again after the read, without a recovery, is not excused.
    rerun = partitioned_run()
    rerun.jobs[0].history = [entry(1, ZOMBIE, "error", T0 + 12), done(2, 13)]
    assert not check_cut_recovery(Facts(rerun), cuts_of(rerun)).passed


def test_a_zombie_outcome_recorded_after_its_recovery_breaks_fencing() -> None:
    evidence = partitioned_run()
    fencing = check_fencing(Facts(evidence), cuts_of(evidence))
    assert fencing.passed and fencing.detail.startswith("1 attempts recovered")
    # A batch's next job started by the zombie once the link is back: counted, still allowed.
    evidence.jobs.append(row(5, "fast", "completed", [lost(1, ZOMBIE, 15), done(2, 16)]))
    evidence.executions += [
        ExecutionRow(5, "t5", "fast", 2, 60, OTHER, T0 + 15.5, T0 + 15.6),
        ExecutionRow(5, "t5", "fast", 1, 50, ZOMBIE, T0 + 23, T0 + 23.1),
    ]
    assert late_starts(Facts(evidence), cuts_of(evidence)) == [
        f"job 5 attempt 1 started by {ZOMBIE} 8.0 s after it was recovered"
    ]
    assert check_fencing(Facts(evidence), cuts_of(evidence)).passed
    evidence.jobs[0].history.insert(1, entry(1, ZOMBIE, "completed", T0 + 23))
    assert not check_fencing(Facts(evidence), cuts_of(evidence)).passed


def test_a_cut_of_an_idle_host_proves_nothing() -> None:
    evidence = partitioned_run()
    planned = {"cut": True, "restart": True, "kills": True}
    assert check_plan(Facts(evidence), cuts_of(evidence), planned).passed
    evidence.events[0]["held"] = []
    assert not check_plan(Facts(evidence), cuts_of(evidence), planned).passed
    evidence.events = []
    assert not check_plan(Facts(evidence), [], planned).passed


def test_summary_totals_steps_and_keeps_throughput_per_host_count() -> None:
    evidence = partitioned_run()
    passed = type("C", (), {"name": "x", "passed": True, "detail": ""})()
    drain = {"jobs_per_second": 900.0, "db_cpu_cores": 0.4, "workers": 2, "drained": True}
    one = step_summary(1, numbers(evidence), drain, [passed])
    two = step_summary(2, {**numbers(evidence), "lost": 2}, {**drain, "workers": 4}, [passed])
    summary = run_summary([one, two], {"latency_ms": 20})
    assert summary["hosts"] == [1, 2] and summary["jobs"] == 8 and summary["lost"] == 2
    assert summary["unattributed_duplicates"] == 0 and summary["max_recovery_seconds"] == 5.0
    assert summary["throughput"]["2"] == {
        "jobs_per_second": 900.0,
        "db_cpu_cores": 0.4,
        "workers": 4,
        "drained": True,
    }
    assert summary["passed"] and summary["latency_ms"] == 20
    stalled = step_summary(2, numbers(evidence), {**drain, "drained": False}, [passed])
    assert not run_summary([one, stalled], {})["passed"]
