"""The worker loop in-process: claim sizes, batches, shutdown paths and database errors.

The process tests (tests/workers/) prove the same behaviours end to end with real
supervisors; these drive `JobWorker.work()` directly against the real database and claimer,
so each case runs in milliseconds. Faults are injected by wrapping the real claimer, never by
replacing the database.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import OperationalError
from django.utils import timezone

from django_sqlqueue import job
from django_sqlqueue.conf import get_settings
from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.claiming import Claimer
from django_sqlqueue.databases.polling import Waiter
from django_sqlqueue.models import Job
from django_sqlqueue.rows import ClaimedJob
from django_sqlqueue.runtime import worker as worker_module
from django_sqlqueue.runtime.worker import EXIT_RECYCLE, JobWorker, WorkerOptions
from django_sqlqueue.states import Status
from tests.testapp.jobs import add, fail_always, leak, noop

# The worker runs in autocommit as in its own process (and closes connections left in a
# transaction), so the rows must be committed: no test transaction around it.
pytestmark = pytest.mark.django_db(transaction=True)


class RecordingClaimer(Claimer):
    """The database's real claimer, remembering each claim's size and failing on request."""

    def __init__(self, real: Claimer, failures: int = 0) -> None:
        self.real = real
        self.failures = failures
        self.sizes: list[int] = []
        self.claimed: list[list[int]] = []
        self.after_claim: Callable[[JobWorker], None] | None = None
        self.worker: JobWorker | None = None

    def claim(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        lease_seconds: float,
        now: datetime,
        excluded: Sequence[str] = (),
    ) -> list[ClaimedJob]:
        if self.failures:
            self.failures -= 1
            raise OperationalError("connection refused (injected)")
        self.sizes.append(limit)
        jobs = self.real.claim(worker_id, queues, limit, lease_seconds, now, excluded)
        self.claimed.append([j.id for j in jobs])
        if self.after_claim and self.worker and jobs:
            self.after_claim(self.worker)
        return jobs

    def holds_back(self, queues: Sequence[str] | None = None, excluded: Sequence[str] = ()) -> bool:
        return self.real.holds_back(queues, excluded)

    def admit_start(self, worker_id: str, job: ClaimedJob) -> bool:
        return self.real.admit_start(worker_id, job)

    @property
    def slots(self) -> dict[int, str]:  # type: ignore[override]
        return self.real.slots

    @property
    def paused(self) -> Any:  # type: ignore[override]
        return self.real.paused

    def free_slot(self, job_id: int, now: datetime | None = None) -> bool:
        return self.real.free_slot(job_id, now)

    def pass_slot(self, *args: Any, **kwargs: Any) -> ClaimedJob | None:
        return self.real.pass_slot(*args, **kwargs)


class CountingWaiter(Waiter):
    """Waits not at all; stops the worker after `limit` idle waits. `on_wait` stands for
    what happens in the world while a worker waits."""

    def __init__(
        self, stop: threading.Event, limit: int = 1, on_wait: Callable[[], None] | None = None
    ) -> None:
        super().__init__("default", 0.01, stop)
        self.waits = 0
        self.limit = limit
        self.on_wait = on_wait

    def wait(self) -> None:
        self.waits += 1
        if self.on_wait is not None:
            self.on_wait()
        if self.waits >= self.limit:
            self.stop.set()


def make_worker(
    alias: str, *, failures: int = 0, **options: Any
) -> tuple[JobWorker, RecordingClaimer]:
    claimer = RecordingClaimer(queue_database(alias).claimer(), failures=failures)
    worker = JobWorker("worker-in-process", WorkerOptions(**options), claimer=claimer)
    worker.waiter = CountingWaiter(worker.stopping)
    claimer.worker = worker
    return worker, claimer


def statuses(alias: str) -> dict[str, int]:
    rows = Job.objects.using(alias).values_list("status", flat=True)
    counts: dict[str, int] = {}
    for status in rows:
        counts[status] = counts.get(status, 0) + 1
    return counts


class TestClaimSize:
    def test_first_claim_takes_one_job(self, alias: str) -> None:
        worker, _ = make_worker(alias)
        assert worker.claim_size() == 1

    def test_short_jobs_travel_in_batches_up_to_batch_size(self, alias: str) -> None:
        worker, _ = make_worker(alias)
        worker.observe_duration("tests.noop", 0.0001)
        assert worker.claim_size() == get_settings().batch_size
        worker, _ = make_worker(alias, batch_size=3)
        worker.observe_duration("tests.noop", 0.0001)
        assert worker.claim_size() == 3

    def test_slow_jobs_are_claimed_one_by_one(self, alias: str) -> None:
        worker, _ = make_worker(alias)
        worker.observe_duration("tests.noop", 0.5)
        assert worker.claim_size() == 1

    def test_budget_divides_by_the_average_duration(self, alias: str) -> None:
        worker, _ = make_worker(alias)
        worker.observe_duration("tests.noop", worker_module.CLAIM_BUDGET_SECONDS / 4)
        assert worker.claim_size() == 4

    def test_never_claims_past_max_jobs(self, alias: str) -> None:
        worker, _ = make_worker(alias, max_jobs=5)
        worker.observe_duration("tests.noop", 0.0001)
        worker.jobs_done = 3
        assert worker.claim_size() == 2


class TestLoop:
    def test_burst_runs_every_due_job_and_returns(self, alias: str) -> None:
        for n in range(30):
            add.enqueue(n, 1)
        worker, claimer = make_worker(alias, burst=True)
        assert worker.work() == 0
        worker.recorder.flush()
        assert statuses(alias) == {Status.COMPLETED: 30}
        assert worker.jobs_done == 30
        assert claimer.sizes[0] == 1, "no duration known yet: one job"
        assert max(claimer.sizes) > 1, "short jobs are then claimed in batches"
        results = sorted(Job.objects.using(alias).values_list("result", flat=True))
        assert results == sorted(n + 1 for n in range(30))

    def test_burst_waits_for_a_job_another_worker_parked(self, alias: str) -> None:
        """A job a flow limit held back is due work, whoever parked it: a `--burst` worker
        that parked nothing itself must not leave while it waits (its claimer knows only its
        own parked jobs; the database knows them all)."""
        job = add.enqueue(2, 3)
        other = queue_database(alias).claimer()
        [claimed] = other.claim("other-worker", None, 1, 60, timezone.now())
        assert other.park("other-worker", [claimed], timezone.now() + timedelta(hours=1)) == 1
        worker, _ = make_worker(alias, burst=True)

        def time_passes() -> None:  # the parked job's due time comes while the worker waits
            Job.objects.using(alias).filter(pk=job.pk).update(run_at=timezone.now())

        waiter = CountingWaiter(worker.stopping, limit=5, on_wait=time_passes)
        worker.waiter = waiter
        assert worker.work() == 0
        worker.recorder.flush()
        assert Job.objects.using(alias).get(pk=job.pk).status == Status.COMPLETED
        assert waiter.waits == 1

    def test_a_batch_whose_leases_went_unrenewed_is_handed_back_not_stranded(
        self, alias: str
    ) -> None:
        """A worker that could not confirm its leases for a whole lease drops the jobs it has
        not started: they go back to pending at once, attempt unspent. Left running under a
        live worker's name they would wait for recovery, and a `--burst` run would end first."""
        for n in range(6):
            add.enqueue(n, 1)
        worker, claimer = make_worker(alias, burst=True)
        worker.observe_duration("tests.add", 0.0001)
        claim = worker.claim
        stalled: list[list[int]] = []

        def claim_then_stall() -> list[ClaimedJob]:
            jobs = claim()
            if not stalled:  # the heartbeat starves for a lease right after the first claim
                stalled.append([job.id for job in jobs])
                worker.leases_confirmed -= worker.conf.lease_seconds + 1
            return jobs

        worker.claim = claim_then_stall  # type: ignore[method-assign]
        assert worker.work() == 0
        worker.recorder.flush()
        assert len(stalled[0]) == 6, "one batch of all six, none started"
        assert statuses(alias) == {Status.COMPLETED: 6}
        assert set(Job.objects.using(alias).values_list("attempts", flat=True)) == {1}
        assert len(claimer.claimed) >= 2, "the dropped batch was claimed again"

    def test_idle_worker_waits_and_stops_when_told(self, alias: str) -> None:
        worker, claimer = make_worker(alias)
        assert worker.work() == 0
        assert worker.waiter.waits == 1
        assert claimer.claimed == [[]]

    def test_max_jobs_recycles_after_exactly_that_many(self, alias: str) -> None:
        for _ in range(10):
            noop.enqueue()
        worker, _ = make_worker(alias, max_jobs=4)
        assert worker.work() == EXIT_RECYCLE
        assert worker.jobs_done == 4
        assert statuses(alias) == {Status.COMPLETED: 4, Status.PENDING: 6}

    def test_failures_are_recorded_with_their_exception(self, alias: str) -> None:
        failing = fail_always.enqueue()
        worker, _ = make_worker(alias, burst=True)
        worker.work()
        failing.refresh_from_db()
        assert failing.status == Status.FAILED
        [entry] = failing.history
        assert entry["outcome"] == "error"
        assert entry["exception"] == "builtins.ValueError"
        assert "boom on attempt 1" in failing.last_error

    @pytest.mark.parametrize("how", ["atomic", "autocommit"])
    def test_a_leak_fails_its_own_attempt_and_no_other_of_its_batch(
        self, alias: str, how: str, settings: Any
    ) -> None:
        """Which connections were in a transaction is noted once per batch: the attempt after
        a leaking one, in the same batch, must find a clean connection, not a leak, and a
        second leak later in the batch is caught as the first was."""
        # The leaks' retries come due long after this burst: with the suite's 0.2 s backoff,
        # a slow machine ran the first leak's second attempt in the same burst (and it died).
        settings.SQLQUEUE = {**settings.SQLQUEUE, "BACKOFF_BASE": 600, "BACKOFF_MAX": 600}
        before = [add.enqueue(n, 1) for n in range(2)]
        leaker = leak.enqueue(how=how, label="in-batch")
        after = [add.enqueue(n, 2) for n in range(3)]
        last = leak.enqueue(how=how, label="last")
        worker, claimer = make_worker(alias, burst=True, batch_size=10)
        for name in ("tests.add", "tests.leak"):
            worker.observe_duration(name, 0.0001)
        worker.work()
        worker.recorder.flush()
        batch = [j.pk for j in (*before, leaker, *after, last)]
        assert claimer.claimed[0] == batch, "one batch"
        for leaking in (leaker, last):
            leaking.refresh_from_db()
            assert leaking.status == Status.FAILED
            assert leaking.run_at > timezone.now() + timedelta(minutes=1)  # the backoff above
            assert "left a transaction open" in leaking.last_error
        for clean in (*before, *after):
            clean.refresh_from_db()
            assert (clean.status, clean.last_error) == (Status.COMPLETED, ""), clean.last_error
        assert sorted(j.result for j in after) == [2, 3, 4]


