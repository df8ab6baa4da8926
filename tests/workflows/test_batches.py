"""Batches (`with django_sqlqueue.batch(on_complete=...)`), in-process on every database.

Every job enqueued in the block joins the batch; once it is closed and every member has
finished (completed, dead or cancelled) its callback is stored exactly once and reads
`context.batch`. The worker that finishes a member looks once per claimed round; the
supervisors' sweep finishes what a crash left.
"""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

import django_sqlqueue
from django_sqlqueue import Batch, batch
from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.batches import BatchSweeper, anything_left, finish
from django_sqlqueue.exceptions import InvalidJobError
from django_sqlqueue.models import Job, JobBatch
from django_sqlqueue.operations import purgeable
from django_sqlqueue.runtime import transitions
from django_sqlqueue.testing import run_jobs
from tests.testapp.jobs import batch_report, fail_always, noop, open_batch, record
from tests.testapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def callbacks(label: str | None = None) -> list[Job]:
    """The batch_report jobs stored (with `label`, those given that label)."""
    found = Job.objects.filter(name="tests.batch_report")
    return list(found if label is None else found.filter(kwargs__label=label))


def labels() -> list[str]:
    return list(Execution.objects.order_by("id").values_list("label", flat=True))


def test_the_callback_runs_once_after_every_member_and_reads_the_batch():
    with batch(on_complete=batch_report, label="report") as b:
        members = [record.enqueue(label=f"m{i}") for i in range(5)]
        members += noop.enqueue_many([{"n": i} for i in range(3)])
    assert {job.batch_id for job in Job.objects.filter(pk__in=[m.pk for m in members])} == {b.id}
    assert JobBatch.objects.get(pk=b.id).state == "closed"
    assert callbacks() == []

    run_jobs()

    [callback] = callbacks()
    assert callback.status == "completed"
    assert callback.result == {
        "id": b.id, "total": 8, "completed": 8, "dead": 0, "cancelled": 0, "state": "finished"
    }  # fmt: skip
    assert labels()[-1] == "report" and len(labels()) == 6
    row = JobBatch.objects.get(pk=b.id)
    assert row.callback_job_id == callback.pk and row.finished_at is not None
    assert callback.batch_id is None  # a batch with no parent: its callback joins none


def test_dead_and_cancelled_members_count_as_finished():
    with batch(on_complete=batch_report.prepare(label="mixed")) as b:
        fail_always.using(max_attempts=1).enqueue()
        cancelled = record.enqueue(label="cancelled")
        record.enqueue(label="ok")
    django_sqlqueue.cancel(cancelled)

    run_jobs()

    [callback] = callbacks("mixed")
    assert callback.result["dead"] == 1 and callback.result["cancelled"] == 1
    assert callback.result["completed"] == 1 and callback.result["total"] == 3
    assert b.progress().finished


def test_cancelling_the_last_unfinished_member_finishes_the_batch_at_once():
    with batch(on_complete=batch_report) as b:
        only = record.enqueue(label="only")
    django_sqlqueue.cancel(only)
    [callback] = callbacks()
    assert callback.status == "pending"
    assert b.progress().cancelled == 1


def test_an_empty_batch_calls_back_when_closed():
    with batch(on_complete=batch_report) as b:
        pass
    [callback] = callbacks()
    run_jobs()
    assert Job.objects.get(pk=callback.pk).result["total"] == 0
    assert b.progress().state == "finished"


def test_a_rolled_back_transaction_leaves_neither_batch_nor_jobs():
    with pytest.raises(RuntimeError), transaction.atomic():
        with batch(on_complete=batch_report):
            record.enqueue(label="lost")
        raise RuntimeError("the business write failed")
    assert not JobBatch.objects.exists() and not Job.objects.exists()


def test_an_exception_in_the_block_rolls_back_the_batch_and_its_jobs():
    with pytest.raises(ValueError), batch(on_complete=batch_report):
        record.enqueue(label="lost")
        raise ValueError("half-built")
    assert not JobBatch.objects.exists() and not Job.objects.exists()


def test_a_batch_kept_open_never_calls_back_before_it_is_closed():
    with batch(on_complete=batch_report, keep_open=True) as b:
        record.enqueue(label="first")
    run_jobs()
    assert callbacks() == [] and b.progress().state == "open"
    with batch.open(b.id):
        record.enqueue(label="later")
    run_jobs()
    assert callbacks() == []
    assert b.close() is True and b.close() is False
    [callback] = callbacks()
    run_jobs()
    assert Job.objects.get(pk=callback.pk).result["total"] == 2
    with pytest.raises(InvalidJobError, match="is closed"), batch.open(b):
        record.enqueue(label="too late")
    assert Job.objects.filter(kwargs__label="too late").count() == 0


def test_bad_batches_fail_clearly():
    with pytest.raises(InvalidJobError, match="does not exist"), batch.open(999_999):
        pass
    with pytest.raises(InvalidJobError, match="no on_complete"):
        batch(label_of_report="x")
    with pytest.raises(InvalidJobError, match="takes a job"):
        batch(on_complete=print)
    with pytest.raises(InvalidJobError, match="idempotency_key"):
        batch(on_complete=batch_report.using(idempotency_key="k"))
    with pytest.raises(InvalidJobError, match="in prepare"):
        batch(on_complete=batch_report.prepare(), label_x=1)
    with pytest.raises(InvalidJobError):
        batch(on_complete=batch_report, not_an_argument=1)  # the handler has no such argument
    with pytest.raises(InvalidJobError, match="does not exist"):
        batch.get(999_999)
    assert not JobBatch.objects.exists()


