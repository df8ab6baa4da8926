"""The batch admin: the list with each batch's progress, the batch's page with its members by
status, *Cancel batch* behind a confirmation page, the job list's batch filter and the batch
in a job's workflow section."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import trans_real

from django_sqlqueue import batch
from django_sqlqueue.conf import get_settings
from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.batches import finish
from django_sqlqueue.models import Job, JobBatch
from django_sqlqueue.registry import registry
from django_sqlqueue.states import Status
from django_sqlqueue.testing import run_jobs
from tests.testapp.jobs import batch_report, record

from .helpers import change_url, changelist_url, messages_of, staff_client
from .test_templates import project_templates
from .test_translation import PSEUDO, PseudoTranslation, pseudo, untranslated

pytestmark = pytest.mark.django_db

BATCHES = "admin:django_sqlqueue_jobbatch_changelist"
HREF = re.compile(r'href="([^"]*)"')


@pytest.fixture
def batch_viewer(db: Any) -> Client:
    """Staff who may look at jobs and batches but change nothing."""
    return staff_client("batch_viewer", "view_job", "view_jobbatch")


@pytest.fixture
def batch_changer(db: Any) -> Client:
    """Staff who may look at batches and cancel jobs: the job cancel's permission."""
    return staff_client("batch_changer", "view_job", "change_job", "view_jobbatch")


def make_batch(label: str = "nightly", size: int = 3) -> tuple[JobBatch, list[Job]]:
    with batch(on_complete=batch_report, label=label) as opened:
        members = [record.enqueue(label=f"{label}-{i}") for i in range(size)]
    return JobBatch.objects.get(pk=opened.id), members


def finish_empty(row: JobBatch) -> None:
    """Finish a closed batch without members, as the supervisors' sweep would (its close's
    own look waits for a commit that a test's transaction never makes)."""
    assert finish(queue_database(get_settings().database), row.pk)
    row.refresh_from_db()


def set_status(job: Job, status: str) -> None:
    Job.objects.filter(pk=job.pk).update(status=status, finished_at=timezone.now())


def batch_url(row: JobBatch) -> str:
    return reverse("admin:django_sqlqueue_jobbatch_change", args=[row.pk])


def cancel_url(row: JobBatch) -> str:
    return reverse("admin:django_sqlqueue_jobbatch_cancel", args=[row.pk])


def get_page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def listed_ids(response: Any) -> list[int]:
    return [job.pk for job in response.context["cl"].result_list]


def statuses(jobs: list[Job]) -> list[str]:
    return [Job.objects.get(pk=job.pk).status for job in jobs]


def jobs_link(content: str, batch_id: int, status: str | None = None) -> str:
    """The href on the page that lists the batch's members (in `status`)."""
    for href in HREF.findall(content):
        url = html.unescape(href)
        if f"batch={batch_id}" not in url or not url.startswith(changelist_url()):
            continue
        if (status is None and "status__exact" not in url) or f"status__exact={status}" in url:
            return url
    raise AssertionError(f"no link to the jobs of batch #{batch_id} ({status})")


# The list.


def test_list_shows_each_batch_its_state_progress_and_callback(batch_viewer):
    done, _ = make_batch("done", size=2)
    run_jobs()
    done.refresh_from_db()
    assert done.callback_job_id is not None
    waiting, members = make_batch("waiting", size=3)
    set_status(members[0], Status.DEAD)
    response = batch_viewer.get(reverse(BATCHES))
    assert response.status_code == 200
    assert [row.pk for row in response.context["cl"].result_list] == [waiting.pk, done.pk]
    content = response.content.decode()
    assert ">Finished</span>" in content and ">Closed</span>" in content
    assert '<progress max="2" value="2">' in content and "2 of 2 members finished" in content
    assert '<progress max="3" value="1">' in content and "1 of 3 members finished" in content
    assert "1 dead" in content
    callback = reverse("admin:django_sqlqueue_job_change", args=[done.callback_job_id])
    assert f'<a href="{callback}">#{done.callback_job_id}</a>' in content
    assert "not yet" in content  # the waiting batch's callback


