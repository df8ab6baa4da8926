"""A freed concurrency slot passes to the next job of its key (`Claimer.pass_slot`): the
worker whose job ended takes that job itself, under the key's lock, instead of waking it for
whichever worker claims next. In-process, against the real database; the real-process limit
tests (tests/workers/test_flow_limits.py) hold the limits with it on every database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import OperationalError
from django.utils import timezone

from django_sqlqueue import pause_queue
from django_sqlqueue.databases import queue_database
from django_sqlqueue.models import Job
from django_sqlqueue.rows import CLAIM_COLUMNS, ClaimedJob
from django_sqlqueue.runtime import worker as worker_module
from django_sqlqueue.states import Status
from tests.runtime.test_worker_loop import make_worker
from tests.testapp.jobs import limited, noop

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "account:a"


def fill_the_key(alias: str, count: int = 4, **options: Any) -> tuple[list[Job], list[Any]]:
    """`count` jobs of one key (limit 2); two workers hold its two slots, the rest parked."""
    bound = limited.using(**options) if options else limited
    jobs = [bound.enqueue(account="a") for _ in range(count)]
    w1, w2, w3 = (queue_database(alias).claimer() for _ in range(3))
    queues = [options["queue"]] if "queue" in options else None
    assert [j.id for j in w1.claim("w1", queues, 10, 60, timezone.now())] == [jobs[0].pk]
    assert [j.id for j in w2.claim("w2", queues, 10, 60, timezone.now())] == [jobs[1].pk]
    assert w3.claim("w3", queues, 10, 60, timezone.now()) == []
    assert all(row.lease_owner == "(parked)" for row in Job.objects.filter(pk__in=pk(jobs[2:])))
    return jobs, [w1, w2, w3]


def pk(jobs: list[Job]) -> list[int]:
    return [job.pk for job in jobs]


def ended(job: Job, owner: str = "w1") -> ClaimedJob:
    """`job`, as its worker claimed it, once it has left `running` (completed): its slot
    is free."""
    row = Job.objects.filter(pk=job.pk).values_list(*CLAIM_COLUMNS)[0]
    Job.objects.filter(pk=job.pk).update(status=Status.COMPLETED, lease_owner="")
    return ClaimedJob.from_row(row, owner)


def test_the_worker_that_frees_a_slot_takes_the_next_job_of_its_key(alias):
    jobs, (w1, _, _) = fill_the_key(alias)
    before = timezone.now()
    taken = w1.pass_slot("w1", ended(jobs[0]), 60)
    assert taken is not None and taken.id == jobs[2].pk, "the oldest parked job of the key"
    assert taken.attempts == 1 and taken.lease_owner == "w1"
    row = Job.objects.get(pk=jobs[2].pk)
    assert (row.status, row.lease_owner, row.attempts) == (Status.RUNNING, "w1", 1)
    assert row.started_at >= before and row.lease_expires_at > timezone.now()
    assert w1.slots == {jobs[2].pk: KEY}, "the taken job holds the slot in its turn"
    # The other parked job still waits: the key's two slots are held.
    assert Job.objects.get(pk=jobs[3].pk).lease_owner == "(parked)"
    assert Job.objects.filter(concurrency_key=KEY, status=Status.RUNNING).count() == 2


def test_with_nothing_parked_the_slot_is_just_freed(alias):
    jobs, (w1, _, _) = fill_the_key(alias, count=2)
    assert w1.pass_slot("w1", ended(jobs[0]), 60) is None
    assert w1.slots == {}


def test_a_job_of_a_queue_the_worker_does_not_serve_is_woken_for_the_others(alias):
    jobs, (w1, _, _) = fill_the_key(alias, queue="elsewhere")
    assert w1.pass_slot("w1", ended(jobs[0]), 60, queues=["default"]) is None
    woken = Job.objects.get(pk=jobs[2].pk)
    assert woken.status == Status.PENDING and woken.lease_owner == ""
    assert woken.run_at <= timezone.now(), "due now, for a worker of its queue"
    assert w1.slots == {}
    assert Job.objects.get(pk=jobs[3].pk).lease_owner == "(parked)"


def test_a_job_of_an_excluded_queue_is_woken_not_taken(alias):
    jobs, (w1, _, _) = fill_the_key(alias)
    assert w1.pass_slot("w1", ended(jobs[0]), 60, excluded=["default"]) is None
    assert Job.objects.get(pk=jobs[2].pk).lease_owner == ""


def test_a_job_of_a_paused_queue_is_woken_not_taken(alias):
    jobs, _ = fill_the_key(alias)
    pause_queue("default")
    fresh = queue_database(alias).claimer()  # reads the paused set anew
    fresh.slots[jobs[0].pk] = KEY
    assert fresh.pass_slot("w1", ended(jobs[0]), 60) is None
    woken = Job.objects.get(pk=jobs[2].pk)
    assert woken.status == Status.PENDING and woken.lease_owner == ""


def test_a_job_whose_own_limit_is_full_is_woken_not_taken(alias, register_job):
    """A key shared by two names with different limits: the slot of a job allowed 2 at once
    is not one a job allowed 1 may take while another job of the key runs."""
    strict = register_job(
        "tests.strict_shared_key", concurrency=1, concurrency_key="account:{account}"
    )
    jobs, (w1, _, _) = fill_the_key(alias, count=2)
    narrow = strict.enqueue(account="a")
    Job.objects.filter(pk=narrow.pk).update(lease_owner="(parked)")
    assert w1.pass_slot("w1", ended(jobs[0]), 60) is None
    assert Job.objects.get(pk=narrow.pk).lease_owner == ""


def test_a_rate_limited_job_of_the_key_is_woken_for_the_gate_not_taken(alias, register_job):
    """A job with a rate limit as well may be parked for its rate, not for the slot: taken
    by a handoff while its rate is full, it would be parked and taken again, round and round.
    It is woken, and the claim's gate decides."""
    rated = register_job(
        "tests.rated_and_keyed",
        concurrency=2,
        concurrency_key="account:{account}",
        rate_limit="1/h",
    )
    jobs, (w1, _, _) = fill_the_key(alias, count=2)
    both = rated.enqueue(account="a")
    Job.objects.filter(pk=both.pk).update(lease_owner="(parked)")
    assert w1.pass_slot("w1", ended(jobs[0]), 60) is None
    woken = Job.objects.get(pk=both.pk)
    assert (woken.status, woken.lease_owner) == (Status.PENDING, "")


