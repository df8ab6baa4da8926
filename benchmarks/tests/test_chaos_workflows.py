"""The chaos harness's workflow checks (benchmarks/chaos/workflows.py) on hand-made evidence:
each passes on a consistent run and fails when its promise is broken.

The consistent run is the one tests/workers/test_chaos_short.py builds for the other checks
(a worker SIGKILLed at T0 + 5, supervisor A at T0 + 8), plus three committed workflows and
one rolled back:

- a chain 20 -> 21 -> 22, whose middle step was running on supervisor A's worker when it was
  SIGKILLed: its attempt was lost and ran again, and 22 started after the run that completed;
- a diamond 30 -> 31, 32 -> 33 whose doomed 31 died: 33 was cancelled without running;
- a chain 40 -> 41 -> 42: 40 died, 41 (doomed too) was cancelled, 42, enqueued with
  on_dependency_failure="run", ran once 41 was cancelled.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.chaos.checks import Check, run_checks
from benchmarks.chaos.evidence import Evidence, JobRow, timestamp
from benchmarks.chaos.mix import CHAIN, DIAMOND, plan_workflow
from benchmarks.chaos.report import figures
from django_sqlqueue.states import ABANDONED_OWNER
from tests.workers.test_chaos_short import (
    PID_A,
    PID_C,
    T0,
    W_A,
    W_C,
    consistent_run,
    iso,
    ran,
    row,
)

AFTER = "workflow dependents started after their dependencies completed"
WAITING = "no workflow job left waiting once its dependencies finished"
CANCEL = "dependents of failed jobs were cancelled and never ran (unless run on failure)"
RELEASED = "workflow steps ran once released: completed steps ran, no dependent ran early"
STORED = "workflow dependencies stored as enqueued"
WORKFLOW_CHECKS = (AFTER, WAITING, CANCEL, RELEASED, STORED)
FAILURE = "HandlerFailure: failing on purpose on attempt 1"


def attempt(
    number: int, worker: str, outcome: str, start: float, end: float, error: str = ""
) -> dict[str, Any]:
    return {
        "attempt": number,
        "worker": worker,
        "started_at": iso(start),
        "finished_at": iso(end),
        "outcome": outcome,
        "error": error,
        "traceback": "",
    }


def step(
    job_id: int, kind: str, status: str, history: list[dict[str, Any]], **kwargs: Any
) -> JobRow:
    """A job row that finished when its last attempt did."""
    job = row(job_id, kind, status, history, **kwargs)
    job.finished_at = max(timestamp(e["finished_at"]) or 0.0 for e in history)
    return job


def cancelled(job_id: int, kind: str, at: float) -> JobRow:
    job = row(job_id, kind, "cancelled", [])
    job.lease_owner, job.finished_at = ABANDONED_OWNER, at
    return job


def doomed(job_id: int, start: float) -> tuple[JobRow, list[Any]]:
    """A doomed step that spent its three attempts, one a second from `start`, on W_C."""
    history = [
        attempt(n, W_C, "error", start + n - 1, start + n - 0.9, FAILURE.replace("1", str(n)))
        for n in (1, 2, 3)
    ]
    runs = [ran(job_id, n, PID_C, W_C, start + n - 1, start + n - 0.9) for n in (1, 2, 3)]
    return step(job_id, "doomed", "dead", history), runs


def item(job_id: int, kind: str, after: list[int], run_on_failure: bool = False) -> dict:
    return {
        "kind": kind,
        "token": f"t{job_id}",
        "params": {},
        "key": None,
        "after": [f"t{i}" for i in after],
        "run_on_failure": run_on_failure,
        "id": job_id,
        "dedup": False,
    }


def unit(tx: str, outcome: str, shape: str, items: list[dict]) -> dict[str, Any]:
    return {
        "tx": tx,
        "mode": "workflow",
        "shape": shape,
        "outcome": outcome,
        "jobs": items,
        "started": T0,
        "ended": T0 + 0.01,
    }


def with_workflows() -> Evidence:
    ev = copy.deepcopy(consistent_run())
    dead_31, runs_31 = doomed(31, T0 + 3)
    dead_40, runs_40 = doomed(40, T0 + 5)
    ev.jobs += [
        step(20, "fast", "completed", [attempt(1, W_C, "completed", T0 + 1.9, T0 + 2)]),
        # Running on supervisor A's worker when A was SIGKILLed (T0 + 8): lost, run again.
        step(
            21,
            "slow",
            "completed",
            [
                attempt(1, W_A, "lost", T0 + 7.5, T0 + 12, "Worker was lost: killed by SIGKILL"),
                attempt(2, W_C, "completed", T0 + 12.5, T0 + 13.5),
            ],
            seconds=1.0,
        ),
        step(22, "fast", "completed", [attempt(1, W_C, "completed", T0 + 14, T0 + 14.1)]),
        step(30, "fast", "completed", [attempt(1, W_C, "completed", T0 + 2.5, T0 + 2.6)]),
        dead_31,
        step(32, "fast", "completed", [attempt(1, W_C, "completed", T0 + 3.5, T0 + 3.6)]),
        cancelled(33, "fast", T0 + 5.2),
        dead_40,
        cancelled(41, "doomed", T0 + 7.3),
        step(42, "fast", "completed", [attempt(1, W_C, "completed", T0 + 7.5, T0 + 7.6)]),
    ]
    ev.executions += [
        ran(20, 1, PID_C, W_C, T0 + 1.9, T0 + 2),
        ran(21, 1, PID_A, W_A, T0 + 7.5, None),  # SIGKILLed with supervisor A
        ran(21, 2, PID_C, W_C, T0 + 12.5, T0 + 13.5),
        ran(22, 1, PID_C, W_C, T0 + 14, T0 + 14.1),
        ran(30, 1, PID_C, W_C, T0 + 2.5, T0 + 2.6),
        *runs_31,
        ran(32, 1, PID_C, W_C, T0 + 3.5, T0 + 3.6),
        *runs_40,
        ran(42, 1, PID_C, W_C, T0 + 7.5, T0 + 7.6),
    ]
    ev.units += [
        unit(
            "w1",
            "committed",
            CHAIN,
            [item(20, "fast", []), item(21, "slow", [20]), item(22, "fast", [21])],
        ),
        unit(
            "w2",
            "committed",
            DIAMOND,
            [
                item(30, "fast", []),
                item(31, "doomed", [30]),
                item(32, "fast", [30]),
                item(33, "fast", [31, 32]),
            ],
        ),
        unit(
            "w3",
            "committed",
            CHAIN,
            [item(40, "doomed", []), item(41, "doomed", [40]), item(42, "fast", [41], True)],
        ),
        unit("w4", "rolled_back", CHAIN, [item(60, "fast", []), item(61, "fast", [60])]),
    ]
    ev.dependencies = [
        [21, 20, False],
        [22, 21, False],
        [31, 30, False],
        [32, 30, False],
        [33, 31, False],
        [33, 32, False],
        [41, 40, False],
        [42, 41, True],
    ]
    ev.collected = T0 + 20
    return ev


def verdicts(evidence: Evidence) -> dict[str, Check]:
    return {check.name: check for check in run_checks(evidence, grace=2, interrupt_grace=5)}


def job(ev: Evidence, job_id: int) -> JobRow:
    return next(j for j in ev.jobs if j.id == job_id)


def test_a_consistent_run_with_workflows_passes_every_check() -> None:
    results = verdicts(with_workflows())
    assert set(WORKFLOW_CHECKS) <= set(results)
    assert all(c.passed for c in results.values()), [
        (c.name, c.detail, c.examples) for c in results.values() if not c.passed
    ]
    assert results[AFTER].detail.startswith("4 completed dependencies of dependents that ran")
    assert "(1 of them run more than once" in results[AFTER].detail
    assert results[CANCEL].detail.startswith("2 dependents cancelled after a dependency failed, 1")
    assert results[STORED].detail.startswith("3 of 4 workflows committed, 10 jobs, 8 dependencies")
    numbers = figures(with_workflows())
    assert (numbers["workflows"], numbers["workflow_jobs"], numbers["workflow_jobs_ran"]) == (
        3,
        10,
        8,
    )
    assert (numbers["workflow_completed"], numbers["workflow_cancelled"]) == (6, 2)


def start_during_the_rerun(ev: Evidence) -> None:
    """22 started after its dependency's killed run began, before the run that completed it
    ended: the killed run does not count."""
    job(ev, 22).history[0]["started_at"] = iso(T0 + 13.2)
    next(e for e in ev.executions if e.job_id == 22).started = T0 + 13.2


def strand_a_waiting_job(ev: Evidence) -> None:
    """33's dependencies all finished by T0 + 5.1; it is still waiting at T0 + 20."""
    stranded = job(ev, 33)
    stranded.status, stranded.lease_owner, stranded.finished_at = "waiting", "", None


