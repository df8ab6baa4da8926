"""Job references are never reused: after a failover that lost the newest jobs and the id
sequence's progress, a reference kept from before names no job, never the job that took its
id. The sequence is rewound here as the failover rewinds it (`rewind_job_ids`);
tests/workers/test_failover.py does it with a real standby promoted mid-run."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

import django_sqlqueue
from django_sqlqueue.models import Job
from django_sqlqueue.references import format_reference, id_in, parse_reference
from django_sqlqueue.states import Status
from tests.tasksapp.tasks_settings import TASKS
from tests.test_admin.helpers import changelist_url
from tests.testapp.jobs import noop

pytestmark = pytest.mark.django_db(transaction=True)


class TestSpelling:
    def test_round_trip(self) -> None:
        for job_id, nonce in [(1, 0), (4711, 0x3F9A), (2**63 - 1, 2**63 - 1), (12, None)]:
            text = format_reference(job_id, nonce)
            assert parse_reference(text) == (job_id, nonce)
            assert id_in(text) == job_id

    @pytest.mark.parametrize(
        "text",
        [
            "",
            "0",
            "-1",
            "007",
            "12-",
            "12-0f",  # a leading zero: not as issued
            "12-3F9A",  # upper case
            "12-" + "f" * 16,  # past 63 bits
            str(2**63),
            "12-3f9a-1",
            " 12-3f9a",
            "\uff11\uff12",  # fullwidth digits, which int() would read
            "12-\uff13",
        ],
    )
    def test_other_spellings_are_not_references(self, text: str) -> None:
        assert parse_reference(text) is None
        with pytest.raises(ValueError, match="is not a job reference"):
            id_in(text)


def test_every_job_gets_a_reference_of_its_own() -> None:
    jobs = [noop.enqueue(), *noop.enqueue_many([{}, {}])]
    stored = {job.pk: job.ref_nonce for job in Job.objects.all()}
    for job in jobs:
        assert job.ref_nonce is not None and stored[job.pk] == job.ref_nonce
        assert job.reference == f"{job.pk}-{job.ref_nonce:x}"
        assert Job.objects.referenced(job.reference).get() == job
    # The id alone is not the reference of a job that has a nonce.
    assert not Job.objects.referenced(str(jobs[0].pk)).exists()
    assert len({job.ref_nonce for job in jobs}) == 3


def lost_and_reused(rewind_job_ids: Callable[[int], None]) -> tuple[str, Job]:
    """A job is enqueued and its reference kept; the failover loses it and the sequence's
    progress; the next job takes its id. (the kept reference, the new job)"""
    lost = noop.enqueue()
    kept = lost.reference
    Job.objects.filter(pk=lost.pk).delete()
    rewind_job_ids(lost.pk)
    new = noop.enqueue()
    assert new.pk == lost.pk and new.reference != kept
    return kept, new


def test_a_lost_jobs_reference_names_no_job(rewind_job_ids: Callable[[int], None]) -> None:
    kept, new = lost_and_reused(rewind_job_ids)
    assert not Job.objects.referenced(kept).exists()
    assert Job.objects.referenced(new.reference).get() == new


def test_operations_on_a_lost_reference_change_nothing(
    rewind_job_ids: Callable[[int], None],
) -> None:
    kept, new = lost_and_reused(rewind_job_ids)
    for operation in (django_sqlqueue.cancel, django_sqlqueue.requeue, django_sqlqueue.run_now):
        done = operation(kept)
        assert (done.applied, done.status, done.message) == (False, None, f"No job {kept}.")
    assert Job.objects.get(pk=new.pk).status == Status.PENDING
    assert django_sqlqueue.cancel(new.reference).applied
    assert Job.objects.get(pk=new.pk).status == Status.CANCELLED


def test_a_reference_that_is_no_reference_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a job reference"):
        django_sqlqueue.cancel("twelve")


def test_the_admin_search_finds_only_the_referenced_job(
    admin_client: Any, rewind_job_ids: Callable[[int], None]
) -> None:
    kept, new = lost_and_reused(rewind_job_ids)
    found = admin_client.get(changelist_url(), {"q": new.reference})
    assert [job.pk for job in found.context["cl"].result_list] == [new.pk]
    lost = admin_client.get(changelist_url(), {"q": kept})
    assert list(lost.context["cl"].result_list) == []


def test_the_admin_page_of_a_reference(
    admin_client: Any, rewind_job_ids: Callable[[int], None]
) -> None:
    """`.../job/<reference>/change/`, as docs/tasks.md builds it from a result id."""
    kept, new = lost_and_reused(rewind_job_ids)
    page = admin_client.get(reverse("admin:django_sqlqueue_job_change", args=[new.reference]))
    assert page.status_code == 200 and page.context["original"] == new
    lost = admin_client.get(reverse("admin:django_sqlqueue_job_change", args=[kept]))
    assert lost.status_code == 302  # Django's "doesn't exist" message, back to the list
    by_id = admin_client.get(reverse("admin:django_sqlqueue_job_change", args=[new.pk]))
    assert by_id.context["original"] == new


def test_jobs_show_takes_references(rewind_job_ids: Callable[[int], None]) -> None:
    kept, new = lost_and_reused(rewind_job_ids)
    out = StringIO()
    call_command("jobs", "show", new.reference, stdout=out)
    assert f"reference:           {new.reference}" in out.getvalue()
    with pytest.raises(CommandError, match=f"No job {kept}"):
        call_command("jobs", "show", kept)
    out = StringIO()
    call_command("jobs", "list", "--id", f"{kept},{new.reference}", stdout=out)
    assert str(new.pk) in out.getvalue() and "1 job" in out.getvalue()


def test_jobs_stored_before_references_keep_their_id_as_reference(
    make_job: Callable[..., Job],
) -> None:
    """Rows from before migration 0011 have no nonce: their reference is their id alone,
    which names no job that has one."""
    old = make_job()
    assert old.ref_nonce is None and old.reference == str(old.pk)
    assert Job.objects.referenced(str(old.pk)).get() == old
    assert django_sqlqueue.cancel(str(old.pk)).applied


@pytest.mark.skipif(not TASKS, reason="no Tasks framework installed")
def test_a_lost_task_results_id_names_no_result(rewind_job_ids: Callable[[int], None]) -> None:
    from django_sqlqueue.tasks.compat import TaskResultDoesNotExist
    from tests.tasksapp import tasks

    lost = tasks.add.enqueue(1, 2)
    Job.objects.filter(pk=id_in(lost.id)).delete()
    rewind_job_ids(id_in(lost.id))
    new = tasks.add.enqueue(3, 4)
    assert id_in(new.id) == id_in(lost.id) and new.id != lost.id
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(lost.id)
    assert tasks.add.get_result(new.id).args == [3, 4]