def test_a_slot_a_claim_took_between_the_end_and_the_handoff_is_not_taken_twice(alias):
    """The freeing job's end commits before the handoff takes the key's lock: a claim in
    between may admit a job of the key into the freed slot. The handoff counts the key's
    running jobs as the gate does, so the key never runs more than its limit."""
    jobs, (w1, _, w3) = fill_the_key(alias)
    freed = ended(jobs[0])
    Job.objects.filter(pk=jobs[3].pk).update(run_at=timezone.now(), lease_owner="")
    assert [j.id for j in w3.claim("w3", None, 1, 60, timezone.now())] == [jobs[3].pk]
    assert w1.pass_slot("w1", freed, 60) is None
    assert Job.objects.filter(concurrency_key=KEY, status=Status.RUNNING).count() == 2
    assert Job.objects.get(pk=jobs[2].pk).status == Status.PENDING


def test_a_job_claimed_past_its_due_time_is_not_taken_twice(alias):
    """The next job was due again and another worker claimed it before the handoff's
    UPDATE: it stays that worker's."""
    jobs, (w1, _, _) = fill_the_key(alias, count=3)
    Job.objects.filter(pk=jobs[2].pk).update(
        status=Status.RUNNING, lease_owner="w3", attempts=1
    )  # as a claim past its due time leaves it (the parked mark is the claim's to clear)
    assert w1.pass_slot("w1", ended(jobs[0]), 60) is None
    row = Job.objects.get(pk=jobs[2].pk)
    assert (row.lease_owner, row.attempts) == ("w3", 1)


def worker_beside_a_held_slot(
    alias: str, monkeypatch: Any, budget: float, count: int
) -> tuple[list[Job], Any, Any]:
    """`count` jobs of one key (limit 2), another claimer holding the first one's slot
    throughout, and a --burst worker that knows them to be short (so it claims a batch), with
    `budget` as the claim budget in force. Its claim keeps the second job in the key's last
    slot and parks the ones behind it."""
    monkeypatch.setattr(worker_module, "CLAIM_BUDGET_SECONDS", budget)
    jobs = [limited.enqueue(account="solo", seconds=0) for _ in range(count)]
    other = queue_database(alias).claimer()
    assert [j.id for j in other.claim("other", None, 1, 60, timezone.now())] == [jobs[0].pk]
    worker, claimer = make_worker(alias, burst=True)
    worker.estimates.observe("tests.limited", 0.001)
    return jobs, worker, claimer


