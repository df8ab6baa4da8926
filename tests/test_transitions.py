"""Every state change (transitions.py, operations.py), driven through the vendor's real claimer.

Fencing is the point of most of these tests: a worker whose lease was taken away must not be
able to write anything over what the job's new owner does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from django_sqlqueue import operations, queries
from django_sqlqueue.attempts import AttemptOutcome
from django_sqlqueue.backoff import Backoff
from django_sqlqueue.conf import get_settings
from django_sqlqueue.models import Job
from django_sqlqueue.rows import ClaimedJob
from django_sqlqueue.runtime import transitions
from django_sqlqueue.runtime.runner import backoff_for
from django_sqlqueue.states import Status

pytestmark = pytest.mark.django_db

Claim = Callable[..., list[ClaimedJob]]


def recovered(failed: int = 0, dead: int = 0, cancelled: int = 0) -> dict[str, int]:
    """What recover_expired_leases() reports."""
    return {"failed": failed, "dead": dead, "cancelled": cancelled}


def row(job: Job | ClaimedJob | int) -> Job:
    pk = job if isinstance(job, int) else job.id if isinstance(job, ClaimedJob) else job.pk
    return Job.objects.using(get_settings().database).get(pk=pk)


def snapshot(job: Job | ClaimedJob | int) -> dict[str, Any]:
    """Every column of the row, to show that a refused transition changed nothing."""
    current = row(job)
    return {f.attname: getattr(current, f.attname) for f in Job._meta.concrete_fields}


def ago(seconds: float) -> datetime:
    return timezone.now() - timedelta(seconds=seconds)


def later(seconds: float) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


class TestClaim:
    def test_claim_moves_the_job_to_running_under_a_lease(
        self, make_job: Any, claim: Claim
    ) -> None:
        job = make_job(args=[1], kwargs={"a": "b"}, queue="mail", priority=3)
        now = timezone.now()
        [claimed] = claim("worker-a", lease_seconds=30, now=now)

        assert (claimed.id, claimed.name, claimed.queue) == (job.pk, "tests.noop", "mail")
        assert (claimed.args, claimed.kwargs) == ([1], {"a": "b"})
        assert (claimed.attempts, claimed.priority, claimed.max_attempts) == (1, 3, 5)
        assert claimed.lease_owner == "worker-a"
        assert claimed.history == []
        assert claimed.started_at == now  # as the row has it, without reading it back
        stored = row(job)
        assert stored.status == Status.RUNNING
        assert stored.attempts == 1
        assert stored.lease_owner == "worker-a"
        assert stored.lease_expires_at == now + timedelta(seconds=30)
        assert stored.started_at == now
        assert stored.finished_at is None

    def test_nothing_to_claim(self, db: None, claim: Claim) -> None:
        assert claim() == []

    def test_claim_order_is_priority_then_run_at_then_id(self, make_job: Any, claim: Claim) -> None:
        base = ago(60)
        expected = [
            make_job(priority=10, run_at=base + timedelta(seconds=5)),
            make_job(priority=5, run_at=base),
            make_job(priority=5, run_at=base + timedelta(seconds=1)),
            make_job(priority=5, run_at=base + timedelta(seconds=1)),  # same: lower id first
            make_job(priority=0, run_at=base - timedelta(seconds=100)),
            make_job(priority=-10, run_at=base - timedelta(seconds=200)),
        ]
        # Insert order must not matter: shuffle ids by inserting a top job last.
        expected.insert(0, make_job(priority=100, run_at=base + timedelta(seconds=30)))
        claimed_one_by_one = [claim(f"w{n}")[0].id for n in range(len(expected))]
        assert claimed_one_by_one == [job.pk for job in expected]
        assert claim() == []

    def test_a_batch_comes_back_in_claim_order(self, make_job: Any, claim: Claim) -> None:
        low = make_job(priority=-1)
        high = make_job(priority=50)
        middle = make_job(priority=0)
        assert [job.id for job in claim(limit=10)] == [high.pk, middle.pk, low.pk]

    def test_limit_is_respected(self, make_job: Any, claim: Claim) -> None:
        for _ in range(5):
            make_job()
        assert len(claim(limit=2)) == 2
        assert Job.objects.filter(status=Status.RUNNING).count() == 2
        assert len(claim(limit=10)) == 3

    def test_future_run_at_is_not_claimed(self, make_job: Any, claim: Claim) -> None:
        future = make_job(run_at=later(60), priority=100)
        due = make_job(run_at=ago(1))
        assert [job.id for job in claim(limit=10)] == [due.pk]
        assert row(future).status == Status.PENDING
        assert [job.id for job in claim(now=later(61))] == [future.pk]

    def test_run_at_equal_to_now_is_due(self, make_job: Any, claim: Claim) -> None:
        now = timezone.now()
        job = make_job(run_at=now)
        assert [c.id for c in claim(now=now)] == [job.pk]

    def test_queue_filter(self, make_job: Any, claim: Claim) -> None:
        mail = make_job(queue="mail")
        reports = make_job(queue="reports", priority=100)
        other = make_job(queue="other", priority=50)
        assert [job.id for job in claim(queues=["mail"], limit=10)] == [mail.pk]
        assert [job.id for job in claim(queues=["mail", "other"], limit=10)] == [other.pk]
        assert [job.id for job in claim(queues=None, limit=10)] == [reports.pk]

    @pytest.mark.parametrize(
        "status", [s for s in Status if s not in (Status.PENDING, Status.FAILED)]
    )
    def test_only_pending_and_failed_are_claimed(
        self, make_job: Any, claim: Claim, status: Status
    ) -> None:
        make_job(status=status, run_at=ago(10))
        assert claim(limit=10) == []

    def test_failed_job_is_claimed_again_once_due(self, make_job: Any, claim: Claim) -> None:
        job = make_job(status=Status.FAILED, attempts=2, run_at=ago(1))
        [claimed] = claim()
        assert claimed.id == job.pk
        assert claimed.attempts == 3

    def test_two_workers_never_get_the_same_job(self, make_job: Any, claim: Claim) -> None:
        for _ in range(6):
            make_job()
        first = {job.id for job in claim("a", limit=4)}
        second = {job.id for job in claim("b", limit=4)}
        assert len(first) == 4
        assert len(second) == 2
        assert not first & second

    def test_finished_rows_are_never_claimed(self, make_job: Any, claim: Claim) -> None:
        """Finished rows, whatever their run_at, never come back through a claim."""
        for status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED):
            make_job(status=status, run_at=ago(1000), priority=100)
        due = make_job(priority=-100)
        assert [job.id for job in claim(limit=10)] == [due.pk]


class TestComplete:
    def test_running_to_completed(self, make_job: Any, claim: Claim) -> None:
        job = make_job()
        [claimed] = claim("worker-a")
        started = row(job).started_at
        finished = timezone.now()
        assert transitions.complete(claimed, {"sent": 3}, now=finished) is True

        stored = row(job)
        assert stored.status == Status.COMPLETED
        assert stored.result == {"sent": 3}
        assert stored.finished_at == finished
        assert stored.lease_owner == ""
        assert stored.lease_expires_at is None
        assert stored.attempts == 1
        [entry] = stored.history
        assert entry["attempt"] == 1
        assert entry["worker"] == "worker-a"
        assert entry["outcome"] == "completed"
        assert datetime.fromisoformat(entry["started_at"]) == started
        assert datetime.fromisoformat(entry["finished_at"]) == finished
        assert stored.duration == (finished - started).total_seconds()

    def test_completing_twice_is_refused(self, make_job: Any, claim: Claim) -> None:
        make_job()
        [claimed] = claim()
        assert transitions.complete(claimed, 1) is True
        before = snapshot(claimed)
        assert transitions.complete(claimed, 2) is False
        assert snapshot(claimed) == before


class TestFail:
    def test_failure_with_attempts_left_schedules_a_retry(
        self, make_job: Any, claim: Claim
    ) -> None:
        job = make_job(max_attempts=3)
        [claimed] = claim("worker-a")
        now = timezone.now()
        status = transitions.fail(claimed, "ValueError: boom", "Traceback ...", now=now)
        assert status == Status.FAILED

        stored = row(job)
        assert stored.status == Status.FAILED
        assert stored.last_error == "ValueError: boom"
        assert stored.finished_at is None
        assert stored.lease_owner == ""
        assert stored.lease_expires_at is None
        low, high = get_settings().backoff.bounds(1)
        assert now + timedelta(seconds=low) <= stored.run_at <= now + timedelta(seconds=high)
        [entry] = stored.history
        assert entry["outcome"] == "error"
        assert entry["error"] == "ValueError: boom"
        assert entry["traceback"] == "Traceback ..."
        assert entry["worker"] == "worker-a"

    @pytest.mark.parametrize("attempt", [1, 2, 3, 4])
    def test_retry_delay_stays_within_the_backoff_bounds(
        self, make_job: Any, claim: Claim, attempt: int
    ) -> None:
        job = make_job(max_attempts=10, attempts=attempt - 1)
        [claimed] = claim()
        assert claimed.attempts == attempt
        now = timezone.now()
        transitions.fail(claimed, "boom", now=now)
        low, high = get_settings().backoff.bounds(attempt)
        delay = (row(job).run_at - now).total_seconds()
        assert low <= delay <= high

    def test_handler_backoff_replaces_the_default(self, make_job: Any, claim: Claim) -> None:
        job = make_job(attempts=2)
        [claimed] = claim()
        now = timezone.now()
        backoff = Backoff(base=10, cap=1000, jitter=0)
        transitions.fail(claimed, "boom", backoff=backoff, now=now)
        assert row(job).run_at == now + timedelta(seconds=40)  # 10 * 2**(3 - 1)

    def test_retry_delay_replaces_the_backoff(self, make_job: Any, claim: Claim) -> None:
        job = make_job()
        [claimed] = claim()
        now = timezone.now()
        status = transitions.fail(claimed, "not yet", retry_delay=7.5, outcome="retry", now=now)
        assert status == Status.FAILED
        stored = row(job)
        assert stored.run_at == now + timedelta(seconds=7.5)
        assert stored.history[-1]["outcome"] == "retry"

    def test_failed_job_is_not_claimed_before_its_retry(self, make_job: Any, claim: Claim) -> None:
        make_job()
        [claimed] = claim()
        transitions.fail(claimed, "boom", retry_delay=60)
        assert claim() == []
        assert [c.id for c in claim(now=later(61))] == [claimed.id]

    def test_last_attempt_goes_dead(self, make_job: Any, claim: Claim) -> None:
        job = make_job(max_attempts=2, attempts=1)
        [claimed] = claim("worker-b")
        now = timezone.now()
        run_at_before = row(job).run_at
        assert transitions.fail(claimed, "final", now=now) == Status.DEAD
        stored = row(job)
        assert stored.status == Status.DEAD
        assert stored.finished_at == now
        assert stored.run_at == run_at_before, "a dead job gets no retry time"
        assert stored.attempts == 2
        assert stored.last_error == "final"
        assert stored.history[-1]["attempt"] == 2

    def test_retry_delay_cannot_save_the_last_attempt(self, make_job: Any, claim: Claim) -> None:
        make_job(max_attempts=1)
        [claimed] = claim()
        assert transitions.fail(claimed, "again", retry_delay=1) == Status.DEAD

    def test_discard_goes_dead_with_attempts_left(self, make_job: Any, claim: Claim) -> None:
        job = make_job(max_attempts=5)
        [claimed] = claim()
        status = transitions.fail(claimed, "obsolete", discard=True, outcome=AttemptOutcome.DISCARD)
        assert status == Status.DEAD
        stored = row(job)
        assert (stored.status, stored.attempts) == (Status.DEAD, 1)
        assert stored.finished_at is not None
        assert stored.history[-1]["outcome"] == "discard"

    def test_history_accumulates_over_attempts(self, make_job: Any, claim: Claim) -> None:
        job = make_job(max_attempts=3)
        for attempt, worker in enumerate(["w1", "w2", "w3"], start=1):
            [claimed] = claim(worker, now=later(attempt * 100))
            transitions.fail(claimed, f"error {attempt}")
        stored = row(job)
        assert stored.status == Status.DEAD
        assert [e["attempt"] for e in stored.history] == [1, 2, 3]
        assert [e["worker"] for e in stored.history] == ["w1", "w2", "w3"]
        assert [e["error"] for e in stored.history] == ["error 1", "error 2", "error 3"]

    def test_huge_backoff_does_not_leave_the_job_running(self, make_job: Any, claim: Claim) -> None:
        """A callable backoff may return any number; the job must still leave `running`."""
        job = make_job(max_attempts=5)
        [claimed] = claim()
        status = transitions.fail(claimed, "boom", backoff=lambda n: 1e12)
        assert status in (Status.FAILED, Status.DEAD)
        assert row(job).status == status


class TestRelease:
    def test_release_hands_the_job_back_without_spending_the_attempt(
        self, make_job: Any, claim: Claim
    ) -> None:
        job = make_job(max_attempts=1, run_at=ago(100))
        [claimed] = claim("worker-a")
        before = timezone.now()
        assert transitions.release(claimed, "worker shutting down") is True
        stored = row(job)
        assert stored.status == Status.PENDING
        assert stored.attempts == 0
        assert stored.run_at >= before
        assert stored.lease_owner == ""
        assert stored.lease_expires_at is None
        assert stored.history[-1]["outcome"] == "released"
        assert stored.history[-1]["error"] == "worker shutting down"
        # With max_attempts=1 the job is claimable again: the attempt was given back.
        [again] = claim("worker-b")
        assert (again.id, again.attempts) == (job.pk, 1)


class TestFencing:
    """A zombie worker's late result must not overwrite the new owner's state."""

    @pytest.fixture
    def stolen(self, make_job: Any, claim: Claim) -> tuple[ClaimedJob, ClaimedJob]:
        """(zombie's claim, new owner's claim) of one job whose first lease expired."""
        make_job(max_attempts=5)
        [zombie] = claim("zombie", lease_seconds=1)
        counts = transitions.recover_expired_leases(now=later(2))
        assert counts == recovered(failed=1, dead=0)
        [owner] = claim("owner", now=later(3600))
        assert owner.id == zombie.id
        assert owner.attempts == 2
        return zombie, owner

    def test_complete_from_the_zombie_changes_nothing(self, stolen: Any) -> None:
        zombie, owner = stolen
        before = snapshot(owner)
        assert transitions.complete(zombie, "late") is False
        assert snapshot(owner) == before
        assert row(owner).lease_owner == "owner"

    def test_fail_from_the_zombie_changes_nothing(self, stolen: Any) -> None:
        zombie, owner = stolen
        before = snapshot(owner)
        assert transitions.fail(zombie, "late error") is None
        assert transitions.fail(zombie, "late discard", discard=True) is None
        assert snapshot(owner) == before

    def test_release_from_the_zombie_changes_nothing(self, stolen: Any) -> None:
        zombie, owner = stolen
        before = snapshot(owner)
        assert transitions.release(zombie, "zombie shutting down") is False
        assert snapshot(owner) == before

    def test_the_new_owner_still_finishes(self, stolen: Any) -> None:
        zombie, owner = stolen
        transitions.complete(zombie, "late")
        assert transitions.complete(owner, "on time") is True
        stored = row(owner)
        assert (stored.status, stored.result) == (Status.COMPLETED, "on time")
        assert [e["worker"] for e in stored.history] == ["zombie", "owner"]
        assert [e["outcome"] for e in stored.history] == ["lost", "completed"]

    def test_same_worker_id_with_an_older_attempt_is_fenced(
        self, make_job: Any, claim: Claim
    ) -> None:
        """A worker id alone is not enough: the attempt number fences a restarted worker too."""
        make_job(max_attempts=5)
        [old] = claim("worker-a", lease_seconds=1)
        transitions.recover_expired_leases(now=later(2))
        [new] = claim("worker-a", now=later(3600))
        before = snapshot(new)
        assert transitions.complete(old, "stale") is False
        assert transitions.fail(old, "stale") is None
        assert snapshot(new) == before

    def test_after_completion_the_owner_cannot_fail_it(self, make_job: Any, claim: Claim) -> None:
        make_job()
        [claimed] = claim()
        transitions.complete(claimed, None)
        before = snapshot(claimed)
        assert transitions.fail(claimed, "too late") is None
        assert transitions.release(claimed, "too late") is False
        assert snapshot(claimed) == before

    def test_cancelled_job_cannot_be_completed_by_a_stale_claim(
        self, make_job: Any, claim: Claim
    ) -> None:
        make_job()
        [claimed] = claim()
        # A person requeues and cancels the job while the stale claim lives on.
        transitions.release(claimed, "shutdown")
        assert operations.cancel_many([claimed.id]).changed == 1
        before = snapshot(claimed)
        assert transitions.complete(claimed, "ghost") is False
        assert snapshot(claimed) == before


class TestRecovery:
    def test_expired_lease_counts_as_a_failed_attempt(self, make_job: Any, claim: Claim) -> None:
        job = make_job(max_attempts=3)
        claim("crashed", lease_seconds=5)
        assert transitions.recover_expired_leases(now=later(4)) == {
            "failed": 0,
            "dead": 0,
            "cancelled": 0,
        }
        assert row(job).status == Status.RUNNING

        before = timezone.now()
        assert transitions.recover_expired_leases(now=later(6)) == {
            "failed": 1,
            "dead": 0,
            "cancelled": 0,
        }
        stored = row(job)
        assert stored.status == Status.FAILED
        assert stored.attempts == 1
        assert stored.lease_owner == ""
        assert stored.lease_expires_at is None
        assert "crashed" in stored.last_error
        assert stored.history[-1]["outcome"] == "lost"
        assert stored.history[-1]["worker"] == "crashed"
        low, high = get_settings().backoff.bounds(1)
        assert before + timedelta(seconds=low) <= stored.run_at
        assert stored.run_at <= timezone.now() + timedelta(seconds=high)

    def test_expired_lease_with_no_attempts_left_goes_dead(
        self, make_job: Any, claim: Claim
    ) -> None:
        job = make_job(max_attempts=1)
        claim("crashed", lease_seconds=1)
        assert transitions.recover_expired_leases(now=later(2)) == {
            "failed": 0,
            "dead": 1,
            "cancelled": 0,
        }
        stored = row(job)
        assert stored.status == Status.DEAD
        assert stored.finished_at is not None

    def test_live_leases_are_left_alone(self, make_job: Any, claim: Claim) -> None:
        expiring = make_job(priority=1)
        live = make_job()
        claim("a", lease_seconds=1)
        claim("b", lease_seconds=600)
        assert transitions.recover_expired_leases(now=later(2)) == {
            "failed": 1,
            "dead": 0,
            "cancelled": 0,
        }
        assert row(expiring).status == Status.FAILED
        assert row(live).status == Status.RUNNING

    def test_recovery_uses_the_handlers_backoff(
        self, make_job: Any, claim: Claim, register_job: Any
    ) -> None:
        register_job("tests.slow_backoff", backoff=Backoff(base=1000, cap=1000, jitter=0))
        job = make_job(name="tests.slow_backoff")
        claim(lease_seconds=1)
        before = timezone.now()
        # The supervisor passes the runtime's resolver, which knows the handlers.
        transitions.recover_expired_leases(now=later(2), backoff_for=backoff_for)
        run_at = row(job).run_at
        assert before + timedelta(seconds=1000) <= run_at <= later(1000)

    def test_recovery_of_an_unregistered_job_uses_the_default_backoff(
        self, make_job: Any, claim: Claim
    ) -> None:
        job = make_job(name="tests.not_registered_anywhere")
        claim(lease_seconds=1)
        assert transitions.recover_expired_leases(now=later(2)) == {
            "failed": 1,
            "dead": 0,
            "cancelled": 0,
        }
        assert row(job).status == Status.FAILED

    def test_recover_worker_takes_only_that_workers_jobs(self, make_job: Any, claim: Claim) -> None:
        first = make_job(priority=2)
        second = make_job(priority=1)
        other = make_job()
        claim("dead-worker", limit=2)
        claim("live-worker")
        counts = transitions.recover_worker("dead-worker", "exit code -9")
        assert counts == recovered(failed=2, dead=0)
        for job in (first, second):
            stored = row(job)
            assert stored.status == Status.FAILED
            assert "exit code -9" in stored.last_error
            assert "dead-worker" in stored.last_error
        assert row(other).status == Status.RUNNING
        assert row(other).lease_owner == "live-worker"

    def test_recovering_twice_acts_once(self, make_job: Any, claim: Claim) -> None:
        job = make_job(max_attempts=5)
        claim("gone", lease_seconds=1)
        assert transitions.recover_expired_leases(now=later(2)) == {
            "failed": 1,
            "dead": 0,
            "cancelled": 0,
        }
        assert transitions.recover_expired_leases(now=later(2)) == {
            "failed": 0,
            "dead": 0,
            "cancelled": 0,
        }
        assert len(row(job).history) == 1

    def test_renew_leases_keeps_a_live_workers_jobs(self, make_job: Any, claim: Claim) -> None:
        mine = make_job(priority=1)
        theirs = make_job()
        claim("alive", lease_seconds=1)
        claim("other", lease_seconds=1)
        # A worker renews only the jobs it names, and only while it owns them.
        assert transitions.renew_leases("alive", [mine.pk, theirs.pk], 600) == 1
        assert transitions.recover_expired_leases(now=later(2)) == {
            "failed": 1,
            "dead": 0,
            "cancelled": 0,
        }
        assert row(mine).status == Status.RUNNING
        assert row(theirs).status == Status.FAILED

    def test_renew_leases_skips_claimed_rows_the_worker_never_saw(
        self, make_job: Any, claim: Claim
    ) -> None:
        """A claim whose reply was lost leaves rows the worker does not know: they expire."""
        seen = make_job(priority=1)
        lost = make_job()
        claim("alive", limit=2, lease_seconds=1)
        assert transitions.renew_leases("alive", [seen.pk], 600) == 1
        assert transitions.recover_expired_leases(now=later(2)) == {
            "failed": 1,
            "dead": 0,
            "cancelled": 0,
        }
        assert row(seen).status == Status.RUNNING
        assert row(lost).status == Status.FAILED

    def test_a_live_worker_that_has_not_beaten_since_its_lease_expired_keeps_its_jobs(
        self, make_job: Any, claim: Claim
    ) -> None:
        """A lock, not a crash: its heartbeat could not be written, so nothing is known lost."""
        unseen = make_job(priority=1)
        stalled = make_job()
        claim("no-row-yet", lease_seconds=1)
        claim("stalled", lease_seconds=1)
        sparing = {"no-row-yet": None, "stalled": timezone.now()}
        assert transitions.recover_expired_leases(now=later(2), sparing=sparing) == recovered(
            failed=0, dead=0
        )
        assert row(unseen).status == row(stalled).status == Status.RUNNING

    def test_a_live_worker_that_beat_past_a_lease_without_renewing_it_loses_that_job(
        self, make_job: Any, claim: Claim
    ) -> None:
        """A heartbeat renews every lease its worker holds before it writes `last_seen_at`: a
        lease older than the last beat is held by nobody (a claim whose reply was lost, a
        dropped batch), and only recovery brings it back."""
        held = make_job(priority=1)
        forgotten = make_job()
        claim("alive", limit=2, lease_seconds=1)
        assert transitions.renew_leases("alive", [held.pk], 600) == 1
        beat = later(1.5)
        counts = transitions.recover_expired_leases(now=later(2), sparing={"alive": beat})
        assert counts == recovered(failed=1, dead=0)
        assert row(held).status == Status.RUNNING
        assert row(forgotten).status == Status.FAILED
        assert "alive" in row(forgotten).last_error


class TestAdminActions:
    """cancel, requeue and run_now touch only the statuses they are allowed to."""

    @pytest.fixture
    def one_of_each(self, make_job: Any) -> dict[Status, Job]:
        old = ago(3600)
        return {
            status: make_job(
                status=status,
                attempts=2,
                run_at=later(3600),
                finished_at=old
                if status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED)
                else None,
                result="r" if status == Status.COMPLETED else None,
                lease_owner="w" if status == Status.RUNNING else "",
                lease_expires_at=later(60) if status == Status.RUNNING else None,
            )
            for status in Status
        }

    def test_cancel(self, one_of_each: dict[Status, Job]) -> None:
        untouched = {s: snapshot(j) for s, j in one_of_each.items()}
        ids = [job.pk for job in one_of_each.values()]
        assert operations.cancel_many(ids) == operations.BulkResult(changed=3, stopping=1)
        for status, job in one_of_each.items():
            if status in (Status.WAITING, Status.PENDING, Status.FAILED):
                stored = row(job)
                assert stored.status == Status.CANCELLED
                assert stored.finished_at is not None
            elif status == Status.RUNNING:
                stored = row(job)
                assert stored.status == Status.RUNNING, "its worker stops it"
                assert stored.cancel_requested_at is not None
            else:
                assert snapshot(job) == untouched[status], f"cancel touched a {status} job"

    def test_requeue(self, one_of_each: dict[Status, Job]) -> None:
        untouched = {s: snapshot(j) for s, j in one_of_each.items()}
        before = timezone.now()
        requeueable = (Status.DEAD, Status.CANCELLED, Status.FAILED, Status.COMPLETED)
        assert operations.requeue_many(job.pk for job in one_of_each.values()).changed == len(
            requeueable
        )
        for status, job in one_of_each.items():
            if status in requeueable:
                stored = row(job)
                assert stored.status == Status.PENDING
                assert stored.attempts == 0
                assert stored.finished_at is None
                assert stored.result is None
                assert before <= stored.run_at <= timezone.now()
            else:
                assert snapshot(job) == untouched[status], f"requeue touched a {status} job"

    def test_requeued_dead_job_gets_all_its_attempts_back(
        self, make_job: Any, claim: Claim
    ) -> None:
        job = make_job(max_attempts=1)
        [claimed] = claim()
        transitions.fail(claimed, "boom")
        assert row(job).status == Status.DEAD
        assert operations.requeue_many([job.pk]).changed == 1
        [again] = claim()
        assert (again.id, again.attempts) == (job.pk, 1)
        assert len(again.history) == 1, "the earlier attempt stays in the history"

    def test_run_now(self, one_of_each: dict[Status, Job]) -> None:
        untouched = {s: snapshot(j) for s, j in one_of_each.items()}
        before = timezone.now()
        assert operations.run_now_many([job.pk for job in one_of_each.values()]).changed == 2
        for status, job in one_of_each.items():
            if status in (Status.PENDING, Status.FAILED):
                stored = row(job)
                assert before <= stored.run_at <= timezone.now()
                assert stored.attempts == 2, "run_now keeps the attempts"
                assert stored.status == status
            else:
                assert snapshot(job) == untouched[status], f"run_now touched a {status} job"

    def test_actions_on_unknown_ids_do_nothing(self, db: None) -> None:
        assert operations.cancel_many([999_999]).changed == 0
        assert operations.requeue_many([999_999]).changed == 0
        assert operations.run_now_many([999_999]).changed == 0
        assert operations.cancel_many([]).changed == 0


class TestStatusSummary:
    def test_counts_per_status_and_queue(self, make_job: Any) -> None:
        for status, queue, count in [
            (Status.PENDING, "default", 3),
            (Status.PENDING, "mail", 1),
            (Status.RUNNING, "mail", 2),
            (Status.DEAD, "default", 1),
        ]:
            for _ in range(count):
                make_job(status=status, queue=queue)
        assert queries.status_summary() == {
            "waiting": 0,
            "pending": 4,
            "running": 2,
            "completed": 0,
            "failed": 0,
            "dead": 1,
            "cancelled": 0,
        }
        assert queries.status_summary("mail")["pending"] == 1
        assert queries.status_summary("mail")["dead"] == 0
        by_queue = queries.status_summary_by_queue()
        assert list(by_queue) == ["default", "mail"]
        assert by_queue["default"]["pending"] == 3
        assert by_queue["mail"]["running"] == 2

    def test_empty(self, db: None) -> None:
        assert set(queries.status_summary().values()) == {0}
        assert queries.status_summary_by_queue() == {}


# A child process claiming in a loop until the queue is empty; prints the ids it got.
CLAIMER = """
import json, os, sys, time
from pathlib import Path

