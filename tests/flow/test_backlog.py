"""A limited backlog never stands in front of the jobs behind it.

The docs promise that held-back jobs do not block others. A review found claims filling with
limited jobs that the gate parked again, a batch at a time, while unlimited jobs behind them
waited 6 to 27 seconds. Once a claim finds a rate's allowance spent, the other due jobs of
that rate are deferred in one UPDATE (`states.DEFER`), so the very next claim reaches the
jobs behind them. A concurrency key's backlog is not deferred (see the last test).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.utils import timezone

from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.claiming import Claimer
from django_sqlqueue.models import Job
from django_sqlqueue.states import PARKED_OWNER, Status
from tests.testapp.jobs import limited, noop, rated

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def claim(alias: str) -> Callable[..., list[int]]:
    """`claim(worker, limit)`: the ids a worker's claimer claims now (one claimer per
    worker, as each worker process has: it remembers the slots it frees, to wake)."""
    claimers: dict[str, Claimer] = {}

    def claim(worker: str, limit: int = 10) -> list[int]:
        claimer = claimers.setdefault(worker, queue_database(alias).claimer())
        return [job.id for job in claimer.claim(worker, None, limit, 60, timezone.now())]

    return claim


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


def test_a_concurrency_backlog_stays_due_for_the_slots_as_they_free(alias, claim):
    """One job of a key per claim: the rest of that claim is parked, but its backlog stays
    due, so another worker takes a free slot at once (deferring it, as a rate's, left half
    the slots of short jobs idle)."""
    backlog = [limited.enqueue(account="half").pk for _ in range(20)]
    first = claim("w1", limit=5)
    assert len(first) == 1
    due = Job.objects.using(alias).filter(
        pk__in=backlog, status=Status.PENDING, run_at__lte=timezone.now()
    )
    assert due.count() == 15  # those the claim did not take
    assert len(claim("w2", limit=5)) == 1
    # Both slots run: the key is full, and its backlog still stays due.
    still_due = Job.objects.using(alias).filter(
        pk__in=backlog, status=Status.PENDING, run_at__lte=timezone.now()
    )
    assert still_due.count() == 10  # twenty, minus the ten the two claims took