class TestWorkerLoop:
    def test_a_worker_runs_a_keys_backlog_through_its_slot_without_claiming(
        self, alias, monkeypatch
    ):
        jobs, worker, claimer = worker_beside_a_held_slot(alias, monkeypatch, 3600.0, 5)
        assert worker.work() == 0
        rows = Job.objects.filter(pk__in=pk(jobs[1:]))
        assert (
            sorted(rows.values_list("status", "attempts", "lease_owner"))
            == [(Status.COMPLETED, 1, "")] * 4
        )
        assert [ids for ids in claimer.claimed if ids] == [[jobs[1].pk]], (
            "one claim: each next job of the key came through the slot its predecessor freed"
        )
        assert worker.jobs_done == 4

    def test_past_the_claim_budget_other_due_work_comes_first(self, alias, monkeypatch):
        """Past a claim budget since its last claim a worker takes the next job of its key
        only while nothing else is due for it: a plain job enqueued meanwhile is claimed,
        and the key's next job woken for whichever worker claims first."""
        jobs, worker, claimer = worker_beside_a_held_slot(alias, monkeypatch, 0.0, 3)
        worker.estimates.observe("tests.noop", 0.001)
        plain: list[Job] = []
        claimer.after_claim = lambda _: plain or plain.append(noop.enqueue())
        assert worker.work() == 0
        claims = [sorted(ids) for ids in claimer.claimed if ids]
        assert claims == [[jobs[1].pk], sorted([plain[0].pk, jobs[2].pk])]
        assert worker.jobs_done == 3

    def test_past_the_claim_budget_with_nothing_else_due_the_slot_still_passes(
        self, alias, monkeypatch
    ):
        jobs, worker, claimer = worker_beside_a_held_slot(alias, monkeypatch, 0.0, 4)
        assert worker.work() == 0
        assert [ids for ids in claimer.claimed if ids] == [[jobs[1].pk]]
        assert worker.jobs_done == 3


class DeadlockingGate:
    """The real gate, whose transaction deadlocks the first `times` times (as InnoDB picks
    a victim among two lock waits)."""

    def __init__(self, real: Any, times: int) -> None:
        self.real = real
        self.times = times

    def rules(self) -> Any:
        return self.real.rules()

    def admit(self, *args: Any, **kwargs: Any) -> Any:
        if self.times:
            self.times -= 1
            raise OperationalError(1213, "Deadlock found when trying to get lock (injected)")
        return self.real.admit(*args, **kwargs)


def deadlocking_claimer(alias: str, times: int, monkeypatch: Any) -> Any:
    claimer = queue_database(alias).claimer()
    claimer.gate = DeadlockingGate(claimer.gate, times)
    # Every database's way to tell a deadlock a retry may get past, here: the injected one.
    monkeypatch.setattr(claimer.database, "is_deadlock", lambda exc: "Deadlock" in str(exc))
    return claimer


def test_a_gate_that_deadlocked_is_tried_again(alias, monkeypatch):
    jobs = [limited.enqueue(account="d") for _ in range(2)]
    claimer = deadlocking_claimer(alias, 1, monkeypatch)
    assert [j.id for j in claimer.claim("w1", None, 10, 60, timezone.now())] == [jobs[0].pk]
    assert claimer.slots == {jobs[0].pk: "account:d"}


def test_a_gate_that_keeps_failing_hands_the_claimed_jobs_back(alias, monkeypatch):
    """Claimed (running, this worker's) before the gate's transaction failed: handed back
    unspent, not left to their lease while the worker goes on without them."""
    jobs = [limited.enqueue(account="d") for _ in range(2)]
    plain = noop.enqueue()
    claimer = deadlocking_claimer(alias, 99, monkeypatch)
    with pytest.raises(OperationalError):
        claimer.claim("w1", None, 10, 60, timezone.now())
    rows = Job.objects.filter(pk__in=[*pk(jobs), plain.pk])
    assert (
        sorted(rows.values_list("status", "attempts", "lease_owner"))
        == [(Status.PENDING, 0, "")] * 3
    )