def test_a_callback_that_opens_a_batch_and_a_batch_inside_a_batch():
    with batch(on_complete=open_batch.prepare(size=2, label="inner")) as outer:
        record.enqueue(label="outer-0")
        with batch(on_complete=batch_report.prepare(label="child")) as child:
            record.enqueue(label="child-0")
    assert JobBatch.objects.get(pk=child.id).parent_id == outer.id

    run_jobs()

    done = labels()
    # The child's callback joined the outer batch: the outer's callback came after it.
    assert done.index("child") < done.index("inner")
    assert done[-1] == "inner-report"
    [inner_report] = callbacks("inner-report")
    assert inner_report.result["total"] == 2
    assert Job.objects.get(name="tests.batch_report", kwargs__label="child").batch_id == outer.id
    assert outer.progress().total == 2  # outer-0 and the child's callback


def test_two_checkers_at_once_store_one_callback(alias):
    with batch(on_complete=batch_report) as b:
        record.enqueue(label="m")
    run_jobs()  # the worker finished it: one callback
    JobBatch.objects.filter(pk=b.id).update(finished_at=None, callback_job=None)
    Job.objects.filter(name="tests.batch_report").delete()
    barrier = threading.Barrier(2)
    outcomes: list[bool] = []

    def check() -> None:
        from django.db import connections

        try:
            barrier.wait()
            outcomes.append(finish(queue_database(alias), b.id))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=check) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == [False, True]
    assert len(callbacks()) == 1


def test_the_sweep_finishes_a_batch_whose_worker_died_before_looking(alias):
    with batch(on_complete=batch_report) as b:
        member = record.enqueue(label="m")
    # The member's end, written by a worker that dies before its next claim: nothing looks.
    claimed = queue_database(alias).claimer().claim("w1", None, 10, 60, member.created_at)
    assert transitions.complete(claimed[0], None, alias=alias)
    from django_sqlqueue.databases import batches

    batches._noted.clear()  # the process died with its notes
    assert callbacks() == [] and not anything_left(alias, b.id)
    assert BatchSweeper(queue_database(alias)).sweep() == [b.id]
    assert BatchSweeper(queue_database(alias)).sweep() == []
    assert len(callbacks()) == 1


def test_batch_cancel_cancels_its_unfinished_members_and_calls_back():
    with batch(on_complete=batch_report) as b:
        for index in range(3):
            record.enqueue(label=f"m{index}")
    assert b.cancel() == 3
    assert b.progress().cancelled == 3
    run_jobs()
    [callback] = callbacks()
    assert Job.objects.get(pk=callback.pk).result["cancelled"] == 3
    assert JobBatch.objects.get(pk=b.id).cancelled_at is not None


def test_purge_keeps_members_of_a_batch_that_has_not_finished():
    with batch(on_complete=batch_report, keep_open=True) as b:
        done = record.enqueue(label="done")
    run_jobs()
    assert Job.objects.get(pk=done.pk).status == "completed"
    assert not purgeable().filter(pk=done.pk).exists()
    b.close()
    run_jobs()
    assert purgeable().filter(pk=done.pk).exists()


def test_jobs_outside_the_block_join_no_batch_and_current_says_which():
    assert batch.current() is None
    with batch() as b:
        assert batch.current() == b
        inside = record.enqueue(label="in")
    outside = record.enqueue(label="out")
    assert Job.objects.get(pk=inside.pk).batch_id == b.id
    assert Job.objects.get(pk=outside.pk).batch_id is None
    assert isinstance(b, Batch) and b.progress().total == 1


def test_purgejobs_deletes_finished_batches_once_their_jobs_are_gone():
    from io import StringIO

    from django.core.management import call_command

    with batch(on_complete=batch_report) as b:
        record.enqueue(label="m")
    with batch(keep_open=True) as still_open:
        pass
    run_jobs()
    out = StringIO()
    call_command("purgejobs", "--days", "0", stdout=out)
    assert "Deleted 1 finished batches" in out.getvalue()
    assert list(JobBatch.objects.values_list("id", flat=True)) == [still_open.id]
    assert not JobBatch.objects.filter(pk=b.id).exists()


def test_batch_is_public_api():
    from django_sqlqueue import BatchProgress

    assert {"batch", "Batch", "BatchProgress"} <= set(django_sqlqueue.__all__)
    assert django_sqlqueue.batch is batch
    with batch() as b:
        pass
    assert isinstance(b.progress(), BatchProgress)


def test_anything_left_reads_the_partial_index_of_batch_members(alias, vendor):
    """A batch's "anything left?" is served by sqlqueue_batch_members, which holds only jobs
    in a batch (partial where the database has partial indexes): jobs in no batch never
    write it."""
    from django.db import connections

    from django_sqlqueue.states import UNFINISHED_VALUES

    if vendor == "mysql":
        pytest.skip("MariaDB has no partial indexes: the index is a plain (batch, status) one")
    with batch() as b:
        record.enqueue(label="m")
    noop.enqueue_many([{} for _ in range(50)])
    probe = Job.objects.filter(batch_id=b.id, status__in=UNFINISHED_VALUES)
    with transaction.atomic():
        if vendor == "postgresql":
            with connections[alias].cursor() as cursor:
                cursor.execute("SET LOCAL enable_seqscan = off")
        plan = probe.explain()
    assert "sqlqueue_batch_members" in plan