def test_list_counts_members_in_one_read_whatever_the_page_holds(batch_viewer):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert batch_viewer.get(reverse(BATCHES)).status_code == 200
        grouped = [q["sql"] for q in captured if "GROUP BY" in q["sql"].upper()]
        assert len(grouped) == 1, grouped  # every batch's members in one read
        return len(captured)

    make_batch("first", size=2)
    few = queries()
    for n in range(8):
        make_batch(f"more-{n}", size=n)
    assert queries() == few
    # session, user, 2 x permissions, the page's batches, their members.
    assert few <= 7


def test_list_query_budget(batch_viewer, django_assert_max_num_queries):
    for n in range(5):
        make_batch(f"b{n}", size=4)
    with django_assert_max_num_queries(7):
        batch_viewer.get(reverse(BATCHES), {"state": "closed"})


def test_state_filter_and_search(batch_viewer):
    open_one = JobBatch.objects.create(label="kept open")
    closed, _ = make_batch("closed one")
    found = batch_viewer.get(reverse(BATCHES), {"state": "open"}).context["cl"].result_list
    assert [row.pk for row in found] == [open_one.pk]
    found = batch_viewer.get(reverse(BATCHES), {"q": "closed"}).context["cl"].result_list
    assert [row.pk for row in found] == [closed.pk]


# The batch's page.


def test_page_lists_members_by_status_and_its_links_list_exactly_them(batch_viewer):
    row, members = make_batch("import", size=3)
    with batch(label="other") as other:  # another batch
        outsider = record.enqueue(label="outsider")
    assert other.id != row.pk
    set_status(members[0], Status.DEAD)
    set_status(members[1], Status.COMPLETED)
    content = get_page(batch_viewer, batch_url(row))
    assert "Members" in content and "1 of 3 members finished" not in content
    assert "2 of 3 members finished" in content and "1 dead" in content and "1 left" in content
    for status in ("dead", "completed", "pending"):
        assert f'data-status="{status}"' in content
    assert 'data-status="running"' not in content  # only statuses it has

    dead = batch_viewer.get(jobs_link(content, row.pk, "dead"))
    assert listed_ids(dead) == [members[0].pk]
    pending = batch_viewer.get(jobs_link(content, row.pk, "pending"))
    assert listed_ids(pending) == [members[2].pk]
    everyone = batch_viewer.get(jobs_link(content, row.pk))
    assert sorted(listed_ids(everyone)) == sorted(m.pk for m in members)
    assert outsider.pk not in listed_ids(everyone)
    assert f"batch #{row.pk} (import)" in everyone.content.decode()  # the filter's choice


def test_page_shows_the_callback_parent_and_children(batch_viewer):
    with batch(on_complete=batch_report, label="outer") as outer:
        record.enqueue(label="a")
        with batch(on_complete=batch_report, label="inner") as inner:
            record.enqueue(label="b")
    content = get_page(batch_viewer, batch_url(JobBatch.objects.get(pk=outer.id)))
    assert f'href="{batch_url(JobBatch(pk=inner.id))}"' in content  # its child
    assert "not yet" in content and "tests.batch_report" in content
    content = get_page(batch_viewer, batch_url(JobBatch.objects.get(pk=inner.id)))
    assert f'href="{batch_url(JobBatch(pk=outer.id))}"' in content  # its parent

    run_jobs()
    row = JobBatch.objects.get(pk=outer.id)
    assert row.finished_at is not None
    content = get_page(batch_viewer, batch_url(row))
    callback = reverse("admin:django_sqlqueue_job_change", args=[row.callback_job_id])
    assert f'<a href="{callback}">#{row.callback_job_id}</a>' in content
    assert ">Finished</span>" in content
    without = JobBatch.objects.create(label="no callback", closed_at=timezone.now())
    assert "none" in get_page(batch_viewer, batch_url(without))


