"""Property-based tests of the job state machine: the pure rules, then the real database.

The database part drives random sequences of claim / complete / fail / release / stop /
unclaim / park / lease renewal / lease expiry / worker death / requeue / cancel / run-now /
purge through runtime/transitions.py and operations.py and the vendor's claimer, with several
workers and a logical clock. Every exit from `running` goes through the vendor's one door
(`QueueDatabase.leave_running`), the path a worker takes, for one job and for batches. After
every step it compares the whole table before and after against what the step may do:
- every status change is an arrow of states.TRANSITIONS;
- no job disappears except finished ones, by a purge;
- a claim hands out exactly the due jobs, best first;
- a worker's write succeeds exactly when it still holds that attempt's lease, and a stale
  handle (a zombie's) changes nothing at all (fencing);
- attempts never exceed max_attempts, and lease columns are set exactly while running (a
  parked job keeps the parked owner's mark, and no lease).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from django_sqlqueue import operations
from django_sqlqueue.backoff import MAX_DELAY, Backoff, compute_delay
from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.claiming import Claimer
from django_sqlqueue.models import Job
from django_sqlqueue.registry import registry
from django_sqlqueue.rows import ClaimedJob
from django_sqlqueue.runtime import transitions
from django_sqlqueue.states import (
    CANCELLABLE,
    CLAIMABLE,
    FINISHED,
    PARKED_OWNER,
    REQUEUEABLE,
    TRANSITIONS,
    Status,
    can_transition,
    status_after_failure,
    summarize,
)

# ---------------------------------------------------------------------------- pure rules

statuses = st.sampled_from(list(Status))


@given(statuses, statuses)
def test_can_transition_is_exactly_the_table(current: Status, target: Status) -> None:
    assert can_transition(current, target) == (target in TRANSITIONS[current])
    assert can_transition(current.value, target.value) == can_transition(current, target)


@given(st.text(), st.text())
def test_unknown_statuses_go_nowhere(current: str, target: str) -> None:
    known = {s.value for s in Status}
    if current not in known or target not in known:
        assert not can_transition(current, target)


def _reachable(start: Status) -> set[str]:
    seen, todo = {start.value}, deque([start.value])
    while todo:
        for target in TRANSITIONS[todo.popleft()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@given(statuses)
def test_every_status_can_still_finish_and_be_reached_from_pending(status: Status) -> None:
    """No dead end and no orphan: a job can always get to a finished state, and every
    state is reachable from a fresh job."""
    assert _reachable(status) & {s.value for s in FINISHED}
    assert status.value in _reachable(Status.PENDING)


@given(statuses)
def test_status_groups_agree_with_the_arrows(status: Status) -> None:
    assert (status in CLAIMABLE) == can_transition(status, Status.RUNNING)
    # A running job reaches cancelled too, when its worker stops it on request.
    assert (status in CANCELLABLE or status == Status.RUNNING) == can_transition(
        status, Status.CANCELLED
    )
    if status in REQUEUEABLE:
        assert can_transition(status, Status.PENDING)
    if status in FINISHED:
        # A requeue; a job abandoned by a failed dependency also waits again (REWAIT).
        rewait = {Status.WAITING} if status == Status.CANCELLED else set()
        assert TRANSITIONS[status] == {Status.PENDING, *rewait}


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=10**6))
def test_a_failure_retries_exactly_while_attempts_are_left(
    attempts: int, max_attempts: int
) -> None:
    outcome = status_after_failure(attempts, max_attempts)
    assert (outcome == Status.FAILED) == (attempts < max_attempts)
    assert can_transition(Status.RUNNING, outcome)


@given(st.lists(st.tuples(statuses, st.integers(min_value=0, max_value=10**6))))
def test_summaries_keep_every_count(rows: list[tuple[Status, int]]) -> None:
    summary = summarize(rows)
    assert list(summary) == [s.value for s in Status]
    assert sum(summary.values()) == sum(count for _, count in rows)


backoffs = st.builds(
    Backoff,
    base=st.floats(min_value=0, max_value=1e9),
    cap=st.floats(min_value=0, max_value=1e12),
    jitter=st.floats(min_value=0, max_value=1),
)
any_attempt = st.integers(min_value=-10, max_value=10**12)


@given(backoffs, any_attempt, st.floats(min_value=0, max_value=1))
def test_backoff_delay_stays_between_its_bounds(backoff: Backoff, attempt: int, u: float) -> None:
    low, high = backoff.bounds(attempt)
    delay = backoff.delay(attempt, rng=lambda: u)
    assert 0 <= low <= high <= backoff.cap
    assert low <= delay <= high or math.isclose(delay, low) or math.isclose(delay, high)


@given(backoffs, st.integers(min_value=1, max_value=200))
def test_backoff_never_shrinks_with_more_attempts(backoff: Backoff, attempt: int) -> None:
    assert backoff.bounds(attempt + 1)[1] >= backoff.bounds(attempt)[1]
    assert backoff.bounds(attempt + 1)[0] >= backoff.bounds(attempt)[0]


def _weird_callable(value: Any) -> Any:
    def spec(attempt: int) -> Any:
        if isinstance(value, BaseException):
            raise value
        return value

    return spec


backoff_specs = st.one_of(
    st.none(),
    backoffs,
    st.floats(min_value=0, max_value=1e300),
    st.integers(min_value=0, max_value=10**30),
    st.sampled_from(
        [
            math.nan,
            math.inf,
            -math.inf,
            -1.0,
            1e308,
            "3",
            None,
            ValueError("no"),
            ZeroDivisionError(),
        ]
    ).map(_weird_callable),
    st.floats(allow_nan=True, allow_infinity=True).map(_weird_callable),
)


@given(backoff_specs, any_attempt, backoffs)
def test_any_accepted_backoff_gives_a_usable_delay(
    spec: Any, attempt: int, default: Backoff
) -> None:
    """Whatever a job's backoff returns, the retry lands at a finite, non-negative time."""
    delay = compute_delay(spec, attempt, default)
    assert isinstance(delay, float)
    assert math.isfinite(delay)
    assert 0.0 <= delay <= MAX_DELAY