def run_after_a_failed_dependency(ev: Evidence) -> None:
    """33 ran and completed although 31, which it waits for, died."""
    ran_anyway = job(ev, 33)
    ran_anyway.status, ran_anyway.lease_owner = "completed", ""
    ran_anyway.history = [attempt(1, W_C, "completed", T0 + 6, T0 + 6.1)]
    ev.executions.append(ran(33, 1, PID_C, W_C, T0 + 6, T0 + 6.1))


def cancel_the_run_on_failure_step(ev: Evidence) -> None:
    """42 was enqueued with on_dependency_failure="run", yet was cancelled."""
    ev.jobs = [j for j in ev.jobs if j.id != 42] + [cancelled(42, "fast", T0 + 7.3)]
    ev.executions = [e for e in ev.executions if e.job_id != 42]


def cancel_without_cause(ev: Evidence) -> None:
    """22 was cancelled as abandoned, though 21 completed."""
    ev.jobs = [j for j in ev.jobs if j.id != 22] + [cancelled(22, "fast", T0 + 13.6)]
    ev.executions = [e for e in ev.executions if e.job_id != 22]


def complete_without_running(ev: Evidence) -> None:
    """20 is completed, but its handler never ran."""
    ev.executions = [e for e in ev.executions if e.job_id != 20]


