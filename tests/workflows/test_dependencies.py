"""Jobs that wait for other jobs (`.using(after=[...])`), in-process on every database.

A waiting job is never claimed; it becomes pending when every job it waits for has completed,
and is cancelled (recursively) when one ends dead or cancelled, unless it was enqueued with
`on_dependency_failure="run"`. The worker that finishes the last dependency releases it; the
supervisors' sweep releases what a crash or a late enqueue left.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

import django_sqlqueue
from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.dependencies import Sweeper
from django_sqlqueue.exceptions import InvalidJobError
from django_sqlqueue.models import Job, JobDependency
from django_sqlqueue.operations import purgeable
from django_sqlqueue.runtime import transitions
from django_sqlqueue.states import ABANDONED_OWNER, Status
from django_sqlqueue.testing import run_jobs
from tests.testapp.jobs import fail_always, gather, increment, noop, record, unique_record
from tests.testapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def status(job: Job) -> str:
    return Job.objects.get(pk=job.pk).status


def order() -> list[str]:
    return list(Execution.objects.order_by("id").values_list("label", flat=True))


def test_a_diamond_runs_in_order_and_the_last_job_reads_what_the_others_returned():
    a = record.enqueue(label="a")
    b = record.using(after=[a]).enqueue(label="b")
    c = record.using(after=a).enqueue(label="c")
    d = gather.using(after=[b, c.pk]).enqueue(label="d")
    assert [status(job) for job in (a, b, c, d)] == ["pending", "waiting", "waiting", "waiting"]
    assert Job.objects.get(pk=a.pk).has_dependents

    run_jobs()

    assert {status(job) for job in (a, b, c, d)} == {"completed"}
    labels = order()
    assert labels[0] == "a" and labels[-1] == "d" and sorted(labels[1:3]) == ["b", "c"]
    assert Job.objects.get(pk=d.pk).result == {
        "label": "d",
        "after": {str(b.pk): "b", str(c.pk): "c"},
    }


def test_an_atomic_dependency_releases_its_dependent_once_its_transaction_commits():
    counted = increment.enqueue(counter="workflow")
    then = gather.using(after=[counted]).enqueue(label="then")
    run_jobs()
    assert [status(counted), status(then)] == ["completed", "completed"]
    assert order() == ["increment", "then"]


def test_a_waiting_job_is_never_claimed(alias):
    a = record.enqueue(label="a")
    b = record.using(after=[a]).enqueue(label="b")
    claimed = queue_database(alias).claimer().claim("w1", None, 10, 60, timezone.now())
    assert [job.id for job in claimed] == [a.pk]
    assert status(b) == "waiting"


def test_a_dead_dependency_cancels_its_dependents_and_theirs():
    a = fail_always.using(max_attempts=1).enqueue()
    b = record.using(after=[a]).enqueue(label="b")
    c = record.using(after=[b]).enqueue(label="c")
    plain = record.using(after=[noop.enqueue()]).enqueue(label="plain")

    run_jobs()

    assert status(a) == "dead"
    for job in (b, c):
        row = Job.objects.get(pk=job.pk)
        assert row.status == Status.CANCELLED and row.lease_owner == ABANDONED_OWNER
        assert row.attempts == 0 and row.finished_at is not None
    assert f"#{a.pk}" in Job.objects.get(pk=b.pk).last_error
    assert f"#{b.pk}" in Job.objects.get(pk=c.pk).last_error
    assert status(plain) == "completed"
    assert "b" not in order() and "c" not in order()


def test_a_job_enqueued_with_on_dependency_failure_run_runs_anyway():
    a = fail_always.using(max_attempts=1).enqueue()
    ok = record.enqueue(label="ok")
    b = gather.using(after=[a, ok], on_dependency_failure="run").enqueue(label="b")

    run_jobs()

    assert status(a) == "dead"
    assert Job.objects.get(pk=b.pk).result == {
        "label": "b",
        "after": {str(a.pk): None, str(ok.pk): "ok"},
    }


def test_requeueing_the_dead_dependency_puts_the_jobs_it_abandoned_back_to_wait():
    a = fail_always.using(max_attempts=1).enqueue()
    b = record.using(after=[a]).enqueue(label="b")
    c = record.using(after=[b]).enqueue(label="c")
    run_jobs()
    assert status(c) == "cancelled"

    assert django_sqlqueue.requeue(a).applied

    assert status(a) == "pending"
    assert [status(b), status(c)] == ["waiting", "waiting"]
    assert Job.objects.get(pk=b.pk).last_error == ""


def test_a_cancelled_dependency_cancels_its_dependents_in_the_same_transaction():
    a = record.enqueue(label="a")
    b = record.using(after=[a]).enqueue(label="b")
    keep = record.using(after=[a], on_dependency_failure="run").enqueue(label="keep")

    with transaction.atomic():
        assert django_sqlqueue.cancel(a).applied
        assert status(b) == "cancelled"

    assert Job.objects.get(pk=b.pk).lease_owner == ABANDONED_OWNER
    assert status(keep) == "pending"
    # A person cancelling a waiting job is not an abandon: requeueing `a` leaves it alone.
    c = record.using(after=[keep]).enqueue(label="c")
    assert django_sqlqueue.cancel(c).applied
    assert Job.objects.get(pk=c.pk).lease_owner == ""


def test_after_jobs_that_already_finished_decides_at_once():
    done = record.enqueue(label="done")
    dead = fail_always.using(max_attempts=1).enqueue()
    run_jobs()

    assert status(record.using(after=[done]).enqueue(label="x")) == "pending"
    cancelled = record.using(after=[done, dead]).enqueue(label="y")
    assert status(cancelled) == "cancelled"
    assert cancelled.status == Status.CANCELLED  # the returned instance says so too
    assert status(record.using(after=[dead], on_dependency_failure="run").enqueue()) == "pending"


def test_a_future_run_at_is_kept_when_the_job_is_released():
    a = record.enqueue(label="a")
    later = timezone.now() + timezone.timedelta(hours=1)
    b = record.using(after=[a], run_at=later).enqueue(label="b")
    run_jobs()
    row = Job.objects.get(pk=b.pk)
    assert row.status == Status.PENDING and row.run_at == later


def test_enqueue_many_makes_every_job_wait():
    a = record.enqueue(label="a")
    batch = record.using(after=[a]).enqueue_many([{"label": "m1"}, {"label": "m2"}])
    assert [status(job) for job in batch] == ["waiting", "waiting"]
    run_jobs()
    assert {status(job) for job in batch} == {"completed"}


def test_after_an_unknown_id_stores_nothing_and_keeps_the_callers_transaction():
    with transaction.atomic():
        kept = noop.enqueue()
        with pytest.raises(InvalidJobError, match=r"#999999999.*does not exist"):
            record.using(after=[kept, 999_999_999]).enqueue(label="x")
        also = noop.enqueue()  # the transaction is still usable
    assert set(Job.objects.values_list("pk", flat=True)) == {kept.pk, also.pk}
    assert not JobDependency.objects.exists()


def test_a_rolled_back_transaction_leaves_neither_jobs_nor_dependencies():
    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        a = record.enqueue(label="a")
        record.using(after=[a]).enqueue(label="b")
        raise Rollback
    assert not Job.objects.exists() and not JobDependency.objects.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"after": "12"}, "takes a job, a job id, or a list"),
        ({"after": [True]}, "takes jobs"),
        ({"after": [1.5]}, "takes jobs"),
        ({"after": [-3]}, "takes jobs"),
        ({"after": [Job()]}, "never stored"),
        ({"after": list(range(1, 1003))}, "at most 1000"),
        ({"after": [1], "on_dependency_failure": "skip"}, "'cancel' or 'run'"),
        ({"on_dependency_failure": "run"}, "needs after="),
        ({"after": [1], "idempotency_key": "k"}, "idempotency_key"),
    ],
)
def test_bad_after_options_are_refused_naming_the_job(options, message):
    with pytest.raises(InvalidJobError, match=message) as caught:
        record.using(**options).enqueue(label="x")
    assert "tests.record" in str(caught.value)
    assert not Job.objects.exists()


def test_a_unique_job_cannot_wait_yet():
    a = noop.enqueue()
    with pytest.raises(InvalidJobError, match="unique"):
        unique_record.using(after=[a]).enqueue(label="u")


def test_purge_keeps_a_finished_job_that_an_unfinished_one_waits_for():
    a = record.enqueue(label="a")
    slow = record.using(run_at=timezone.now() + timezone.timedelta(hours=1)).enqueue()
    b = record.using(after=[a, slow]).enqueue(label="b")
    run_jobs()
    assert status(a) == "completed" and status(b) == "waiting"
    assert a.pk not in set(purgeable().values_list("pk", flat=True))

    django_sqlqueue.run_now(slow)
    run_jobs()
    assert status(b) == "completed"
    assert {a.pk, b.pk, slow.pk} <= set(purgeable().values_list("pk", flat=True))


def test_the_sweep_releases_a_job_whose_dependency_was_claimed_before_it_was_enqueued(alias):
    a = record.enqueue(label="a")
    [claimed] = queue_database(alias).claimer().claim("w1", None, 1, 60, timezone.now())
    b = record.using(after=[a]).enqueue(label="b")
    assert not claimed.has_dependents  # the worker does not know about b

    assert transitions.complete(claimed, "a", alias=alias)
    assert status(b) == "waiting"

    decided = Sweeper(queue_database(alias)).sweep()
    assert decided.ready == [b.pk]
    assert status(b) == "pending"
    assert Sweeper(queue_database(alias)).sweep().ready == []  # once


def test_the_sweep_cancels_what_a_crash_left_after_a_dead_dependency(alias):
    a = record.enqueue(label="a")
    b = record.using(after=[a]).enqueue(label="b")
    c = record.using(after=[b], on_dependency_failure="run").enqueue(label="c")
    # The dependency's exit was written, and its worker died before releasing anything.
    Job.objects.filter(pk=a.pk).update(status=Status.DEAD, finished_at=timezone.now())

    decided = Sweeper(queue_database(alias)).sweep()

    assert decided.abandoned == [b.pk] and decided.ready == [c.pk]
    assert [status(b), status(c)] == ["cancelled", "pending"]


def test_each_edge_is_marked_done_when_its_dependency_finishes(alias):
    """What makes "anything left?" one index probe: the edges of finished jobs say so."""
    members = [record.enqueue(label=f"m{n}") for n in range(4)]
    done = fail_always.using(max_attempts=1).enqueue()
    waiting = gather.using(after=[*members, done], on_dependency_failure="run").enqueue()

    def edges() -> dict[int, bool]:
        links = JobDependency.objects.filter(job_id=waiting.pk)
        return dict(links.values_list("depends_on_id", "done"))

    assert set(edges().values()) == {False}
    run_jobs(name="tests.fail_always")
    assert edges()[done.pk] and not any(v for k, v in edges().items() if k != done.pk)
    run_jobs(max_jobs=2, name="tests.record")
    assert sum(edges().values()) == 3 and status(waiting) == "waiting"
    run_jobs()
    assert set(edges().values()) == {True} and status(waiting) == "completed"
    # Requeued, a dependency is waited for again: its edge is not done any more.
    django_sqlqueue.requeue(members[0])
    assert not edges()[members[0].pk]


def test_the_sweep_reads_a_bounded_slice_and_goes_on_where_it_stopped(alias):
    firsts = [record.enqueue(label=f"f{n}") for n in range(5)]
    thens = [record.using(after=[first]).enqueue(label=f"t{n}") for n, first in enumerate(firsts)]
    # Their worker died after each exit, before marking anything: five stale edges.
    Job.objects.filter(pk__in=[j.pk for j in firsts]).update(status=Status.COMPLETED)
    sweeper = Sweeper(queue_database(alias), limit=2)
    released: list[int] = []
    for _ in range(3):
        released += sweeper.sweep().ready
    assert sorted(released) == [j.pk for j in thens]
    assert {status(j) for j in thens} == {"pending"}


def test_a_deleted_dependency_no_longer_holds_its_dependent(alias):
    a = record.enqueue(label="a")
    b = record.using(after=[a]).enqueue(label="b")
    Job.objects.filter(pk=a.pk).delete()
    assert Sweeper(queue_database(alias)).sweep().ready == [b.pk]
