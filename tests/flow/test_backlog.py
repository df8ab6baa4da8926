"""A limited backlog never stands in front of the jobs behind it.

The docs promise that held-back jobs do not block others. A review found claims filling with
limited jobs that the gate parked again, a batch at a time, while unlimited jobs behind them
waited 6 to 27 seconds. Once a claim finds a limit full, the other due jobs of that limit are
deferred in one UPDATE (`states.DEFER`), so the very next claim reaches the jobs behind them.
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


def test_a_full_concurrency_key_defers_its_backlog_after_every_slot_is_taken(alias, claim):
    backlog = [limited.enqueue(account="busy").pk for _ in range(30)]
    plain = noop.enqueue().pk

    # concurrency=2: one job of a key per claim, so two workers take the two slots; the
    # second finds the key full and defers the rest.
    first, second = claim("w1", limit=5), claim("w2", limit=5)
    assert len(set(first) & set(backlog)) == 1 and len(set(second) & set(backlog)) == 1
    running = Job.objects.using(alias).filter(pk__in=backlog, status=Status.RUNNING)
    assert running.count() == 2
    pending = Job.objects.using(alias).filter(pk__in=backlog, status=Status.PENDING)
    assert pending.count() == 28
    assert all(job.run_at > timezone.now() for job in pending)
    assert plain in first + second or claim("w3") == [plain]
    assert claim("w4") == []  # nothing of the key is due while both slots run

    # A slot frees: its worker wakes one deferred job of the key (WAKE) and takes it.
    Job.objects.using(alias).filter(pk=running[0].pk).update(status=Status.COMPLETED)
    worker = running[0].lease_owner
    again = claim(worker)
    assert len(again) == 1 and again[0] in backlog


def test_a_key_with_a_free_slot_is_not_deferred(alias, claim):
    """One job of a key per claim: the rest of that claim is parked, but its backlog stays
    due, so another worker can take the free slot at once."""
    backlog = [limited.enqueue(account="half").pk for _ in range(10)]
    first = claim("w1", limit=5)
    assert len(first) == 1
    due = Job.objects.using(alias).filter(
        pk__in=backlog, status=Status.PENDING, run_at__lte=timezone.now()
    )
    assert due.count() == 5  # the five the claim did not take
    assert len(claim("w2", limit=5)) == 1
