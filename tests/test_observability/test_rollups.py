"""Rollup rows: tallying, the vendors' adding upsert, pruning, samples, quantiles."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_sqlqueue import outcomes
from django_sqlqueue.admin.dashboard import quantile
from django_sqlqueue.metrics import rollups
from django_sqlqueue.models import WAIT_BUCKETS, JobRollup, QueueSample
from django_sqlqueue.rows import ClaimedJob

pytestmark = pytest.mark.django_db(transaction=True)


def claimed(name: str = "tests.noop", queue: str = "default", waited: float = 0.0) -> ClaimedJob:
    now = timezone.now()
    return ClaimedJob(
        id=1,
        name=name,
        queue=queue,
        args=[],
        kwargs={},
        attempts=1,
        max_attempts=5,
        priority=0,
        run_at=now - timedelta(seconds=waited),
        created_at=now,
        started_at=now,
    )


def end(job: ClaimedJob, outcome: str, duration: float | None, ended: float):
    return outcomes.AttemptEnd(job, outcome, duration, ended)


def test_flushes_add_up():
    tally = rollups.RollupTally(connection.alias)
    at = time.time()
    tally(end(claimed(waited=0.002), "completed", 0.5, at))
    tally(end(claimed(waited=3), "completed", 1.5, at))
    tally(end(claimed(queue="mail"), "failed", 0.1, at))
    assert tally.flush() == 2
    tally(end(claimed(waited=4000), "completed", None, at))
    assert tally.flush() == 1
    assert tally.flush() == 0
    row = JobRollup.objects.get(queue="default")
    assert row.minute == rollups.minute_of(at)
    assert row.count == 3
    assert row.duration_sum == pytest.approx(2.0)
    assert (row.wait_b0, row.wait_b5, row.wait_b10) == (1, 1, 1)
    assert JobRollup.objects.get(queue="mail").count == 1


def test_attempts_fall_in_the_minute_they_ended():
    """The tally keeps the last minute it built; a later minute, or an earlier one (a clock
    stepped back), still gets its own row."""
    tally = rollups.RollupTally(connection.alias)
    start = 60 * (time.time() // 60) - 600
    for ended in (start + 1, start + 59.5, start + 60, start + 125, start + 30):
        tally(end(claimed(), "completed", 0.1, ended))
    assert tally.flush() == 3
    counts = dict(JobRollup.objects.values_list("minute", "count"))
    assert counts == {
        rollups.minute_of(start): 3,
        rollups.minute_of(start + 60): 1,
        rollups.minute_of(start + 120): 1,
    }


def test_a_failed_flush_keeps_its_rows(monkeypatch):
    tally = rollups.RollupTally(connection.alias)
    tally(end(claimed(), "completed", 0.1, time.time()))
    # The table is gone for a moment: the write fails for real, the tally is kept.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_sqlqueue_jobrollup RENAME TO sqlqueue_rollup_away")
    try:
        with pytest.raises(Exception):  # noqa: B017 (each vendor raises its own error)
            tally.flush()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE sqlqueue_rollup_away RENAME TO django_sqlqueue_jobrollup")
    assert tally.flush() == 1
    assert JobRollup.objects.get().count == 1


def test_forked_child_starts_empty():
    tally = rollups.RollupTally(connection.alias)
    tally(end(claimed(), "completed", 0.1, time.time()))
    tally.pid = -1  # as a child sees its parent's tally after fork
    assert tally.take() == {}


def test_prune_keeps_at_least_two_days():
    now = timezone.now()
    for days in (1, 3, 8):
        JobRollup.objects.create(
            minute=now - timedelta(days=days), queue="q", name="n", outcome="completed"
        )
        QueueSample.objects.create(minute=now - timedelta(days=days), queue="q")
    assert rollups.prune(7, connection.alias, now) == 2
    assert rollups.prune(1, connection.alias, now) == 2
    assert JobRollup.objects.count() == QueueSample.objects.count() == 1
    assert rollups.prune(None, connection.alias, now) == 0


def test_samples_first_writer_wins():
    minute = rollups.minute_of(time.time())
    counts = {("mail", "pending"): 3, ("mail", "completed"): 10, ("idle", "completed"): 5}
    assert rollups.write_samples(minute, counts, {"mail": 12.5}, connection.alias) == 1
    rollups.write_samples(minute, {("mail", "pending"): 99}, {}, connection.alias)
    [sample] = QueueSample.objects.all()
    assert (sample.queue, sample.pending, sample.oldest_wait) == ("mail", 3, 12.5)


def test_quantiles_from_buckets():
    counts = [0.0] * len(WAIT_BUCKETS)
    assert quantile(counts, 0.5) is None
    counts[0] = 50  # up to 10 ms
    counts[4] = 50  # 0.5 s to 1 s
    assert quantile(counts, 0.5) == pytest.approx(0.01)
    assert 0.5 < quantile(counts, 0.95) <= 1.0
    counts[-1] = 1000  # beyond the last bound: its lower bound
    assert quantile(counts, 0.99) == WAIT_BUCKETS[-2]
