"""The chaos harness's verdicts, tested: each check passes on a consistent run and fails when
its guarantee is broken.

The harness itself runs in CI as a script (`python -m benchmarks.chaos --db all --seconds 60`),
against real supervisors it kills; a test that could never fail would prove nothing there. So
here the checks get a small, hand-made run — two supervisors, a kill, a rollback, a duplicate
key — and then the same run with one thing broken at a time.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from benchmarks.chaos.checks import Check, run_checks
from benchmarks.chaos.evidence import Evidence, ExecutionRow, JobRow, read_evidence, save_evidence
from benchmarks.chaos.report import figures, markdown_table

T0 = 1_800_000_000.0
LEASE = 4.0
W_A, W_B, W_C = "host:100:aaa", "host:100:bbb", "host:200:ccc"
PID_A, PID_B, PID_C = 101, 102, 201


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


def entry(attempt: int, worker: str, outcome: str, at: float, error: str = "") -> dict[str, Any]:
    return {
        "attempt": attempt,
        "worker": worker,
        "started_at": iso(at - 0.1),
        "finished_at": iso(at),
        "outcome": outcome,
        "error": error,
        "traceback": "",
    }


def row(
    job_id: int, kind: str, status: str, history: list[dict[str, Any]], **kwargs: Any
) -> JobRow:
    max_attempts = {"doomed": 3, "hang": 2}.get(kind, 4)
    key = kwargs.pop("key", None)
    return JobRow(
        id=job_id,
        name=f"chaos.{'fast' if kind == 'keyed' else kind}",
        status=status,
        attempts=max((e["attempt"] for e in history), default=0),
        max_attempts=max_attempts,
        kwargs={"token": f"t{job_id}", "kind": kind, **kwargs},
        history=history,
        key=key,
    )


def ran(
    job_id: int, attempt: int, pid: int, worker: str, start: float, end: float | None
) -> ExecutionRow:
    return ExecutionRow(job_id, f"t{job_id}", "", attempt, pid, worker, start, end)


def consistent_run() -> Evidence:
    """Six jobs, one SIGKILLed worker, one rollback, one deduplicated key: all is well."""
    failure = "HandlerFailure: failing on purpose on attempt 1"
    jobs = [
        row(1, "fast", "completed", [entry(1, W_A, "completed", T0 + 1)]),
        # Killed while running on W_B: lost, then completed by W_A.
        row(
            2,
            "slow",
            "completed",
            [
                entry(1, W_B, "lost", T0 + 5.1, "Worker was lost: killed by SIGKILL"),
                entry(2, W_A, "completed", T0 + 7),
            ],
            seconds=1.0,
        ),
        row(
            3,
            "flaky",
            "completed",
            [
                entry(1, W_A, "error", T0 + 2, failure),
                entry(2, W_C, "completed", T0 + 3),
            ],
            fail_first=1,
        ),
        row(
            4,
            "doomed",
            "dead",
            [
                entry(1, W_A, "error", T0 + 2, failure),
                entry(2, W_A, "error", T0 + 3, failure),
                entry(3, W_C, "error", T0 + 4, failure),
            ],
        ),
        row(5, "keyed", "completed", [entry(1, W_C, "completed", T0 + 2)], key="k1"),
        row(
            6, "hang", "dead", [entry(1, W_A, "timeout", T0 + 3), entry(2, W_A, "timeout", T0 + 5)]
        ),
    ]
    executions = [
        ran(1, 1, PID_A, W_A, T0 + 0.9, T0 + 1),
        ran(2, 1, PID_B, W_B, T0 + 4, None),  # killed mid-run
        ran(2, 2, PID_A, W_A, T0 + 6, T0 + 7),
        ran(3, 1, PID_A, W_A, T0 + 1.9, T0 + 2),
        ran(3, 2, PID_C, W_C, T0 + 2.9, T0 + 3),
        ran(4, 1, PID_A, W_A, T0 + 1.9, T0 + 2),
        ran(4, 2, PID_A, W_A, T0 + 2.9, T0 + 3),
        ran(4, 3, PID_C, W_C, T0 + 3.9, T0 + 4),
        ran(5, 1, PID_C, W_C, T0 + 1.9, T0 + 2),
        ran(6, 1, PID_A, W_A, T0 + 2, T0 + 3),
        ran(6, 2, PID_A, W_A, T0 + 4, T0 + 5),
    ]

    def item(job_id: int, kind: str, **extra: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "token": f"t{job_id}",
            "params": {},
            "key": None,
            "id": job_id,
            "dedup": False,
            **extra,
        }

    def unit(
        tx: str, mode: str, outcome: str, items: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        return {
            "tx": tx,
            "mode": mode,
            "outcome": outcome,
            "jobs": items,
            "started": T0,
            "ended": T0 + 0.01,
            **extra,
        }

    units = [
        unit("u1", "autocommit", "committed", [item(1, "fast")]),
        unit("u2", "commit", "committed", [item(2, "slow"), item(3, "flaky")]),
        unit("u3", "autocommit", "committed", [item(4, "doomed")]),
        unit("u4", "commit", "committed", [item(5, "keyed", key="k1"), item(6, "hang")]),
        unit(
            "u5", "autocommit", "committed", [item(5, "keyed", key="k1", token="t99", dedup=True)]
        ),
        unit("u6", "rollback", "rolled_back", [item(7, "fast")]),
    ]
    events = [
        {"type": "start_supervisor", "t": T0 - 5, "supervisor": "A1"},
        {"type": "start_supervisor", "t": T0 - 5, "supervisor": "B1"},
        {
            "type": "kill_worker",
            "t": T0 + 5,
            "pids": [PID_B],
            "worker_ids": [W_B],
            "supervisor": "A1",
            "busy": True,
        },
        {
            "type": "kill_supervisor",
            "t": T0 + 8,
            "supervisor": "A1",
            "pids": [PID_A],
            "worker_ids": [W_A],
        },
        {"type": "term_supervisor", "t": T0 + 9, "supervisor": "B1"},
        {
            "type": "supervisor_exit",
            "t": T0 + 10,
            "supervisor": "B1",
            "how": "sigterm",
            "code": 0,
            "seconds": 1.5,
        },
    ]
    return Evidence(
        vendor="sqlite",
        seconds=10,
        lease=LEASE,
        jobs=jobs,
        executions=executions,
        orders={"u2", "u4"},
        units=units,
        events=events,
    )


def verdicts(evidence: Evidence) -> dict[str, Check]:
    return {check.name: check for check in run_checks(evidence, grace=2, interrupt_grace=5)}


def failed(evidence: Evidence) -> set[str]:
    return {name for name, check in verdicts(evidence).items() if not check.passed}


def test_a_consistent_run_passes_every_check() -> None:
    results = verdicts(consistent_run())
    assert len(results) == 25
    assert not [c for c in results.values() if not c.passed], [
        (c.name, c.detail, c.examples) for c in results.values() if not c.passed
    ]
    assert (
        "1 jobs ran more often than recorded"
        in results["double executions only where a worker was killed or lost its job"].detail
    )
    assert "max 0.10 s" in results["reclaim latency after a kill within the lease bound"].detail


def _job(ev: Evidence, job_id: int) -> JobRow:
    return next(j for j in ev.jobs if j.id == job_id)


def lose_a_job(ev: Evidence) -> None:
    ev.jobs = [j for j in ev.jobs if j.id != 1]


def leave_one_running(ev: Evidence) -> None:
    _job(ev, 1).status = "running"


def run_a_rolled_back_job(ev: Evidence) -> None:
    ev.executions.append(ran(7, 1, PID_C, W_C, T0 + 3, T0 + 3.1))
    ev.executions[-1].token = "t7"


def store_a_rolled_back_job(ev: Evidence) -> None:
    ev.jobs.append(row(7, "fast", "completed", [entry(1, W_C, "completed", T0 + 3)]))


def run_twice_without_cause(ev: Evidence) -> None:
    ev.executions.append(ran(1, 1, PID_C, W_C, T0 + 1.5, T0 + 1.6))


def run_on_two_live_workers(ev: Evidence) -> None:
    _job(ev, 3).history.insert(0, entry(1, W_C, "released", T0 + 1.95))
    ev.executions.append(ran(3, 1, PID_C, W_C, T0 + 1.92, T0 + 2.5))


def exceed_max_attempts(ev: Evidence) -> None:
    _job(ev, 4).attempts = 4


def kill_a_healthy_job(ev: Evidence) -> None:
    job = _job(ev, 1)
    job.status = "dead"
    job.history = [entry(n, W_A, "error", T0 + n, "OperationalError") for n in range(1, 5)]


def complete_a_doomed_job(ev: Evidence) -> None:
    job = _job(ev, 4)
    job.status = "completed"
    job.history[-1]["outcome"] = "completed"


def duplicate_a_key(ev: Evidence) -> None:
    ev.units[4]["jobs"][0]["dedup"] = False
    ev.units[4]["jobs"][0]["id"] = 99
    ev.jobs.append(row(99, "keyed", "completed", [entry(1, W_C, "completed", T0 + 3)], key="k1"))
    ev.jobs[-1].kwargs["token"] = "t99"
    ev.executions.append(ran(99, 1, PID_C, W_C, T0 + 2.9, T0 + 3))


def reclaim_slowly(ev: Evidence) -> None:
    _job(ev, 2).history[0]["finished_at"] = iso(T0 + 5 + 30)


def surface_a_deadlock(ev: Evidence) -> None:
    ev.units.append(
        {
            "tx": "u7",
            "mode": "autocommit",
            "outcome": "error",
            "jobs": [],
            "started": T0,
            "ended": T0 + 1,
            "error": "OperationalError: (1213, 'Deadlock found when trying to get lock')",
        }
    )


def fail_a_shutdown(ev: Evidence) -> None:
    ev.events[-1]["code"] = 1


def split_a_transaction(ev: Evidence) -> None:
    ev.orders.discard("u2")


def skip_the_chaos(ev: Evidence) -> None:
    ev.events = [e for e in ev.events if not e["type"].startswith("kill_")]


@pytest.mark.parametrize(
    ("breakage", "check"),
    [
        (lose_a_job, "no job lost"),
        (leave_one_running, "no job stuck running"),
        (leave_one_running, "every committed job reached a terminal state"),
        (run_a_rolled_back_job, "rolled-back enqueues never ran"),
        (store_a_rolled_back_job, "rolled-back enqueues never ran"),
        (
            run_twice_without_cause,
            "double executions only where a worker was killed or lost its job",
        ),
        (run_on_two_live_workers, "no job ran on two live workers at once"),
        (exceed_max_attempts, "attempts <= max_attempts"),
        (kill_a_healthy_job, "dead jobs are exactly those that should be dead"),
        (
            kill_a_healthy_job,
            "recorded outcomes match the handlers (at most one completion, always last)",
        ),
        (complete_a_doomed_job, "dead jobs are exactly those that should be dead"),
        (duplicate_a_key, "idempotency keys never produced two jobs"),
        (reclaim_slowly, "reclaim latency after a kill within the lease bound"),
        (surface_a_deadlock, "no database-is-locked or deadlock error surfaced to a producer"),
        (fail_a_shutdown, "supervisors given SIGTERM exited cleanly and in time"),
        (
            split_a_transaction,
            "transactional enqueue: jobs and business rows commit or roll back together",
        ),
        (skip_the_chaos, "the harness did what it planned"),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_each_broken_guarantee_fails_its_check(
    breakage: Callable[[Evidence], None], check: str
) -> None:
    evidence = copy.deepcopy(consistent_run())
    breakage(evidence)
    assert check in verdicts(evidence), check
    assert check in failed(evidence)


def test_evidence_survives_its_file(tmp_path: Any) -> None:
    """`--recheck RUN_DIR` re-reads what a run saved and reaches the same verdicts."""
    evidence = consistent_run()
    save_evidence(evidence, tmp_path / "evidence.json")
    again = read_evidence(tmp_path / "evidence.json")
    assert again == evidence
    assert failed(again) == set()


def test_figures_for_the_docs() -> None:
    evidence = consistent_run()
    evidence.jobs[0].history.insert(0, entry(1, W_A, "released", T0 + 0.95, "before starting it"))
    numbers = figures(evidence)
    assert (numbers["jobs"], numbers["completed"], numbers["dead"]) == (6, 4, 2)
    assert (numbers["worker_kills"], numbers["supervisor_kills"]) == (1, 1)
    assert numbers["double_executions"] == {"its worker was killed": 1}
    assert numbers["reclaim_samples"] == {"worker SIGKILL": 1}
    # Job 1 was handed back as never started, yet its execution by W_A is on record.
    assert (numbers["handed_back_unstarted"], numbers["handed_back_unstarted_but_ran"]) == (1, 1)
    checks = [{"name": c.name, "passed": c.passed} for c in run_checks(evidence, 2, 5)]
    table = markdown_table([{**numbers, "checks": checks}])
    assert "| Jobs committed | 6 |" in table
    assert "| Max reclaim after worker SIGKILL | 0.10 s (1 jobs) |" in table