from django.utils import timezone

from django_sqlqueue.databases import queue_database
from django_sqlqueue.conf import get_settings
from django_sqlqueue.models import Job

barrier = Path(os.environ["BARRIER"])
me = os.environ["CHILD"]
claimer = queue_database(get_settings().database).claimer()
Job.objects.exists()
(barrier / f"{me}.ready").touch()
while not (barrier / "go").exists():
    time.sleep(0.001)
got = []
while True:
    batch = claimer.claim(me, None, 3, 60, timezone.now())
    if not batch:
        break
    got.extend(job.id for job in batch)
print(json.dumps(got))
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_concurrent_claims_from_processes_never_overlap(
    alias: str, spawn_django: Any, tmp_path: Path
) -> None:
    Job.objects.using(alias).bulk_create([Job(name="tests.noop") for _ in range(90)])
    expected = set(Job.objects.using(alias).values_list("pk", flat=True))
    names = ["claimer-a", "claimer-b", "claimer-c"]
    children = [
        spawn_django(CLAIMER, env={"BARRIER": str(tmp_path), "CHILD": name}) for name in names
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"{name}.ready").exists() for name in names):
        assert time.monotonic() < deadline, "claimers did not start"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    claimed: dict[str, list[int]] = {}
    for name, child in zip(names, children, strict=True):
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        claimed[name] = json.loads(out.strip().splitlines()[-1])

    every_claim = [pk for ids in claimed.values() for pk in ids]
    assert len(every_claim) == len(set(every_claim)), "a job was claimed twice"
    assert set(every_claim) == expected
    owners = dict(Job.objects.using(alias).values_list("pk", "lease_owner"))
    for name, ids in claimed.items():
        assert all(owners[pk] == name for pk in ids)
    assert set(Job.objects.using(alias).values_list("attempts", flat=True)) == {1}
