"""The chaos harness's batch checks (benchmarks/chaos/batches.py) on hand-made evidence: each
passes on a consistent run and fails when its promise is broken.

The consistent run is the one tests/workers/test_chaos_short.py builds for the other checks
(a worker SIGKILLed at T0 + 5, supervisor A at T0 + 8), plus two committed batches and one
rolled back:

- batch #1: 50 fast, 51 doomed (dead after three attempts) and 52 slow, which was running on
  supervisor A's worker when it was SIGKILLed: lost, run again, completed at T0 + 13.5; the
  batch finished at T0 + 13.6 and its callback, job 53, ran at T0 + 14;
- batch #2: 55 fast and 56 flaky (failed once), stored by one `enqueue_many` and one enqueue;
  finished at T0 + 3.2, its callback 57 ran at T0 + 3.5;
- batch #3 rolled back on purpose: neither its row nor its jobs (70, 71, callback 72) exist.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.chaos.batches import batch_figures
from benchmarks.chaos.checks import Check, run_checks
from benchmarks.chaos.evidence import Evidence, JobRow, read_evidence, save_evidence
from benchmarks.chaos.facts import Facts
from benchmarks.chaos.mix import BATCH_SIZE, WORKFLOW_KINDS, plan_batch
from benchmarks.chaos.report import figures
from benchmarks.tests.test_chaos_workflows import FAILURE, attempt, doomed, step
from tests.workers.test_chaos_short import PID_A, PID_C, T0, W_A, W_C, consistent_run, iso, ran

STORED = "batch callbacks stored exactly once, rolled-back batches left nothing"
AFTER = "batch callbacks ran after every member finished"
LEFT = "no batch left unfinished or without its callback after the drain"
BATCH_CHECKS = (STORED, AFTER, LEFT)


def member(job_id: int, kind: str) -> dict[str, Any]:
    return {"kind": kind, "token": f"t{job_id}", "params": {}, "key": None, "id": job_id,
            "dedup": False}  # fmt: skip


def callback(job_id: int) -> dict[str, Any]:
    return {"kind": "fast", "token": f"t{job_id}", "params": {}, "key": None, "callback": True}


def unit(tx: str, outcome: str, batch_id: int, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"tx": tx, "mode": "batch", "outcome": outcome, "batch": batch_id, "jobs": items,
            "started": T0, "ended": T0 + 0.01}  # fmt: skip


def seen(batch_id: int, total: int, completed: int, dead: int) -> dict[str, Any]:
    """What a callback's handler returns: its `context.batch`."""
    return {"id": batch_id, "total": total, "completed": completed, "dead": dead,
            "cancelled": 0, "state": "finished"}  # fmt: skip


def in_batch(job: JobRow, batch_id: int) -> JobRow:
    job.batch_id = batch_id
    return job


