"""Batch completion: one fenced UPDATE through the door out of `running` records many
successful attempts."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.runtime import transitions
from django_sqlqueue.states import Status

pytestmark = pytest.mark.django_db


def recovered(failed: int = 0, dead: int = 0, cancelled: int = 0) -> dict[str, int]:
    """What recover_expired_leases() reports."""
    return {"failed": failed, "dead": dead, "cancelled": cancelled}


def test_records_each_job_with_its_result_and_history(make_job: Any, claim: Any, alias: str):
    jobs = [make_job() for _ in range(4)]
    claimed = claim("worker-a", limit=4)
    results = [None, {"total": 3}, None, [1, "two"]]
    now = timezone.now()

    recorded = transitions.complete_many(
        list(zip(claimed, results, strict=True)), now=now, alias=alias
    )

    assert recorded == {j.pk for j in jobs}
    by_id = {c.id: r for c, r in zip(claimed, results, strict=True)}
    for row in Job.objects.using(alias).filter(pk__in=recorded):
        assert row.status == Status.COMPLETED
        assert row.result == by_id[row.pk]
        assert row.lease_owner == "" and row.lease_expires_at is None
        assert abs((row.finished_at - now).total_seconds()) < 0.001
        [entry] = row.history
        assert entry["attempt"] == 1
        assert entry["worker"] == "worker-a"
        assert entry["outcome"] == "completed"
        assert datetime.fromisoformat(entry["started_at"]) == row.started_at
        assert datetime.fromisoformat(entry["finished_at"]) == now


def test_a_job_whose_lease_was_taken_is_not_overwritten(make_job: Any, claim: Any, alias: str):
    kept, taken = make_job(priority=2), make_job(priority=1)
    first = claim("worker-a", limit=2, lease_seconds=1)
    later = timezone.now() + timedelta(seconds=5)
    # worker-a looks dead: its leases expire, `taken` is recovered and claimed by worker-b.
    transitions.renew_leases("worker-a", [kept.pk], 600)
    assert transitions.recover_expired_leases(now=later) == recovered(failed=1, dead=0)
    Job.objects.using(alias).filter(pk=taken.pk).update(run_at=timezone.now())
    [second] = claim("worker-b", limit=1)
    assert second.id == taken.pk

    recorded = transitions.complete_many(
        [(job, "late") for job in first], now=timezone.now(), alias=alias
    )

    assert recorded == {kept.pk}
    row = Job.objects.using(alias).get(pk=taken.pk)
    assert (row.status, row.lease_owner, row.attempts) == (Status.RUNNING, "worker-b", 2)
    assert row.result is None
    assert [h["outcome"] for h in row.history] == ["lost"]


def test_large_batches_are_split(make_job: Any, claim: Any, alias: str, monkeypatch: Any):
    from django_sqlqueue.databases import exits

    monkeypatch.setattr(exits, "MAX_BATCH", 3)
    for _ in range(7):
        make_job()
    claimed = claim("worker-a", limit=7)
    recorded = transitions.complete_many(
        [(job, None) for job in claimed], now=timezone.now(), alias=alias
    )
    assert len(recorded) == 7
    assert Job.objects.using(alias).filter(status=Status.COMPLETED).count() == 7
