"""The dashboard's rollup written by real workers: its totals equal the attempts that ran."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db.models import Sum

from django_sqlqueue.models import WAIT_COLUMNS, JobRollup, QueueSample
from tests.testapp.jobs import fail_always, noop, sleep

from .test_metrics import history_outcomes

pytestmark = pytest.mark.workers


def test_rollup_totals_equal_the_histories(workers):
    noop.enqueue_many([{} for _ in range(25)])
    noop.using(queue="mail").enqueue()
    fail_always.enqueue()
    fail_always.enqueue()
    sleep.using(queue="mail").enqueue(0.2)
    workers.run("-n", "2", "--burst")
    workers.run("-n", "1", "--burst")  # the retries that were not due yet

    rolled = Counter()
    for row in JobRollup.objects.values("name", "outcome").annotate(n=Sum("count")):
        rolled[(row["name"], row["outcome"])] = row["n"]
    ran = history_outcomes()
    assert +rolled == +ran
    assert rolled[("tests.noop", "completed")] == 26
    assert rolled[("tests.fail_always", "dead")] == 2
    # Each attempt is in exactly one wait bucket, and durations were summed.
    for row in JobRollup.objects.all():
        assert sum(getattr(row, column) for column in WAIT_COLUMNS) == row.count
    slept = JobRollup.objects.get(name="tests.sleep", queue="mail")
    assert 0.2 <= slept.duration_sum < 5
    # The supervisors sampled the queues at start.
    assert QueueSample.objects.filter(queue="default").exists()