# ---------------------------------------------------------------------------- the database

WORKER_SLOTS = 3
#: Columns compared to tell "changed nothing" (every concrete column of the row).
COLUMNS = [f.attname for f in Job._meta.concrete_fields]

PARAMETERS = {
    "enqueue": st.tuples(
        st.integers(min_value=-2, max_value=2),  # priority
        st.integers(min_value=1, max_value=3),  # max_attempts
        st.sampled_from([0.0, 0.0, 3.0]),  # delay
    ),
    "claim": st.tuples(
        st.integers(0, WORKER_SLOTS - 1),
        st.integers(1, 3),  # limit
        st.sampled_from([1.0, 1.0, 5.0, 60.0]),  # lease seconds
    ),
    "complete": st.tuples(st.integers(0, 50)),  # which unreported handle
    "complete_batch": st.tuples(st.integers(0, WORKER_SLOTS - 1)),
    "fail": st.tuples(st.integers(0, 50), st.booleans()),  # discard?
    "release": st.tuples(st.integers(0, 50)),
    "release_batch": st.tuples(st.integers(0, WORKER_SLOTS - 1)),
    "stop": st.tuples(st.integers(0, 50)),
    "unclaim": st.tuples(st.integers(0, WORKER_SLOTS - 1)),
    "park": st.tuples(st.integers(0, WORKER_SLOTS - 1), st.sampled_from([0.0, 3.0])),
    "renew": st.tuples(st.integers(0, WORKER_SLOTS - 1), st.sampled_from([1.0, 60.0])),
    "keep_leases": st.tuples(st.sampled_from([1.0, 60.0])),
    "tick": st.tuples(st.sampled_from([0.5, 2.0, 2.0, 10.0, 90.0])),
    "expire_leases": st.tuples(),
    "worker_dies": st.tuples(st.integers(0, WORKER_SLOTS - 1), st.booleans()),
    "requeue": st.tuples(st.integers(0, 2**8 - 1)),  # which jobs, as a bit mask
    "cancel": st.tuples(st.integers(0, 2**8 - 1)),
    "run_now": st.tuples(st.integers(0, 2**8 - 1)),
    "purge": st.tuples(
        st.lists(st.sampled_from([s.value for s in FINISHED]), min_size=1, unique=True)
    ),
}
#: Weighted towards a worker's life (claims, reports, time passing), where fencing matters.
WEIGHTS = {"enqueue": 4, "claim": 4, "complete": 2, "fail": 2, "tick": 3, "expire_leases": 3}
#: A job claimed by worker 0 under a 1 s lease, lost when its lease expires, and claimed
#: again by worker 1: worker 0 is now a zombie holding a stale handle (handle number 0).
ZOMBIE = [
    ("enqueue", 0, 3, 0.0),
    ("claim", 0, 1, 1.0),
    ("tick", 2.0),
    ("expire_leases",),
    ("tick", 10.0),
    ("claim", 1, 1, 60.0),
]
ops = st.sampled_from([name for name in PARAMETERS for _ in range(WEIGHTS.get(name, 1))]).flatmap(
    lambda name: PARAMETERS[name].map(lambda params: (name, *params))
)