def with_batches() -> Evidence:
    ev = copy.deepcopy(consistent_run())
    dead_51, runs_51 = doomed(51, T0 + 2)
    ev.jobs += [
        in_batch(
            step(50, "fast", "completed", [attempt(1, W_C, "completed", T0 + 1, T0 + 1.1)]), 1
        ),
        in_batch(dead_51, 1),
        # Running on supervisor A's worker when A was SIGKILLed (T0 + 8): lost, run again.
        in_batch(
            step(
                52,
                "slow",
                "completed",
                [
                    attempt(
                        1, W_A, "lost", T0 + 7.5, T0 + 12, "Worker was lost: killed by SIGKILL"
                    ),
                    attempt(2, W_C, "completed", T0 + 12.5, T0 + 13.5),
                ],
                seconds=1.0,
            ),
            1,
        ),
        step(53, "fast", "completed", [attempt(1, W_C, "completed", T0 + 14, T0 + 14.1)]),
        in_batch(
            step(55, "fast", "completed", [attempt(1, W_C, "completed", T0 + 2, T0 + 2.1)]), 2
        ),
        in_batch(
            step(
                56,
                "flaky",
                "completed",
                [
                    attempt(1, W_C, "error", T0 + 2.2, T0 + 2.3, FAILURE),
                    attempt(2, W_C, "completed", T0 + 3, T0 + 3.1),
                ],
                fail_first=1,
            ),
            2,
        ),
        step(57, "fast", "completed", [attempt(1, W_C, "completed", T0 + 3.5, T0 + 3.6)]),
    ]
    ev.executions += [
        ran(50, 1, PID_C, W_C, T0 + 1, T0 + 1.1),
        *runs_51,
        ran(52, 1, PID_A, W_A, T0 + 7.5, None),  # SIGKILLed with supervisor A
        ran(52, 2, PID_C, W_C, T0 + 12.5, T0 + 13.5),
        ran(53, 1, PID_C, W_C, T0 + 14, T0 + 14.1),
        ran(55, 1, PID_C, W_C, T0 + 2, T0 + 2.1),
        ran(56, 1, PID_C, W_C, T0 + 2.2, T0 + 2.3),
        ran(56, 2, PID_C, W_C, T0 + 3, T0 + 3.1),
        ran(57, 1, PID_C, W_C, T0 + 3.5, T0 + 3.6),
    ]
    ev.units += [
        unit(
            "b1",
            "committed",
            1,
            [callback(53), member(50, "fast"), member(51, "doomed"), member(52, "slow")],
        ),
        unit("b2", "committed", 2, [callback(57), member(55, "fast"), member(56, "flaky")]),
        unit("b3", "rolled_back", 3, [callback(72), member(70, "fast"), member(71, "atomic")]),
    ]
    ev.batches = [
        {"id": 1, "closed_at": T0, "finished_at": T0 + 13.6, "callback_job_id": 53,
         "callback_result": seen(1, 3, 2, 1)},
        {"id": 2, "closed_at": T0, "finished_at": T0 + 3.2, "callback_job_id": 57,
         "callback_result": seen(2, 2, 2, 0)},
    ]  # fmt: skip
    ev.collected = T0 + 20
    return ev


def verdicts(evidence: Evidence) -> dict[str, Check]:
    return {check.name: check for check in run_checks(evidence, grace=2, interrupt_grace=5)}


def job(ev: Evidence, job_id: int) -> JobRow:
    return next(j for j in ev.jobs if j.id == job_id)


def batch(ev: Evidence, batch_id: int) -> dict[str, Any]:
    return next(b for b in ev.batches if b["id"] == batch_id)


def test_a_consistent_run_with_batches_passes_every_check() -> None:
    results = verdicts(with_batches())
    assert set(BATCH_CHECKS) <= set(results)
    assert all(c.passed for c in results.values()), [
        (c.name, c.detail, c.examples) for c in results.values() if not c.passed
    ]
    assert results[STORED].detail == (
        "2 of 3 batches committed, 5 members; 2 finished, 2 callback jobs stored; 1 rolled "
        "back; 0 wrong"
    )
    assert results[AFTER].detail.startswith("2 callbacks ran; closest start 0.400 s after")
    assert "2 completed, what each saw of its batch" in results[AFTER].detail
    assert results[LEFT].detail.startswith("2 of 2 batches finished (at most 0.10 s after")
    numbers = figures(with_batches())
    assert {k: numbers[k] for k in batch_figures(Facts(with_batches()))} == {
        "batches": 2,
        "batches_rolled_back": 1,
        "batch_jobs": 5,
        "batch_callbacks": 2,
        "batch_callbacks_ran": 2,
    }


def test_a_rolled_back_batchs_id_may_be_taken_again() -> None:
    """SQLite hands a rolled-back row's id to the next row: batch #2 is also the id the
    rolled-back batch had."""
    ev = with_batches()
    ev.units[-1]["batch"] = 2
    results = verdicts(ev)
    assert results[STORED].passed, results[STORED].examples


