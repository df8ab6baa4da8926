"""The checks of a `--misbehave` chaos run (benchmarks/chaos/misbehave_checks.py), on a
hand-made run: every check passes on a consistent one, and each fails when what it guards
breaks (a misbehaving job ending otherwise than documented, a normal job run twice, a slot
left empty, an `os._exit(0)` noticed only at lease expiry, ...).

CI runs the mode itself as a script (`python -m benchmarks.chaos --misbehave`) on every
database; these tests show that its verdicts can fail.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from benchmarks.chaos.evidence import Evidence, ExecutionRow, JobRow
from benchmarks.chaos.misbehave import MISBEHAVING, expected_end
from benchmarks.chaos.misbehave_checks import run_misbehave_checks
from benchmarks.chaos.mix import KINDS
from tests.workers.test_chaos_short import LEASE, T0, entry, iso

W_A, W_B = "host:1:aaa", "host:2:bbb"
PID_A, PID_B = 11, 12
WORKERS = 3
FAILURE = "HandlerFailure: failing on purpose on attempt {}"
ERRORS = {
    "leak_atomic": "Job left a transaction open (an atomic block never exited); rolled back",
    "leak_autocommit": "Job left a transaction open (autocommit turned off); rolled back",
    "exit0": "Worker host:2:bbb exited with status 0 while running job",
    "big_result": "The handler's return value is 1049576 bytes as JSON; the limit is "
    "MAX_RESULT_BYTES, 1048576.",
    "raise": "LookupError: misbehaving on purpose on attempt {}",
}
EXCEPTIONS = {
    "leak_atomic": "django_sqlqueue.errors.TransactionLeftOpen",
    "leak_autocommit": "django_sqlqueue.errors.TransactionLeftOpen",
    "big_result": "builtins.TypeError",
    "raise": "builtins.LookupError",
}


def job_row(job_id: int, kind: str, status: str, history: list[dict[str, Any]]) -> JobRow:
    spec = KINDS.get(kind) or MISBEHAVING[kind]
    return JobRow(
        id=job_id,
        name=spec.job_name,
        status=status,
        attempts=len(history),
        max_attempts=spec.max_attempts,
        kwargs={"token": f"t{job_id}", "kind": kind},
        history=history,
    )


def consistent_run() -> Evidence:
    """Two normal jobs and one of each misbehaving kind, each ended as documented; two
    supervisors that kept 3 workers (B one short for a second: a replacement starting)."""
    jobs = [
        job_row(1, "fast", "completed", [entry(1, W_A, "completed", T0 + 1)]),
        job_row(
            2,
            "doomed",
            "dead",
            [entry(n, W_A, "error", T0 + n, FAILURE.format(n)) for n in (1, 2, 3)],
        ),
    ]
    executions = [ExecutionRow(1, "t1", "fast", 1, PID_A, W_A, T0 + 0.9, T0 + 1)]
    executions += [
        ExecutionRow(2, "t2", "doomed", n, PID_A, W_A, T0 + n - 0.05, T0 + n) for n in (1, 2, 3)
    ]
    for job_id, kind in enumerate(MISBEHAVING, start=10):
        want = expected_end(kind)
        history = []
        for attempt in range(1, want.attempts + 1):
            at = T0 + job_id + attempt
            item = entry(attempt, W_B, want.outcome, at, ERRORS.get(kind, "").format(attempt))
            item["exception"] = EXCEPTIONS.get(kind, "")
            history.append(item)
            duration = 6.0 if kind == "gil" else 0.05
            end = None if kind == "exit0" else at
            executions.append(
                ExecutionRow(job_id, f"t{job_id}", kind, attempt, PID_B, W_B, at - duration, end)
            )
        jobs.append(job_row(job_id, kind, want.status, history))
    units = [
        {
            "tx": f"u{job.id}",
            "mode": "autocommit",
            "outcome": "committed",
            "jobs": [{"kind": job.kind, "token": job.token, "id": job.id, "dedup": False}],
            "started": T0,
            "ended": T0 + 0.01,
        }
        for job in jobs
    ]
    events: list[dict[str, Any]] = [
        {"type": "start_supervisor", "t": T0 - 5, "supervisor": "A1"},
        {"type": "start_supervisor", "t": T0 - 5, "supervisor": "B1"},
    ]
    for step in range(60):
        t = T0 - 4 + step * 0.5
        b = 2 if 10 <= step < 12 else 3
        events.append({"type": "slots", "t": t, "counts": {"A1": 3, "B1": b}})
    events += [
        {
            "type": "supervisor_exit",
            "t": T0 + 30,
            "supervisor": name,
            "how": "stop",
            "code": 0,
            "seconds": 1.2,
        }
        for name in ("A1", "B1")
    ]
    return Evidence(
        vendor="sqlite",
        seconds=25,
        lease=LEASE,
        jobs=jobs,
        executions=executions,
        units=units,
        events=events,
    )


def verdicts(evidence: Evidence) -> dict[str, Any]:
    checks = run_misbehave_checks(evidence, grace=2, interrupt_grace=5, workers=WORKERS)
    return {check.name: check for check in checks}


def test_a_consistent_misbehave_run_passes_every_check() -> None:
    results = verdicts(consistent_run())
    assert len(results) == 27
    assert not [c for c in results.values() if not c.passed], [
        (c.name, c.detail, c.examples) for c in results.values() if not c.passed
    ]
    slots = results["no worker slot lost: each supervisor keeps its live workers"]
    assert "longest short stretch 0.5 s" in slots.detail
    exits = results["os._exit(0) in a handler is recovered at once, not at lease expiry"]
    assert "2 attempts recovered, max 0.05 s" in exits.detail


def _job(ev: Evidence, kind: str) -> JobRow:
    return next(j for j in ev.jobs if j.kind == kind)


def leak_completes(ev: Evidence) -> None:
    job = _job(ev, "leak_atomic")
    job.status = "completed"
    job.history = [entry(1, W_B, "completed", T0 + 11)]


def big_result_retried(ev: Evidence) -> None:
    job = _job(ev, "big_result")
    job.history.append({**job.history[0], "attempt": 2})
    job.attempts = 2
    ev.executions.append(ExecutionRow(job.id, job.token, "big_result", 2, PID_B, W_B, T0, T0))


def exit_recovered_by_the_lease(ev: Evidence) -> None:
    job = _job(ev, "exit0")
    for item in job.history:
        item["finished_at"] = iso(T0 + job.id + item["attempt"] + LEASE + 1)
        item["error"] = "Worker stopped renewing its lease"


def gil_job_ran_twice(ev: Evidence) -> None:
    job = _job(ev, "gil")
    job.history.insert(0, entry(1, W_A, "lost", T0 + 20, "stopped renewing its lease"))
    job.history[1]["attempt"] = 2
    ev.executions.append(ExecutionRow(job.id, job.token, "gil", 1, PID_A, W_A, T0 + 14, None))


def gil_within_the_lease(ev: Evidence) -> None:
    for execution in ev.executions:
        if execution.kind == "gil":
            execution.started = execution.finished - 1.0  # type: ignore[operator]


def a_kind_never_ran(ev: Evidence) -> None:
    gone = _job(ev, "fork").id
    ev.executions = [e for e in ev.executions if e.job_id != gone]


def normal_job_taken_away(ev: Evidence) -> None:
    job = _job(ev, "fast")
    job.history = [entry(1, W_B, "lost", T0 + 0.5, "was lost"), entry(2, W_A, "completed", T0 + 1)]
    ev.executions.append(ExecutionRow(1, "t1", "fast", 1, PID_B, W_B, T0 + 0.2, None))


def normal_job_ran_twice(ev: Evidence) -> None:
    ev.executions.append(ExecutionRow(1, "t1", "fast", 1, PID_B, W_B, T0 + 0.5, T0 + 0.6))


def slot_lost(ev: Evidence) -> None:
    for event in ev.events:
        if event["type"] == "slots" and event["t"] > T0 + 3:
            event["counts"]["B1"] = 2


def no_slot_counts(ev: Evidence) -> None:
    ev.events = [e for e in ev.events if e["type"] != "slots"]


def supervisor_exit_1(ev: Evidence) -> None:
    ev.events[-1]["code"] = 1


def gil_job_left_running(ev: Evidence) -> None:
    _job(ev, "gil").status = "running"


def lost_beside_an_exit(ev: Evidence, concurrency: int, after: float = 0.01) -> None:
    """Under --concurrency, a normal job and a `raise` job were in flight in other slots of
    the process an `os._exit(0)` ended: each spent an attempt there (recovered `after` the
    exit), ran again elsewhere and ended as its handler says."""
    ev.concurrency = concurrency
    exit_job = _job(ev, "exit0")
    died = next(e for e in ev.executions if e.job_id == exit_job.id and e.attempt == 1)
    recovered = died.started + after
    fast = _job(ev, "fast")
    fast.history = [
        entry(1, W_B, "lost", recovered, "Worker host:2:bbb exited with status 0"),
        entry(2, W_A, "completed", T0 + 40),
    ]
    fast.attempts = 2
    ev.executions = [e for e in ev.executions if e.job_id != fast.id]
    ev.executions += [
        ExecutionRow(fast.id, "t1", "fast", 1, PID_B, W_B, died.started - 0.01, None),
        ExecutionRow(fast.id, "t1", "fast", 2, PID_A, W_A, T0 + 39.9, T0 + 40),
    ]
    raising = _job(ev, "raise")
    first = raising.history[0]
    raising.history = [
        entry(1, W_B, "lost", recovered, "Worker host:2:bbb exited with status 0"),
        {**first, "attempt": 2, "worker": W_A},
    ]
    ev.executions = [e for e in ev.executions if e.job_id != raising.id]
    ev.executions += [
        ExecutionRow(raising.id, raising.token, "raise", 1, PID_B, W_B, died.started, None),
        ExecutionRow(raising.id, raising.token, "raise", 2, PID_A, W_A, T0 + 41, T0 + 41),
    ]


def released_beside_an_exit(ev: Evidence, after: float = 0.01, worker: str = W_B) -> None:
    """One-slot workers: the process an `os._exit(0)` ended had also claimed a normal job and
    a `raise` job and not started them; recovery handed both back unspent (`released`,
    `after` the exit), and each ran elsewhere and ended as its handler says."""
    ev.concurrency = 1
    exit_job = _job(ev, "exit0")
    died = next(e for e in ev.executions if e.job_id == exit_job.id and e.attempt == 1)
    recovered = died.started + after
    lost = f"Worker {worker} was lost (exited with status 0) before starting it."
    fast = _job(ev, "fast")
    fast.history = [entry(1, worker, "released", recovered, lost), *fast.history]
    raising = _job(ev, "raise")
    raising.history = [entry(1, worker, "released", recovered, lost), *raising.history]


@pytest.mark.parametrize(
    "beside",
    [partial(lost_beside_an_exit, concurrency=4), released_beside_an_exit],
    ids=["under-concurrency-started-ones-spend-an-attempt", "one-slot-held-ones-go-back-unspent"],
)
def test_jobs_an_exit_took_away_are_no_fault(beside: Callable[[Evidence], None]) -> None:
    """Under --concurrency, jobs in flight in the other slots of a process an `os._exit(0)`
    ended spend an attempt; at any concurrency, the jobs it had claimed (up to BATCH_SIZE)
    and not started come back `released`. Neither is a fault."""
    evidence = copy.deepcopy(consistent_run())
    beside(evidence)
    results = verdicts(evidence)
    assert not [c for c in results.values() if not c.passed], [
        (c.name, c.detail, c.examples) for c in results.values() if not c.passed
    ]
    assert "1 attempts ended beside an exit" in results[NORMAL].detail


@pytest.mark.parametrize(
    "beside",
    [
        partial(lost_beside_an_exit, concurrency=1),
        partial(lost_beside_an_exit, concurrency=4, after=LEASE),
        partial(released_beside_an_exit, after=LEASE),
        partial(released_beside_an_exit, worker=W_A),
    ],
    ids=[
        "lost-with-one-slot-workers",
        "lost-recovered-by-the-lease",
        "released-recovered-by-the-lease",
        "released-in-another-worker",
    ],
)
def test_a_job_taken_away_otherwise_still_fails(beside: Callable[[Evidence], None]) -> None:
    """Without slots nothing runs beside an exit; an attempt recovered long after the exit,
    or taken away in a worker no exit ended, was not the exit's."""
    evidence = copy.deepcopy(consistent_run())
    beside(evidence)
    results = verdicts(evidence)
    assert not results[NORMAL].passed
    assert not results[ENDS].passed