class TestShutdown:
    def test_stop_during_a_batch_hands_back_what_did_not_start(self, alias: str) -> None:
        for _ in range(6):
            noop.enqueue()
        worker, claimer = make_worker(alias, batch_size=6)
        worker.observe_duration("tests.noop", 0.0001)  # claim the whole batch at once

        def stop_after_the_first_job(w: JobWorker) -> None:
            original = w.attempts.run

            def run(claimed: ClaimedJob) -> None:
                original(claimed)
                w.stopping.set()
                w.attempts.run = original  # type: ignore[method-assign]

            w.attempts.run = run  # type: ignore[method-assign]

        claimer.after_claim = stop_after_the_first_job
        assert worker.work() == 0
        worker.recorder.flush()
        assert claimer.claimed and len(claimer.claimed[0]) == 6
        assert statuses(alias) == {Status.COMPLETED: 1, Status.PENDING: 5}
        handed_back = Job.objects.using(alias).filter(status=Status.PENDING)
        assert all(job.attempts == 0 for job in handed_back), "unstarted jobs are not spent"
        assert all(job.history[-1]["outcome"] == "released" for job in handed_back)

    def test_a_stopped_worker_claims_nothing(self, alias: str) -> None:
        noop.enqueue()
        worker, claimer = make_worker(alias)
        worker.stopping.set()
        assert worker.work() == 0
        assert claimer.sizes == []
        assert statuses(alias) == {Status.PENDING: 1}


