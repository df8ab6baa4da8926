"""Stranded jobs: the table says a live worker runs them, the worker does not hold them (a
claim whose reply a cut connection lost; a claim a failed-over standby kept while it lost
the attempt's end). The worker's heartbeat hands them back at once (`release_stranded`), not
when their lease runs out, and never a job the worker holds or is claiming right now.

In-process, on the real database; tests/workers/test_stranded_jobs.py does it with a real
worker process."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_sqlqueue.databases.holdings import HOLDINGS, Holdings
from django_sqlqueue.models import Job
from django_sqlqueue.rows import ClaimedJob
from django_sqlqueue.runtime import transitions
from django_sqlqueue.runtime.heartbeat import insert_worker_row
from django_sqlqueue.runtime.transitions import release_stranded
from django_sqlqueue.states import Status

from .test_heartbeat import heartbeat

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker_id() -> Iterator[str]:
    """A worker id of this test alone: the ledger is the process's."""
    owner = f"stranded-{uuid.uuid4().hex[:8]}"
    yield owner
    HOLDINGS.forget(owner)


def strand(job: Job, worker_id: str, seconds_ago: float = 5) -> Job:
    """What a lost claim reply leaves: the row running under the worker's name, claimed a
    moment ago, its lease an hour long (only a hand-back can free it soon)."""
    started = timezone.now() - timedelta(seconds=seconds_ago)
    Job.objects.filter(pk=job.pk).update(
        status=Status.RUNNING,
        lease_owner=worker_id,
        attempts=1,
        started_at=started,
        lease_expires_at=started + timedelta(hours=1),
    )
    job.refresh_from_db()
    return job


def test_a_job_the_worker_does_not_hold_is_handed_back_unspent(
    make_job: Callable[..., Job], worker_id: str
) -> None:
    job = strand(make_job(), worker_id)
    assert release_stranded(worker_id) == 1
    job.refresh_from_db()
    assert (job.status, job.attempts, job.lease_owner) == (Status.PENDING, 0, "")
    assert job.run_at <= timezone.now()
    [entry] = job.history
    assert entry["outcome"] == "released"
    assert "was not running it" in entry["error"]


def test_the_jobs_it_holds_are_left_alone(
    claim: Callable[..., list[ClaimedJob]], make_job: Callable[..., Job], worker_id: str
) -> None:
    make_job()
    [held] = claim(worker_id)
    assert release_stranded(worker_id) == 0
    assert Job.objects.get(pk=held.id).status == Status.RUNNING
    # Its exit takes it out of the ledger: a stranded copy of it now would be handed back.
    transitions.release(held, "test")
    assert HOLDINGS.snapshot(worker_id, timezone.now())[1] == frozenset()


def test_another_workers_jobs_are_left_alone(make_job: Callable[..., Job], worker_id: str) -> None:
    job = strand(make_job(), "someone-else")
    assert release_stranded(worker_id) == 0
    assert Job.objects.get(pk=job.pk).status == Status.RUNNING


def test_a_claim_in_flight_is_not_stranded(
    claimer: Any, make_job: Callable[..., Job], worker_id: str
) -> None:
    """The claim's statement has committed, its jobs are not in the ledger yet: a beat then
    must not take them for stranded."""
    make_job()
    with HOLDINGS.claiming(worker_id, timezone.now()) as claim:
        jobs = claimer.claim_ready(worker_id, None, 1, 60, claim.started_at)
        assert [job.id for job in jobs]  # committed: the table says the worker runs it
        assert release_stranded(worker_id) == 0
        claim.took(jobs)
    assert release_stranded(worker_id) == 0
    assert Job.objects.get(pk=jobs[0].id).status == Status.RUNNING


def test_an_earlier_attempt_ended_late_does_not_drop_the_new_one(
    make_job: Callable[..., Job], worker_id: str
) -> None:
    """Attempt 1's exit, fenced out after the same worker claimed attempt 2, must leave
    attempt 2 in the ledger."""
    job = make_job()
    holdings = Holdings()
    holdings.add(worker_id, [(job.pk, 2)])
    holdings.discard(worker_id, [(job.pk, 1)])
    assert holdings.snapshot(worker_id, timezone.now())[1] == frozenset({(job.pk, 2)})


def test_a_claim_that_read_its_clock_before_a_snapshot_starts_after_it() -> None:
    """A claim may read the clock, then a beat take its snapshot, then the claim start: its
    jobs start at the snapshot's time, so they never look older than the cutoff."""
    holdings = Holdings()
    before = timezone.now()
    later = before + timedelta(seconds=1)
    holdings.snapshot("w", later)
    with holdings.claiming("w", before) as claim:
        assert claim.started_at == later
        assert holdings.snapshot("w", later + timedelta(seconds=1))[0] == later


def test_the_cutoff_is_the_oldest_claim_in_flight() -> None:
    holdings = Holdings()
    start = timezone.now()
    with holdings.claiming("w", start):
        cutoff, _ = holdings.snapshot("w", start + timedelta(seconds=5))
        assert cutoff == start
    assert holdings.snapshot("w", start + timedelta(seconds=6))[0] == start + timedelta(seconds=6)


def test_the_heartbeat_hands_them_back(
    make_job: Callable[..., Job], worker_id: str, alias: str
) -> None:
    job = strand(make_job(), worker_id)
    insert_worker_row(worker_id, alias, ())
    heartbeat(alias, worker_id).beat()
    assert Job.objects.get(pk=job.pk).status == Status.PENDING
