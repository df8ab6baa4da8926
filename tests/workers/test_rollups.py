"""The dashboard's rollup written by real workers: its totals equal the attempts that ran."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db.models import Sum

from django_sqlqueue.models import WAIT_COLUMNS, Job, JobRollup, QueueSample
from django_sqlqueue.states import FINISHED
from tests.stopping import stop_group
from tests.testapp.jobs import fail_always, noop, sleep

from .conftest import wait_for
from .test_metrics import history_outcomes

pytestmark = pytest.mark.workers


def test_rollup_totals_equal_the_histories(workers):
    noop.enqueue_many([{} for _ in range(25)])
    noop.using(queue="mail").enqueue()
    fail_always.enqueue()
    fail_always.enqueue()
    sleep.using(queue="mail").enqueue(0.2)
    # Workers run until every job is finished, retries included (two --burst runs left a
    # retry behind whenever the second started before it was due), then stop: each writes
    # what it holds of the rollup as it exits.
    supervisor = workers.start("-n", "2")
    wait_for(lambda: not Job.objects.exclude(status__in=FINISHED).exists(), 60)
    assert stop_group(supervisor, workers.log_path(supervisor)) == 0, workers.log(supervisor)

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
    # The handler's time, as its worker measured it: at least its sleep, within its attempt.
    slept = JobRollup.objects.get(name="tests.sleep", queue="mail")
    attempt = Job.objects.get(name="tests.sleep")
    assert 0.2 <= slept.duration_sum <= (attempt.finished_at - attempt.started_at).total_seconds()
    # The supervisors sampled the queues at start.
    assert QueueSample.objects.filter(queue="default").exists()