class TestDatabaseErrors:
    def test_claim_errors_back_off_and_the_worker_recovers(
        self, alias: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        waits: list[float] = []
        monkeypatch.setattr(JobWorker, "database_trouble", lambda self, exc, n: waits.append(n))
        noop.enqueue()
        worker, _ = make_worker(alias, burst=True, failures=3)
        assert worker.work() == 0
        assert waits == [1, 2, 3], "each consecutive failure is counted for the backoff"
        assert statuses(alias) == {Status.COMPLETED: 1}

    def test_backoff_grows_and_is_capped(self, alias: str, monkeypatch: pytest.MonkeyPatch) -> None:
        worker, _ = make_worker(alias)
        delays: list[float] = []
        monkeypatch.setattr(worker.stopping, "wait", lambda delay: delays.append(delay))
        for failures in (1, 2, 3, 10):
            worker.database_trouble(OperationalError("down"), failures)
        assert delays == [1.0, 2.0, 4.0, 30.0]


@job("tests.runtime.sees_worker", takes_context=True)
def sees_worker(context: Any) -> str:
    return context.worker_id


def test_handlers_get_the_workers_id_in_their_context(alias: str) -> None:
    created = sees_worker.enqueue()
    worker, _ = make_worker(alias, burst=True)
    worker.work()
    worker.recorder.flush()
    created.refresh_from_db()
    assert created.result == "worker-in-process"