ENDS = "each misbehaving job ended as documented, with its error"
HAPPENED = "every misbehaving handler ran"
EXIT = "os._exit(0) in a handler is recovered at once, not at lease expiry"
NORMAL = "normal jobs ran exactly once per recorded attempt, completed once"
SLOTS = "no worker slot lost: each supervisor keeps its live workers"


@pytest.mark.parametrize(
    ("breakage", "check"),
    [
        (leak_completes, ENDS),
        (big_result_retried, ENDS),
        (exit_recovered_by_the_lease, EXIT),
        (exit_recovered_by_the_lease, ENDS),
        (gil_job_ran_twice, ENDS),
        (gil_within_the_lease, HAPPENED),
        (a_kind_never_ran, HAPPENED),
        (normal_job_taken_away, NORMAL),
        (normal_job_ran_twice, NORMAL),
        (slot_lost, SLOTS),
        (no_slot_counts, SLOTS),
        (supervisor_exit_1, "supervisors given SIGTERM exited cleanly and in time"),
        (gil_job_left_running, "no job stuck running"),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_each_misbehaviour_that_costs_too_much_fails_its_check(
    breakage: Callable[[Evidence], None], check: str
) -> None:
    evidence = copy.deepcopy(consistent_run())
    breakage(evidence)
    results = verdicts(evidence)
    assert check in results, check
    assert not results[check].passed, results[check].detail