def run_before_a_failed_dependency_ended(ev: Evidence) -> None:
    """42 (run on failure) started before 41, which it waits for, was cancelled."""
    job(ev, 42).history[0]["started_at"] = iso(T0 + 7.0)
    next(e for e in ev.executions if e.job_id == 42).started = T0 + 7.0


def lose_an_edge(ev: Evidence) -> None:
    """22 was enqueued after 21, but no such edge was stored."""
    ev.dependencies.remove([22, 21, False])


def add_an_edge(ev: Evidence) -> None:
    """An edge that no committed workflow enqueued (harmless otherwise): 22 waits for 20."""
    ev.dependencies.append([22, 20, False])


BREAKERS: dict[Callable[[Evidence], None], tuple[str, ...]] = {
    start_during_the_rerun: (AFTER, RELEASED),
    strand_a_waiting_job: (WAITING,),
    run_after_a_failed_dependency: (CANCEL,),
    cancel_the_run_on_failure_step: (CANCEL,),
    cancel_without_cause: (CANCEL,),
    complete_without_running: (RELEASED,),
    run_before_a_failed_dependency_ended: (RELEASED,),
    lose_an_edge: (STORED,),
    add_an_edge: (STORED,),
}


@pytest.mark.parametrize("breaker", list(BREAKERS), ids=lambda b: b.__name__)
def test_each_broken_workflow_promise_fails_its_check(breaker: Callable[[Evidence], None]) -> None:
    ev = with_workflows()
    breaker(ev)
    results = verdicts(ev)
    for name in BREAKERS[breaker]:
        assert not results[name].passed, (name, results[name].detail)
        assert results[name].examples, name
    # The other workflow checks are not fooled into failing by a problem that is not theirs,
    # except where one broken fact breaks two promises (and the stranded job, which also
    # never reached a terminal state).
    untouched = set(WORKFLOW_CHECKS) - set(BREAKERS[breaker])
    if breaker is strand_a_waiting_job:
        untouched.discard(CANCEL)  # a waiting job whose dependency died is not cancelled
    failing = sorted(name for name in untouched if not results[name].passed)
    assert not failing, [(n, results[n].examples) for n in failing]


def test_a_job_waiting_within_the_sweep_is_not_stranded() -> None:
    ev = with_workflows()
    strand_a_waiting_job(ev)
    ev.collected = T0 + 5.1 + 1.0  # its last dependency ended a second ago
    results = verdicts(ev)
    assert results[WAITING].passed, results[WAITING].examples
    assert "1 within the sweep's time" in results[WAITING].detail
    assert not results["every committed job reached a terminal state"].passed


def test_examples_name_the_jobs() -> None:
    ev = with_workflows()
    start_during_the_rerun(ev)
    (example,) = verdicts(ev)[AFTER].examples
    assert example.startswith("job 22 (fast) started 0.300 s before job 21 (slow)")
    assert "attempt 2 in pid 201" in example
    ev = with_workflows()
    strand_a_waiting_job(ev)
    (example,) = verdicts(ev)[WAITING].examples
    assert example.startswith("job 33 (fast) still waiting 14.9 s after the last job")
    assert "#31 dead, #32 completed" in example


def test_a_cancelled_doomed_step_is_not_a_wrong_death() -> None:
    results = verdicts(with_workflows())
    dead = results["dead jobs are exactly those that should be dead"]
    assert dead.passed, dead.examples


@pytest.mark.parametrize("seed", range(30))
def test_planned_workflows_are_chains_and_diamonds(seed: int) -> None:
    serial = iter(range(1000))
    shape, steps = plan_workflow(random.Random(seed), 4.0, lambda: f"w{next(serial)}")
    tokens = [s.token for s in steps]
    assert len(set(tokens)) == len(tokens)
    assert not steps[0].after
    if shape == CHAIN:
        assert 2 <= len(steps) <= 4
        assert all(s.after == [before] for before, s in zip(tokens, steps[1:], strict=False))
    else:
        assert shape == DIAMOND
        a, b, c, _ = tokens
        assert [s.after for s in steps] == [[], [a], [a], [b, c]]
    assert not any(s.run_on_failure for s in steps[:-1])
