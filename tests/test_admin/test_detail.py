"""The job page: read-only, laid out for reading, with the actions its status allows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status

from .helpers import change_url, job_in, messages_of, operation_url

pytestmark = pytest.mark.django_db

HISTORY = [
    {
        "attempt": 1,
        "worker": "web-1:4242:w0",
        "started_at": "2026-01-05T10:00:00+00:00",
        "finished_at": "2026-01-05T10:00:02.500000+00:00",
        "outcome": "error",
        "error": "ValueError: first <failure>",
        "traceback": 'Traceback (most recent call last):\n  File "jobs.py", line 3\nValueError',
    },
    {
        "attempt": 2,
        "worker": "web-2:77:w1",
        "started_at": "2026-01-05T10:01:00+00:00",
        "finished_at": "2026-01-05T10:01:01+00:00",
        "outcome": "lost",
        "error": "Worker web-2:77:w1 stopped renewing its lease",
        "traceback": "",
    },
]


def page(client, job: Job) -> str:
    response = client.get(change_url(job))
    assert response.status_code == 200
    return response.content.decode()


def test_payload_result_and_error_are_shown_as_readable_text(viewer):
    job = job_in(
        Status.DEAD,
        args=[1, "two"],
        kwargs={"to": "a@example.org", "nested": {"k": [1, 2]}},
        result={"sent": True},
        last_error="ValueError: <boom>",
    )
    content = page(viewer, job)
    assert '<pre class="sq-json">[\n  1,\n  &quot;two&quot;\n]</pre>' in content
    assert "&quot;nested&quot;: {\n    &quot;k&quot;: [" in content
    assert "&quot;sent&quot;: true" in content
    assert '<pre class="sq-error">ValueError: &lt;boom&gt;</pre>' in content


def test_every_attempt_is_listed_with_worker_times_error_and_traceback(viewer):
    job = job_in(Status.DEAD, history=HISTORY)
    content = page(viewer, job)
    assert content.count('class="sq-attempt"') == 2
    assert content.count('class="sq-attempt-traceback"') == 1  # only attempt 1 has one
    assert "web-1:4242:w0" in content and "web-2:77:w1" in content
    assert "ValueError: first &lt;failure&gt;" in content  # escaped
    assert "<summary>Traceback</summary>" in content
    assert "File &quot;jobs.py&quot;, line 3" in content
    assert "2.50s" in content  # how long attempt 1 took
    assert 'data-outcome="lost"' in content


def test_a_history_entry_the_page_cannot_read_is_shown_raw(viewer):
    job = job_in(Status.DEAD, history=["not a dict", {"attempt": 1}])
    content = page(viewer, job)
    assert "&quot;not a dict&quot;" in content


def test_lease_owner_and_expiry_shown_while_running(viewer, worker_row):
    expires = timezone.now() + timedelta(seconds=30)
    job = job_in(Status.RUNNING, lease_owner=worker_row.pk, lease_expires_at=expires)
    content = page(viewer, job)
    assert "Lease" in content
    worker_url = reverse("admin:django_sqlqueue_worker_change", args=[worker_row.pk])
    assert f'href="{worker_url}"' in content
    assert "expired" not in content
    assert "its worker stops it" in content


def test_expired_lease_is_flagged(viewer):
    job = job_in(Status.RUNNING, lease_expires_at=timezone.now() - timedelta(seconds=30))
    content = page(viewer, job)
    assert "expired: the worker stopped renewing it" in content
    assert "(no heartbeat row)" in content


def test_no_lease_section_once_finished(viewer):
    assert "Lease" not in page(viewer, job_in(Status.COMPLETED))


def test_links_to_jobs_with_the_same_name_and_idempotency_key(viewer):
    job = job_in(Status.DEAD, name="mail.send", idempotency_key="welcome-7")
    sibling = job_in(Status.COMPLETED, name="mail.send")
    job_in(Status.COMPLETED, name="other.job")
    content = page(viewer, job)
    assert f'href="{change_url(sibling)}">#{sibling.pk}</a>' in content
    assert "?name=mail.send" in content
    assert "?idempotency_key=welcome-7" in content
    assert content.count("sq-related") == 1
    assert "other.job" not in content


def test_a_workflow_shows_what_a_job_waits_for_and_what_waits_for_it(viewer):
    from tests.testapp.jobs import record

    first = record.enqueue(label="first")
    second = record.enqueue(label="second")
    then = record.using(after=[first, second]).enqueue(label="then")

    content = page(viewer, Job.objects.get(pk=then.pk))
    assert "Workflow" in content and "Waits for" in content and "Waited for by" in content
    for job in (first, second):
        assert f'<a href="{change_url(job)}">#{job.pk}</a>' in content
    content = page(viewer, Job.objects.get(pk=first.pk))
    assert f'<a href="{change_url(then)}">#{then.pk}</a>' in content
    assert "Workflow" not in page(viewer, job_in(Status.PENDING))


def test_related_list_is_bounded(viewer):
    job = job_in(Status.DEAD, name="bulk.job")
    Job.objects.bulk_create([Job(name="bulk.job", status=Status.COMPLETED) for _ in range(25)])
    content = page(viewer, job)
    assert content.count("created <time") == 10


def test_detail_page_query_budget(viewer, django_assert_max_num_queries):
    job = job_in(Status.RUNNING, history=HISTORY)
    with django_assert_max_num_queries(9):
        viewer.get(change_url(job))


# Read only: no add, no edit, no raw delete.


def test_nobody_can_add_edit_or_delete_jobs_by_hand(admin_client):
    job = job_in(Status.DEAD)
    assert admin_client.get(reverse("admin:django_sqlqueue_job_add")).status_code == 403
    response = admin_client.post(change_url(job), {"name": "changed", "status": "pending"})
    assert response.status_code == 403
    assert Job.objects.get(pk=job.pk).name == "tests.noop"
    delete = reverse("admin:django_sqlqueue_job_delete", args=[job.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert Job.objects.filter(pk=job.pk).exists()
    content = page(admin_client, job)
    assert 'name="_save"' not in content
    assert "deletelink" not in content


# Buttons by status and permission.


def buttons(content: str) -> set[str]:
    return {key for key in ("requeue", "cancel", "run_now", "purge") if f"sq-tool-{key}" in content}


def test_every_button_leads_to_a_confirmation_page(admin_client):
    job = job_in(Status.FAILED)
    content = page(admin_client, job)
    for key in ("requeue", "cancel", "run_now"):
        assert f'<a href="{operation_url(job, key)}" class="sq-tool sq-tool-{key}"' in content
    assert "<form" not in content.split('class="object-tools"')[1].split("</ul>")[0]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("waiting", {"cancel"}),
        ("pending", {"cancel", "run_now"}),
        ("failed", {"requeue", "cancel", "run_now"}),
        ("running", {"cancel"}),
        ("completed", {"requeue", "purge"}),
        ("dead", {"requeue", "purge"}),
        ("cancelled", {"requeue", "purge"}),
    ],
)
def test_buttons_offered_follow_the_status(admin_client, status, expected):
    assert buttons(page(admin_client, job_in(status))) == expected


def test_buttons_offered_follow_the_permissions(viewer, changer, purger):
    job = job_in(Status.DEAD)
    assert buttons(page(viewer, job)) == set()
    assert buttons(page(changer, job)) == {"requeue"}
    assert buttons(page(purger, job)) == {"purge"}


# One job at a time, from its page.


def test_requeue_from_the_page_asks_then_requeues_and_returns_to_the_job(admin_client):
    job = job_in(Status.DEAD, attempts=5)
    confirm = admin_client.get(operation_url(job, "requeue"))
    assert 'value="Yes, requeue"' in confirm.content.decode()
    assert admin_client.post(operation_url(job, "requeue")).status_code == 200  # asks again
    assert Job.objects.get(pk=job.pk).status == "dead"
    response = admin_client.post(operation_url(job, "requeue"), {"confirmed": "yes"}, follow=True)
    assert response.redirect_chain[-1][0] == change_url(job)
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.attempts) == ("pending", 0)
    assert messages_of(response) == ["Requeued 1 job."]
    history = admin_client.get(reverse("admin:django_sqlqueue_job_history", args=[job.pk]))
    assert "Requeued from the admin (was Dead)." in history.content.decode()


def test_run_now_from_the_page_asks_then_makes_the_job_due(admin_client):
    later = timezone.now() + timedelta(hours=1)
    job = job_in(Status.FAILED, run_at=later, attempts=1)
    confirm = admin_client.get(operation_url(job, "run_now"))
    assert 'value="Yes, run now"' in confirm.content.decode()
    admin_client.post(operation_url(job, "run_now"))
    assert Job.objects.get(pk=job.pk).run_at == later
    admin_client.post(operation_url(job, "run_now"), {"confirmed": "yes"})
    job = Job.objects.get(pk=job.pk)
    assert job.run_at <= timezone.now() and job.attempts == 1


def test_cancel_from_the_page_asks_then_cancels(admin_client):
    job = job_in(Status.PENDING)
    confirm = admin_client.get(operation_url(job, "cancel"))
    assert confirm.status_code == 200
    assert "Yes, cancel" in confirm.content.decode()
    assert Job.objects.get(pk=job.pk).status == "pending"
    response = admin_client.post(operation_url(job, "cancel"), {"confirmed": "yes"}, follow=True)
    assert Job.objects.get(pk=job.pk).status == "cancelled"
    assert messages_of(response) == ["Cancelled 1 job."]


def test_cancel_post_without_confirmation_changes_nothing(admin_client):
    job = job_in(Status.PENDING)
    response = admin_client.post(operation_url(job, "cancel"))
    assert response.status_code == 200
    assert Job.objects.get(pk=job.pk).status == "pending"


def test_purge_from_the_page_deletes_and_returns_to_the_list(admin_client):
    job = job_in(Status.COMPLETED)
    response = admin_client.post(operation_url(job, "purge"), {"confirmed": "yes"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("admin:django_sqlqueue_job_changelist")
    assert not Job.objects.filter(pk=job.pk).exists()
    assert messages_of(response) == ["Purged 1 job."]


def test_cancel_of_a_running_job_asks_its_worker_to_stop_it(admin_client):
    job = job_in(Status.RUNNING)
    content = admin_client.get(operation_url(job, "cancel")).content.decode()
    assert "Running jobs are asked to stop" in content
    assert 'value="Yes, cancel"' in content
    response = admin_client.post(operation_url(job, "cancel"), {"confirmed": "yes"}, follow=True)
    stored = Job.objects.get(pk=job.pk)
    assert stored.status == "running", "its worker stops it; the admin does not"
    assert stored.cancel_requested_at is not None
    [message] = messages_of(response)
    assert message.startswith("Cancelled 1 job.")
    assert "Running jobs are asked to stop" in message


def test_page_action_on_a_job_claimed_meanwhile_is_skipped(admin_client, claim):
    job = job_in(Status.PENDING)
    confirm = admin_client.get(operation_url(job, "cancel"))  # the admin sees "pending"
    assert "Yes, cancel" in confirm.content.decode()
    claim("worker-z")
    admin_client.post(operation_url(job, "cancel"), {"confirmed": "yes"})
    assert Job.objects.get(pk=job.pk).status == "running"


def test_unknown_action_and_missing_job_are_404(admin_client):
    job = job_in(Status.DEAD)
    assert admin_client.post(operation_url(job, "explode")).status_code == 404
    missing = reverse("admin:django_sqlqueue_job_operation", args=[987654, "requeue"])
    assert admin_client.post(missing).status_code == 404


def test_a_running_jobs_progress_and_cancel_request_are_shown(viewer):
    job = job_in(
        Status.RUNNING,
        progress=40,
        progress_message="2,000 of 5,000 rows",
        cancel_requested_at=timezone.now(),
    )
    content = page(viewer, job)
    assert 'value="40"' in content and "2,000 of 5,000 rows" in content
    assert "cancel requested" in content