def test_a_batch_whose_commit_failed_is_found_by_its_members() -> None:
    """A unit whose commit's reply was lost: no batch id noted, but its jobs are there."""
    ev = with_batches()
    ev.units[-2].update(outcome="error", error="OperationalError: server closed the connection")
    del ev.units[-2]["batch"]
    ev.events.append({"type": "db_fault", "t": T0, "mode": "cut", "start": T0, "end": T0 + 1})
    results = verdicts(ev)
    assert all(results[name].passed for name in BATCH_CHECKS), [
        results[name].examples for name in BATCH_CHECKS
    ]
    assert results[STORED].detail.startswith("2 of 3 batches committed")


def test_figures_and_evidence_file_keep_the_batches(tmp_path: Path) -> None:
    ev = with_batches()
    save_evidence(ev, tmp_path / "evidence.json")
    again = read_evidence(tmp_path / "evidence.json")
    assert again == ev
    assert job(again, 52).batch_id == 1 and job(again, 53).batch_id is None


def store_the_callback_twice(ev: Evidence) -> None:
    """A second job 54 with batch #1's callback token ran too."""
    twin = step(54, "fast", "completed", [attempt(1, W_C, "completed", T0 + 14, T0 + 14.1)])
    twin.kwargs["token"] = "t53"
    ev.jobs.append(twin)
    ev.executions.append(ran(54, 1, PID_C, W_C, T0 + 14, T0 + 14.1))


def name_one_callback_twice(ev: Evidence) -> None:
    """Batch #2 names job 53, batch #1's callback (which saw batch #1), as its own."""
    batch(ev, 2).update(callback_job_id=53, callback_result=seen(1, 3, 2, 1))


def store_a_rolled_back_member(ev: Evidence) -> None:
    """Job 70 of the rolled-back batch #3 is there (and ran)."""
    ev.jobs.append(
        in_batch(step(70, "fast", "completed", [attempt(1, W_C, "completed", T0 + 4, T0 + 4.1)]), 3)
    )
    ev.executions.append(ran(70, 1, PID_C, W_C, T0 + 4, T0 + 4.1))


def leave_a_rolled_back_batch_row(ev: Evidence) -> None:
    """The rolled-back batch #3's row is there, open."""
    ev.batches.append(
        {"id": 3, "closed_at": None, "finished_at": None, "callback_job_id": None,
         "callback_result": None}
    )  # fmt: skip


def lose_a_member(ev: Evidence) -> None:
    """Job 50 was enqueued in batch #1, but stored outside it."""
    job(ev, 50).batch_id = None


def run_the_callback_before_the_last_member_ended(ev: Evidence) -> None:
    """Job 53 started at T0 + 13.2, while 52 still ran (until T0 + 13.5)."""
    job(ev, 53).history[0]["started_at"] = iso(T0 + 13.2)
    next(e for e in ev.executions if e.job_id == 53).started = T0 + 13.2


def finish_before_the_last_member_ended(ev: Evidence) -> None:
    """Batch #1 finished at T0 + 13, before 52 completed (T0 + 13.5)."""
    batch(ev, 1)["finished_at"] = T0 + 13.0


def finish_with_a_member_unfinished(ev: Evidence) -> None:
    """Batch #1 finished while 52 is still pending (its second attempt never came)."""
    pending = job(ev, 52)
    pending.status, pending.finished_at = "pending", None
    pending.history = pending.history[:1]
    ev.executions = [e for e in ev.executions if (e.job_id, e.attempt) != (52, 2)]


def see_the_wrong_totals(ev: Evidence) -> None:
    """Batch #1's callback saw three members completed, none dead."""
    batch(ev, 1)["callback_result"] = seen(1, 3, 3, 0)


def never_finish(ev: Evidence) -> None:
    """Batch #1 never finished: its members ended by T0 + 13.5, nothing stored its callback."""
    batch(ev, 1).update(finished_at=None, callback_job_id=None, callback_result=None)
    ev.jobs = [j for j in ev.jobs if j.id != 53]
    ev.executions = [e for e in ev.executions if e.job_id != 53]