def note(what: str) -> None:
    """Count how often a path was taken (shown by --hypothesis-show-statistics)."""
    if currently_in_test_context():
        event(what)


def lost_attempt_status(row: dict[str, Any]) -> str:
    """Where recovery sends a running job whose worker is gone: cancelled if someone asked
    it to stop, else a retry or the dead letter."""
    if row["cancel_requested_at"] is not None:
        return Status.CANCELLED
    return status_after_failure(row["attempts"], row["max_attempts"])


def changed(bulk: Any) -> Any:
    """A bulk operation as a count of the jobs it changed."""
    return lambda ids, alias: bulk(ids, alias=alias).changed


def snapshot(alias: str) -> dict[int, dict[str, Any]]:
    return {row["id"]: row for row in Job.objects.using(alias).values(*COLUMNS)}


def owned(row: dict[str, Any] | None, handle: ClaimedJob) -> bool:
    """What fencing promises: a worker's write lands only while it holds this attempt."""
    return (
        row is not None
        and row["status"] == Status.RUNNING
        and row["lease_owner"] == handle.lease_owner
        and row["attempts"] == handle.attempts
    )


@dataclass
class Workers:
    """Worker processes by slot; a slot's worker that dies is replaced by a new id."""

    generation: list[int] = field(default_factory=lambda: [0] * WORKER_SLOTS)
    #: Claimed jobs each worker has not reported on yet (all of them, stale or not).
    unreported: dict[str, list[ClaimedJob]] = field(default_factory=dict)

    def worker(self, slot: int) -> str:
        return f"w{slot}g{self.generation[slot]}"

    def all_unreported(self) -> list[ClaimedJob]:
        return [h for handles in self.unreported.values() for h in handles]

    def take(self, index: int) -> ClaimedJob | None:
        """A handle to report on (each is reported once, as a real worker does)."""
        handles = self.all_unreported()
        if not handles:
            return None
        handle = handles[index % len(handles)]
        self.unreported[handle.lease_owner].remove(handle)
        return handle


