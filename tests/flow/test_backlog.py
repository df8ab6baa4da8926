"""A limited backlog never stands in front of the jobs behind it.

The docs promise that held-back jobs do not block others. A review found claims filling with
limited jobs that the gate parked again, a batch at a time, while unlimited jobs behind them
waited 6 to 27 seconds. Once a claim finds a rate's allowance spent, or a concurrency key's
slots all taken, the other due jobs of that rate or key are deferred in one UPDATE
(`states.DEFER`), so the very next claim reaches the jobs behind them. A key's deferred jobs
come back one per freed slot, woken by the worker that freed it.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.claiming import Claimer
from django_sqlqueue.models import Job
from django_sqlqueue.states import PARKED_OWNER, Status
from tests.testapp.jobs import limited, noop, rated

pytestmark = pytest.mark.django_db(transaction=True)


class Workers:
    """`claim(worker, limit)`: the ids a worker's claimer claims now (one claimer per worker,
    as each worker process has: it remembers the slots its jobs hold, to free them)."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.claimers: dict[str, Claimer] = {}

    def claimer(self, worker: str) -> Claimer:
        return self.claimers.setdefault(worker, queue_database(self.alias).claimer())

    def __call__(self, worker: str, limit: int = 10) -> list[int]:
        claimed = self.claimer(worker).claim(worker, None, limit, 60, timezone.now())
        return [job.id for job in claimed]


@pytest.fixture
def claim(alias: str) -> Workers:
    return Workers(alias)


def test_a_spent_rate_defers_its_backlog_and_the_next_claim_takes_the_job_behind(alias, claim):
    backlog = [rated.enqueue(label=str(n)).pk for n in range(40)]
    plain = noop.enqueue().pk

    first = claim("w1")
    assert set(first) <= set(backlog) and len(first) == 5  # "5/s": the allowance
    # The allowance is spent: the whole backlog waits for it, parked where it stands.
    waiting = Job.objects.using(alias).filter(pk__in=backlog).exclude(pk__in=first)
    assert waiting.count() == 35
    assert all(job.status == Status.PENDING and job.attempts == 0 for job in waiting)
    assert {job.lease_owner for job in waiting} == {PARKED_OWNER}
    assert min(job.run_at for job in waiting) > timezone.now()

    # The next claim, by any worker, takes the unlimited job at once.
    assert claim("w2") == [plain]


def test_a_full_concurrency_key_defers_its_backlog_and_a_freed_slot_wakes_one(alias, claim):
    backlog = [limited.enqueue(account="half").pk for _ in range(20)]
    plain = noop.enqueue().pk
    assert claim("w1") == [backlog[0]]  # one slot per worker; the others handed back
    assert claim("w2") == [backlog[1]]  # the key's last slot: the key is full
    waiting = Job.objects.using(alias).filter(pk__in=backlog[2:])
    assert {job.lease_owner for job in waiting} == {PARKED_OWNER}
    assert all(job.status == Status.PENDING and job.attempts == 0 for job in waiting)
    # The next claim, by any worker, takes the unlimited job at once.
    assert claim("w3") == [plain]
    assert claim("w3") == []

    # The first job ends: its worker's claimer frees its slot, and exactly one job of the
    # key is due now, the oldest, for any worker (claiming its next batch would do the same).
    Job.objects.using(alias).filter(pk=backlog[0]).update(status=Status.COMPLETED)
    assert claim.claimer("w1").free_slot(backlog[0])
    assert claim("w4") == [backlog[2]]
    due = Job.objects.using(alias).filter(
        pk__in=backlog, status=Status.PENDING, run_at__lte=timezone.now()
    )
    assert due.count() == 0