def test_nobody_adds_edits_or_deletes_batches(admin_client):
    row, _ = make_batch()
    assert admin_client.get(reverse("admin:django_sqlqueue_jobbatch_add")).status_code == 403
    assert admin_client.post(batch_url(row), {"label": "changed"}).status_code == 403
    assert JobBatch.objects.get(pk=row.pk).label == "nightly"
    delete = reverse("admin:django_sqlqueue_jobbatch_delete", args=[row.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    content = get_page(admin_client, batch_url(row))
    assert 'name="_save"' not in content and "deletelink" not in content


# Cancel.


def test_cancel_from_the_page_asks_then_cancels_the_unfinished_members(batch_changer):
    row, members = make_batch("to cancel", size=3)
    set_status(members[0], Status.COMPLETED)
    content = get_page(batch_changer, batch_url(row))
    assert f'<a href="{cancel_url(row)}" class="sq-tool sq-tool-cancel"' in content

    confirm = get_page(batch_changer, cancel_url(row))
    assert 'value="Yes, cancel"' in confirm and "2 of 3 members not finished" in confirm
    assert batch_changer.post(cancel_url(row)).status_code == 200  # asks again
    assert statuses(members) == ["completed", "pending", "pending"]
    assert JobBatch.objects.get(pk=row.pk).cancelled_at is None

    response = batch_changer.post(cancel_url(row), {"confirmed": "yes"}, follow=True)
    assert response.redirect_chain[-1][0] == batch_url(row)
    assert statuses(members) == ["completed", "cancelled", "cancelled"]
    assert JobBatch.objects.get(pk=row.pk).cancelled_at is not None
    assert messages_of(response) == [f"Cancelled batch #{row.pk}. 2 unfinished members cancelled."]
    history = reverse("admin:django_sqlqueue_jobbatch_history", args=[row.pk])
    assert "Cancelled from the admin." in get_page(batch_changer, history)


def test_cancel_asks_running_members_to_stop(batch_changer, claim):
    row, members = make_batch("running", size=1)
    claim("worker-a")
    confirm = get_page(batch_changer, cancel_url(row))
    assert "Running jobs are asked to stop" in confirm
    response = batch_changer.post(cancel_url(row), {"confirmed": "yes"}, follow=True)
    job = Job.objects.get(pk=members[0].pk)
    assert job.status == "running" and job.cancel_requested_at is not None
    assert "Running jobs are asked to stop" in messages_of(response)[0]


def test_a_finished_batch_offers_no_cancel(batch_changer):
    row, _ = make_batch("finished", size=1)
    run_jobs()
    assert "sq-tool-cancel" not in get_page(batch_changer, batch_url(row))
    confirm = get_page(batch_changer, cancel_url(row))
    assert "nothing is left to cancel" in confirm and 'value="Yes, cancel"' not in confirm


def test_cancel_selected_batches_from_the_list(batch_changer):
    first, first_members = make_batch("first", size=2)
    second, second_members = make_batch("second", size=1)
    finished, _ = make_batch("finished", size=0)
    finish_empty(finished)
    data: dict[str, Any] = {
        "action": "cancel_selected",
        ACTION_CHECKBOX_NAME: [str(first.pk), str(second.pk)],
        "select_across": "0",
        "index": "0",
    }
    confirm = batch_changer.post(reverse(BATCHES), data)
    assert confirm.status_code == 200
    content = confirm.content.decode()
    assert "<strong>2</strong> selected batches" in content and 'value="Yes, cancel"' in content
    assert statuses(first_members + second_members) == ["pending"] * 3

    response = batch_changer.post(reverse(BATCHES), {**data, "confirmed": "yes"}, follow=True)
    assert statuses(first_members + second_members) == ["cancelled"] * 3
    assert messages_of(response) == ["Cancelled 2 batches. 3 unfinished members cancelled."]

    all_three = {**data, ACTION_CHECKBOX_NAME: [str(finished.pk)], "select_across": "1"}
    response = batch_changer.post(reverse(BATCHES), {**all_three, "confirmed": "yes"}, follow=True)
    finished.refresh_from_db()
    assert finished.state == "finished" and finished.cancelled_at is None
    assert "Skipped 1 batch that had finished already." in messages_of(response)[0]


def test_cancel_needs_the_permission_cancelling_a_job_needs(batch_viewer):
    row, members = make_batch("kept", size=2)
    content = get_page(batch_viewer, batch_url(row))
    assert "sq-tool-cancel" not in content
    assert 'value="cancel_selected"' not in get_page(batch_viewer, reverse(BATCHES))
    assert batch_viewer.get(cancel_url(row)).status_code == 403
    assert batch_viewer.post(cancel_url(row), {"confirmed": "yes"}).status_code == 403
    forged = {
        "action": "cancel_selected",
        ACTION_CHECKBOX_NAME: [str(row.pk)],
        "index": "0",
        "confirmed": "yes",
    }
    assert batch_viewer.post(reverse(BATCHES), forged).status_code == 403
    assert statuses(members) == ["pending", "pending"]
    assert JobBatch.objects.get(pk=row.pk).cancelled_at is None


def test_the_job_permission_alone_does_not_open_the_batch_pages(changer):
    row, _ = make_batch()
    assert changer.get(batch_url(row)).status_code == 403
    assert changer.get(cancel_url(row)).status_code == 403


@pytest.mark.parametrize("level", ["admin/django_sqlqueue/jobbatch", "admin/django_sqlqueue"])
def test_a_project_overrides_the_batch_templates(batch_changer, tmp_path, level):
    row, _ = make_batch()
    files = {
        f"{level}/change_form.html": '{% extends "django_sqlqueue/admin/batch_change_form.html" %}'
        "{% block footer %}<!-- project page -->{% endblock %}",
        f"{level}/batch_confirm_cancel.html": "<!-- project confirm -->",
    }
    with project_templates(tmp_path, files):
        page = get_page(batch_changer, batch_url(row))
        assert "<!-- project page -->" in page and "sq-tool-cancel" in page
        assert "<!-- project confirm -->" in get_page(batch_changer, cancel_url(row))


# The job list's batch filter.


def test_job_list_filters_by_batch_and_status(batch_viewer):
    row, members = make_batch("flow", size=2)
    with batch(label="flow 2"):
        record.enqueue(label="elsewhere")
    with batch(label="with a wait") as waits:
        first = record.enqueue(label="first")
        then = record.using(after=[first]).enqueue(label="then")
    assert Job.objects.get(pk=then.pk).status == "waiting"
    response = batch_viewer.get(changelist_url(), {"batch": str(row.pk)})
    assert sorted(listed_ids(response)) == sorted(m.pk for m in members)
    counts = {item["status"]: item["text"] for item in response.context["summary"]["counts"]}
    assert counts["pending"] == "2" and counts["waiting"] == "0"
    waiting = batch_viewer.get(
        changelist_url(), {"batch": str(waits.id), "status__exact": "waiting"}
    )
    assert listed_ids(waiting) == [then.pk]
    # The summary bar's links keep the batch.
    summary = {item["status"]: item["url"] for item in waiting.context["summary"]["counts"]}
    assert f"batch={waits.id}" in summary["pending"]
    assert listed_ids(batch_viewer.get(changelist_url(), {"status__exact": "waiting"})) == [then.pk]


@pytest.mark.parametrize("value", ["abc", "-1", "0", "1" * 30, "\uff11\uff12"])
def test_a_batch_filter_value_naming_no_batch_lists_nothing(batch_viewer, value):
    make_batch()
    response = batch_viewer.get(changelist_url(), {"batch": value})
    assert response.status_code == 200
    assert listed_ids(response) == []


def test_the_unfiltered_job_list_never_reads_the_batches(batch_viewer):
    make_batch()
    with CaptureQueriesContext(connection) as captured:
        batch_viewer.get(changelist_url())
    assert [q["sql"] for q in captured if JobBatch._meta.db_table in q["sql"]] == []


# The job's page: the batch in its workflow section.


def test_job_page_shows_its_batch_state_and_progress(batch_viewer):
    row, members = make_batch("report", size=3)
    set_status(members[1], Status.COMPLETED)
    content = get_page(batch_viewer, change_url(members[0]))
    assert "Workflow" in content
    assert f'<a href="{batch_url(row)}">batch #{row.pk}</a> <code>report</code>' in content
    assert ">Closed</span>" in content and "1 of 3 members finished" in content
    assert "this job is one of its members" in content

    run_jobs()
    row.refresh_from_db()
    callback = Job.objects.get(pk=row.callback_job_id)
    content = get_page(batch_viewer, change_url(callback))
    assert "Workflow" in content and "this job is its callback" in content
    assert f'<a href="{batch_url(row)}">batch #{row.pk}</a>' in content
    assert ">Finished</span>" in content and "3 of 3 members finished" in content


def test_a_job_outside_any_batch_has_no_workflow_section(
    batch_viewer, django_assert_max_num_queries
):
    job = record.enqueue(label="alone")
    make_batch()
    with django_assert_max_num_queries(10):
        content = get_page(batch_viewer, change_url(job))
    assert "Workflow" not in content


# Every word through gettext.


def test_batch_pages_are_translated(admin_client):
    with batch(on_complete=batch_report, label="zqlabel") as outer:
        record.enqueue(label="zqa")
        with batch(on_complete=batch_report, label="zqinner"):
            record.enqueue(label="zqb")
    row = JobBatch.objects.get(pk=outer.id)
    member = Job.objects.filter(batch_id=row.pk).first()
    assert member is not None
    set_status(member, Status.DEAD)
    finished, _ = make_batch("zqdone", size=0)
    finish_empty(finished)
    callback = Job.objects.get(pk=finished.callback_job_id)
    trans_real._translations[PSEUDO] = PseudoTranslation()
    try:
        with translation.override(PSEUDO):
            bulk = {
                "action": "cancel_selected",
                ACTION_CHECKBOX_NAME: [str(row.pk)],
                "index": "0",
                "select_across": "0",
            }
            pages = {
                "batch list": admin_client.get(reverse(BATCHES)),
                "batch page": admin_client.get(batch_url(row)),
                "finished batch page": admin_client.get(batch_url(finished)),
                "cancel": admin_client.get(cancel_url(row)),
                "cancel finished": admin_client.get(cancel_url(finished)),
                "cancel selected": admin_client.post(reverse(BATCHES), bulk),
                "member page": admin_client.get(change_url(member)),
                "callback page": admin_client.get(change_url(callback)),
                "job list": admin_client.get(changelist_url(), {"batch": str(row.pk)}),
                "after cancel": admin_client.post(
                    cancel_url(row), {"confirmed": "yes"}, follow=True
                ),
            }
            data = [
                *registry.names(),
                "default",
                *(str(b) for b in JobBatch.objects.all()),
                *(f"{j.name} #{j.pk} ({s.value})" for j in Job.objects.all() for s in Status),
                *(j.reference for j in Job.objects.all() if j.ref_nonce is not None),
                # The callback's JSON.
                *("name", "queue", "args", "kwargs", "priority", "max_attempts", "backend"),
                *("concurrency_key", "delay_seconds"),
                "null",
                "admin",
                *("zqlabel", "zqinner", "zqdone", "zqa", "zqb", "label"),
                # Django's own admin/search_form.html has an untranslated `alt="Search"`.
                "Search",
            ]
            problems = {}
            for what, response in pages.items():
                assert response.status_code == 200, what
                content = response.content.decode()
                assert pseudo("batch") in content.lower() or pseudo("job") in content.lower()
                left = untranslated(content, data)
                if left:
                    problems[what] = left
    finally:
        trans_real._translations.pop(PSEUDO, None)
    assert problems == {}