class QueueRun:
    """Applies one operation, checking the table before and after it."""

    def __init__(self, alias: str, claimer: Claimer) -> None:
        self.alias = alias
        self.claimer = claimer
        self.database = queue_database(alias)
        self.clock: datetime = timezone.now()
        self.workers = Workers()
        self.noop = registry.get("tests.noop")

    # Checks shared by every step ----------------------------------------------------

    def check_invariants(self, rows: dict[int, dict[str, Any]]) -> None:
        for row in rows.values():
            assert 0 <= row["attempts"] <= row["max_attempts"], row
            running = row["status"] == Status.RUNNING
            parked = row["status"] == Status.PENDING and row["lease_owner"] == PARKED_OWNER
            assert bool(row["lease_owner"]) == (running or parked), row
            assert (row["lease_expires_at"] is not None) == running, row

    def check_step(
        self,
        before: dict[int, dict[str, Any]],
        after: dict[int, dict[str, Any]],
        changed: set[int],
        purged: set[int] = frozenset(),  # type: ignore[assignment]
    ) -> None:
        """Only `changed` rows changed, along allowed arrows; only `purged` rows are gone."""
        assert set(before) - set(after) == set(purged), "a job disappeared"
        for job_id in purged:
            assert before[job_id]["status"] in FINISHED
        for job_id, row in before.items():
            if job_id in purged:
                continue
            new = after[job_id]
            if job_id not in changed:
                assert new == row, f"job {job_id} changed unexpectedly"
            elif new["status"] != row["status"]:
                assert can_transition(row["status"], new["status"]), (row, new)
        self.check_invariants(after)

    # Operations -------------------------------------------------------------------------

    def apply(self, op: tuple[Any, ...]) -> None:
        before = snapshot(self.alias)
        getattr(self, f"op_{op[0]}")(before, *op[1:])

    def op_enqueue(self, before: dict, priority: int, max_attempts: int, delay: float) -> None:
        job = self.noop.using(
            priority=priority,
            max_attempts=max_attempts,
            run_at=self.clock + timedelta(seconds=delay),
        ).enqueue()
        after = snapshot(self.alias)
        assert set(after) - set(before) == {job.pk}
        assert after[job.pk]["status"] == Status.PENDING
        self.check_step(before, after, changed=set())

    def op_claim(self, before: dict, slot: int, limit: int, lease: float) -> None:
        worker = self.workers.worker(slot)
        if self.workers.unreported.get(worker):
            return  # a worker reports on its batch before it claims again
        due = sorted(
            (r for r in before.values() if r["status"] in CLAIMABLE and r["run_at"] <= self.clock),
            key=lambda r: (-r["priority"], r["run_at"], r["id"]),
        )
        expected = [r["id"] for r in due[:limit]]
        claimed = self.claimer.claim(worker, None, limit, lease, self.clock)
        assert [job.id for job in claimed] == expected, "the claim must take the best due jobs"
        after = snapshot(self.alias)
        for job in claimed:
            row = after[job.id]
            assert row["status"] == Status.RUNNING and row["lease_owner"] == worker
            assert row["attempts"] == before[job.id]["attempts"] + 1 == job.attempts
            assert row["lease_expires_at"] == self.clock + timedelta(seconds=lease)
        self.workers.unreported[worker] = list(claimed)
        note(f"claim took {len(claimed)} jobs")
        self.check_step(before, after, changed=set(expected))

    def _report(self, before: dict, handle: ClaimedJob | None, write: Any, expected: Any) -> None:
        """Run a worker's write; it must land exactly when the worker still owns the job."""
        if handle is None:
            return
        mine = owned(before.get(handle.id), handle)
        result = write(handle)
        after = snapshot(self.alias)
        assert bool(result) == mine, f"fencing: owned={mine} but the write returned {result!r}"
        note("a worker's write landed" if mine else "a stale worker's write was fenced off")
        if not mine:
            self.check_step(before, after, changed=set())  # a stale handle changes nothing
            return
        row = after[handle.id]
        assert row["status"] == expected(before[handle.id]), (before[handle.id], row)
        assert row["lease_owner"] == "" and row["lease_expires_at"] is None
        entries = row["history"]
        assert len(entries) == len(before[handle.id]["history"]) + 1
        assert entries[-1]["worker"] == handle.lease_owner
        self.check_step(before, after, changed={handle.id})

    def op_complete(self, before: dict, index: int) -> None:
        self._report(
            before,
            self.workers.take(index),
            lambda h: transitions.complete(h, {"ok": h.id}, now=self.clock, alias=self.alias),
            lambda row: Status.COMPLETED,
        )

    def op_fail(self, before: dict, index: int, discard: bool) -> None:
        def outcome(row: dict[str, Any]) -> Status:
            return (
                Status.DEAD
                if discard
                else status_after_failure(row["attempts"], row["max_attempts"])
            )

        self._report(
            before,
            self.workers.take(index),
            lambda h: transitions.fail(
                h, "boom", discard=discard, now=self.clock, alias=self.alias
            ),
            outcome,
        )

    def op_release(self, before: dict, index: int) -> None:
        handle = self.workers.take(index)
        self._report(
            before,
            handle,
            lambda h: transitions.release(h, "handed back", alias=self.alias),
            lambda row: Status.PENDING,
        )
        if handle is not None and owned(before.get(handle.id), handle):
            assert snapshot(self.alias)[handle.id]["attempts"] == handle.attempts - 1

    def op_stop(self, before: dict, index: int) -> None:
        self._report(
            before,
            self.workers.take(index),
            lambda h: transitions.stop(h, "cancelled while running", alias=self.alias),
            lambda row: Status.CANCELLED,
        )

    def _batch(self, before: dict, slot: int, write: Any) -> tuple[set[int], dict, str]:
        """A batch exit of one worker's handles: it lands on exactly the ones it owns."""
        worker = self.workers.worker(slot)
        handles = self.workers.unreported.pop(worker, [])
        mine = {h.id for h in handles if owned(before.get(h.id), h)}
        written = write(worker, handles) if handles else 0
        after = snapshot(self.alias)
        count = written if isinstance(written, int) else len(written)
        assert count == len(mine), "a batch exit must write exactly the owned jobs"
        if not isinstance(written, int):
            assert written == mine
        note(f"batch exit: {min(len(mine), 2)}+ of {min(len(handles), 2)}+ owned")
        self.check_step(before, after, changed=mine)
        return mine, after, worker

    def op_complete_batch(self, before: dict, slot: int) -> None:
        mine, after, worker = self._batch(
            before,
            slot,
            lambda worker, handles: transitions.complete_many(
                [(h, None) for h in handles], now=self.clock, alias=self.alias
            ),
        )
        for job_id in mine:
            assert after[job_id]["status"] == Status.COMPLETED
            assert after[job_id]["history"][-1]["worker"] == worker

    def op_release_batch(self, before: dict, slot: int) -> None:
        mine, after, _ = self._batch(
            before,
            slot,
            lambda worker, handles: transitions.release_many(handles, "shutdown", alias=self.alias),
        )
        for job_id in mine:
            assert after[job_id]["status"] == Status.PENDING
            assert after[job_id]["attempts"] == before[job_id]["attempts"] - 1
            assert after[job_id]["history"][-1]["outcome"] == "released"

    def op_unclaim(self, before: dict, slot: int) -> None:
        """The surplus of a claim goes back as if never claimed: no entry, place kept."""
        mine, after, _ = self._batch(before, slot, self.claimer.unclaim)
        for job_id in mine:
            row, new = before[job_id], after[job_id]
            assert (new["status"], new["lease_owner"]) == (Status.PENDING, "")
            assert new["attempts"] == row["attempts"] - 1
            assert (new["history"], new["run_at"]) == (row["history"], row["run_at"])

    def op_park(self, before: dict, slot: int, delay: float) -> None:
        """A claim over a flow limit parks its jobs: unspent, due again at `run_at`."""
        due = self.clock + timedelta(seconds=delay)
        mine, after, _ = self._batch(
            before, slot, lambda worker, handles: self.claimer.park(worker, handles, due)
        )
        for job_id in mine:
            row, new = before[job_id], after[job_id]
            assert (new["status"], new["lease_owner"]) == (Status.PENDING, PARKED_OWNER)
            assert (new["attempts"], new["run_at"]) == (row["attempts"] - 1, due)
            assert new["history"] == row["history"]

    def op_keep_leases(self, before: dict, lease: float) -> None:
        """The supervisor's renewal of the jobs its working children run (lease_keeper.py):
        one statement of (job, owner) pairs, which moves only the pairs still running so."""
        handles = self.workers.all_unreported()
        pairs = [(h.id, h.lease_owner) for h in handles]
        held = {
            h.id
            for h in handles
            if before[h.id]["status"] == Status.RUNNING
            and before[h.id]["lease_owner"] == h.lease_owner
        }
        assert self.database.renew_leases(pairs, lease, self.clock) == len(held)
        after = snapshot(self.alias)
        for job_id in held:
            changed = {k for k in COLUMNS if after[job_id][k] != before[job_id][k]}
            assert changed <= {"lease_expires_at", "updated_at"}, changed
            assert after[job_id]["lease_expires_at"] == self.clock + timedelta(seconds=lease)
        self.check_step(before, after, changed=held)

    def op_renew(self, before: dict, slot: int, lease: float) -> None:
        """The heartbeat: renews the leases a worker holds, and no one else's."""
        worker = self.workers.worker(slot)
        ids = [h.id for h in self.workers.unreported.get(worker, [])]
        held = {i for i in ids if owned(before.get(i), self._handle(worker, i))}
        assert transitions.renew_leases(worker, ids, lease, alias=self.alias) == len(held)
        after = snapshot(self.alias)
        for job_id in held:
            changed = {k for k in COLUMNS if after[job_id][k] != before[job_id][k]}
            assert changed <= {"lease_expires_at", "updated_at"}, changed
        self.check_step(before, after, changed=held)

    def _handle(self, worker: str, job_id: int) -> ClaimedJob:
        return next(h for h in self.workers.unreported[worker] if h.id == job_id)

    def op_tick(self, before: dict, seconds: float) -> None:
        self.clock += timedelta(seconds=seconds)

    def op_expire_leases(self, before: dict) -> None:
        expired = {
            job_id
            for job_id, row in before.items()
            if row["status"] == Status.RUNNING and row["lease_expires_at"] < self.clock
        }
        counts = transitions.recover_expired_leases(alias=self.alias, now=self.clock)
        after = snapshot(self.alias)
        assert sum(counts.values()) == len(expired)
        note(f"lease expiry recovered {min(len(expired), 2)}+ jobs")
        for job_id in expired:
            row = before[job_id]
            assert after[job_id]["status"] == lost_attempt_status(row)
            assert after[job_id]["attempts"] == row["attempts"]  # the lost attempt is spent
            expected = "cancelled" if row["cancel_requested_at"] else "lost"
            assert after[job_id]["history"][-1]["outcome"] == expected
        self.check_step(before, after, changed=expired)

    def op_worker_dies(self, before: dict, slot: int, was_running: bool) -> None:
        worker = self.workers.worker(slot)
        handles = self.workers.unreported.pop(worker, [])
        self.workers.generation[slot] += 1  # a dead worker's id never comes back
        held = {
            i
            for i, r in before.items()
            if r["status"] == Status.RUNNING and r["lease_owner"] == worker
        }
        running = handles[0].id if was_running and handles else 0
        transitions.recover_worker(worker, "killed", running=running, alias=self.alias)
        after = snapshot(self.alias)
        for job_id in held:
            row, new = before[job_id], after[job_id]
            if job_id == running:
                assert new["status"] == lost_attempt_status(row)
            else:
                assert new["status"] == Status.PENDING
                assert new["attempts"] == row["attempts"] - 1  # never started: not spent
        self.check_step(before, after, changed=held)

    def _chosen(self, before: dict, mask: int) -> list[int]:
        return [job_id for n, job_id in enumerate(sorted(before)) if mask >> (n % 8) & 1]

    def _bulk(
        self, before: dict, mask: int, action: Any, allowed: tuple, target: Status | None
    ) -> None:
        ids = self._chosen(before, mask)
        eligible = {i for i in ids if before[i]["status"] in allowed}
        count = action(ids, alias=self.alias)
        after = snapshot(self.alias)
        assert count == len(eligible)
        if target is not None:
            assert all(after[i]["status"] == target for i in eligible)
        self.check_step(before, after, changed=eligible)

    def op_requeue(self, before: dict, mask: int) -> None:
        self._bulk(before, mask, changed(operations.requeue_many), REQUEUEABLE, Status.PENDING)

    def op_cancel(self, before: dict, mask: int) -> None:
        """Waiting jobs are cancelled at once; running ones are asked to stop (their status
        stays until their worker, or recovery, stops them)."""
        ids = self._chosen(before, mask)
        waiting = {i for i in ids if before[i]["status"] in CANCELLABLE}
        asked = {
            i
            for i in ids
            if before[i]["status"] == Status.RUNNING and before[i]["cancel_requested_at"] is None
        }
        done = operations.cancel_many(ids, alias=self.alias)
        after = snapshot(self.alias)
        assert (done.changed, done.stopping) == (len(waiting), len(asked))
        assert all(after[i]["status"] == Status.CANCELLED for i in waiting)
        assert all(after[i]["cancel_requested_at"] is not None for i in asked)
        assert all(after[i]["status"] == Status.RUNNING for i in asked)
        self.check_step(before, after, changed=waiting | asked)

    def op_run_now(self, before: dict, mask: int) -> None:
        self._bulk(before, mask, changed(operations.run_now_many), CLAIMABLE, None)

    def op_purge(self, before: dict, statuses: list[str]) -> None:
        expected = {i for i, r in before.items() if r["status"] in statuses}
        deleted = operations.purge(operations.purgeable(statuses=statuses, alias=self.alias))
        after = snapshot(self.alias)
        assert deleted == len(expected)
        self.check_step(before, after, changed=set(), purged=expected)


