"""`django_sqlqueue.chain(...)`: steps stored in one transaction, each after the one before."""

from __future__ import annotations

import pytest
from django.db import transaction

import django_sqlqueue
from django_sqlqueue.exceptions import InvalidJobError
from django_sqlqueue.models import Job, JobDependency
from django_sqlqueue.testing import run_jobs
from tests.testapp.jobs import add, fail_always, gather, noop, record
from tests.testapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def statuses(jobs: list[Job]) -> list[str]:
    return [Job.objects.get(pk=job.pk).status for job in jobs]


def test_each_step_runs_after_the_one_before_and_reads_its_result():
    jobs = django_sqlqueue.chain(
        record.prepare(label="one"),
        record.using(queue="other").prepare(label="two"),
        gather.prepare(label="three"),
    ).enqueue()

    assert statuses(jobs) == ["pending", "waiting", "waiting"]
    assert Job.objects.get(pk=jobs[1].pk).queue == "other"
    assert list(JobDependency.objects.order_by("id").values_list("job_id", "depends_on_id")) == [
        (jobs[1].pk, jobs[0].pk),
        (jobs[2].pk, jobs[1].pk),
    ]
    run_jobs()
    assert list(Execution.objects.order_by("id").values_list("label", flat=True)) == [
        "one",
        "two",
        "three",
    ]
    assert Job.objects.get(pk=jobs[2].pk).result == {
        "label": "three",
        "after": {str(jobs[1].pk): "two"},
    }


def test_a_dead_step_cancels_the_rest():
    jobs = django_sqlqueue.chain(
        fail_always.using(max_attempts=1).prepare(),
        record.prepare(label="never"),
        record.prepare(label="nor this"),
    ).enqueue()
    run_jobs()
    assert statuses(jobs) == ["dead", "cancelled", "cancelled"]


def test_a_step_keeps_the_jobs_its_own_options_wait_for():
    other = noop.enqueue()
    first, second = django_sqlqueue.chain(
        record.prepare(label="first"), record.using(after=other).prepare(label="second")
    ).enqueue()
    waits_for = set(
        JobDependency.objects.filter(job_id=second.pk).values_list("depends_on_id", flat=True)
    )
    assert waits_for == {other.pk, first.pk}


def test_a_bad_step_stores_no_step_and_keeps_the_callers_transaction():
    with transaction.atomic():
        kept = noop.enqueue()
        with pytest.raises(InvalidJobError, match=r"tests\.add"):
            django_sqlqueue.chain(record.prepare(label="a"), add.prepare(1)).enqueue()
        also = noop.enqueue()
    assert set(Job.objects.values_list("pk", flat=True)) == {kept.pk, also.pk}


@pytest.mark.parametrize("steps", [(), (noop,), ("noop",), (noop.prepare(), None)])
def test_a_chain_takes_prepared_jobs_only(steps):
    with pytest.raises(InvalidJobError, match="chain"):
        django_sqlqueue.chain(*steps)


def test_a_prepared_job_enqueues_alone_too():
    prepared = record.using(priority=5).prepare(label="alone")
    assert "tests.record" in repr(prepared)
    job = prepared.enqueue()
    assert (job.priority, job.kwargs) == (5, {"label": "alone"})