def finish_without_the_callback(ev: Evidence) -> None:
    """Batch #1 is finished, but no callback was stored."""
    batch(ev, 1).update(callback_job_id=None, callback_result=None)
    ev.jobs = [j for j in ev.jobs if j.id != 53]
    ev.executions = [e for e in ev.executions if e.job_id != 53]


def leave_a_batch_open(ev: Evidence) -> None:
    """Batch #1 was never closed (so never finished)."""
    never_finish(ev)
    batch(ev, 1)["closed_at"] = None


BREAKERS: dict[Callable[[Evidence], None], tuple[str, ...]] = {
    store_the_callback_twice: (STORED,),
    # Two promises: one job is the callback of two batches, and it saw the other batch.
    name_one_callback_twice: (STORED, AFTER),
    store_a_rolled_back_member: (STORED,),
    # Two promises: a row no committed batch accounts for, and one left open.
    leave_a_rolled_back_batch_row: (STORED, LEFT),
    # Two promises: a member missing from its batch, which its callback counted.
    lose_a_member: (STORED, AFTER),
    run_the_callback_before_the_last_member_ended: (AFTER,),
    finish_before_the_last_member_ended: (AFTER,),
    finish_with_a_member_unfinished: (AFTER,),
    see_the_wrong_totals: (AFTER,),
    never_finish: (LEFT,),
    # Two promises: a finished batch with no callback job, and one left without it.
    finish_without_the_callback: (STORED, LEFT),
    leave_a_batch_open: (LEFT,),
}


@pytest.mark.parametrize("breaker", list(BREAKERS), ids=lambda b: b.__name__)
def test_each_broken_batch_promise_fails_its_check(breaker: Callable[[Evidence], None]) -> None:
    ev = with_batches()
    breaker(ev)
    results = verdicts(ev)
    for name in BREAKERS[breaker]:
        assert not results[name].passed, (name, results[name].detail)
        assert results[name].examples, name
    untouched = set(BATCH_CHECKS) - set(BREAKERS[breaker])
    failing = sorted(name for name in untouched if not results[name].passed)
    assert not failing, [(n, results[n].examples) for n in failing]


def test_a_batch_finishing_within_the_sweep_is_not_left() -> None:
    ev = with_batches()
    never_finish(ev)
    ev.collected = T0 + 13.5 + 1.0  # its last member ended a second ago
    results = verdicts(ev)
    assert results[LEFT].passed, results[LEFT].examples
    assert "1 within the sweep's time" in results[LEFT].detail


def test_examples_name_the_batches() -> None:
    ev = with_batches()
    run_the_callback_before_the_last_member_ended(ev)
    (example,) = verdicts(ev)[AFTER].examples
    assert example == (
        "batch #1's callback, job 53, started 0.300 s before its last member finished"
    )
    ev = with_batches()
    never_finish(ev)
    (example,) = verdicts(ev)[LEFT].examples
    assert example == "batch #1 not finished 6.5 s after its last member finished (3 members)"
    ev = with_batches()
    store_the_callback_twice(ev)
    (example,) = verdicts(ev)[STORED].examples
    assert example == "batch #1 (b1) finished with 2 callback jobs (t53)"


@pytest.mark.parametrize("seed", range(20))
def test_planned_batches_are_a_few_jobs_of_the_workflow_kinds(seed: int) -> None:
    serial = iter(range(1000))
    members = plan_batch(random.Random(seed), 4.0, lambda: f"b{next(serial)}")
    assert BATCH_SIZE[0] <= len(members) <= BATCH_SIZE[1]
    assert len({m.token for m in members}) == len(members)
    assert {m.kind for m in members} <= set(WORKFLOW_KINDS)
    assert all(m.key is None for m in members)