@pytest.mark.django_db
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(operations=[*ZOMBIE, ("complete", 0), ("complete", 0)])
@example(operations=[*ZOMBIE, ("complete_batch", 0), ("fail", 0, False)])
@example(operations=[*ZOMBIE, ("fail", 0, True), ("release", 0)])
@example(operations=[*ZOMBIE, ("release", 0), ("complete_batch", 1)])
@example(operations=[*ZOMBIE, ("worker_dies", 0, True), ("worker_dies", 1, True)])
@example(operations=[*ZOMBIE, ("stop", 0), ("unclaim", 0), ("park", 1, 3.0), ("keep_leases", 60.0)])
@example(operations=[*ZOMBIE, ("release_batch", 0), ("keep_leases", 1.0), ("release_batch", 1)])
@example(
    operations=[
        *[("enqueue", p, 2, 0.0) for p in (0, 2, 1)],
        ("claim", 0, 3, 60.0),
        ("worker_dies", 0, True),  # one attempt spent, the two unstarted ones handed back
        ("claim", 1, 3, 60.0),
        ("complete_batch", 1),
        ("purge", ["completed"]),
    ]
)
@given(operations=st.lists(ops, min_size=15, max_size=50))
def test_random_operation_sequences_keep_the_queue_consistent(
    operations: list[tuple[Any, ...]], alias: str, claimer: Claimer
) -> None:
    Job.objects.using(alias).all().delete()
    run = QueueRun(alias, claimer)
    for op in operations:
        run.apply(op)
    # However the sequence went, every job is still there unless a purge removed it, and
    # nothing is running without an owner.
    run.check_invariants(snapshot(alias))
