"""Requeue, cancel, run now and purge from the job list: outcomes, messages, races."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status

from .helpers import changelist_url, job_in, messages_of

pytestmark = pytest.mark.django_db


def post_action(
    client: Any,
    action: str,
    jobs: list[Job],
    *,
    confirmed: bool = False,
    select_across: bool = False,
    query: str = "",
) -> Any:
    """POST the list's action form; `confirmed` posts what the confirmation page posts."""
    data: dict[str, Any] = {
        "action": action,
        ACTION_CHECKBOX_NAME: [str(job.pk) for job in jobs],
        "select_across": "1" if select_across else "0",
    }
    if confirmed:
        data["confirmed"] = "yes"
    else:
        data["index"] = "0"
    return client.post(changelist_url() + query, data, follow=True)


def status_of(job: Job) -> str:
    return Job.objects.get(pk=job.pk).status


def test_requeue_moves_finished_and_failed_jobs_to_pending_and_resets_attempts(admin_client):
    requeueable = [job_in(s, attempts=3) for s in ("dead", "cancelled", "completed", "failed")]
    running, pending = job_in(Status.RUNNING), job_in(Status.PENDING)
    response = post_action(
        admin_client, "requeue_selected", [*requeueable, running, pending], confirmed=True
    )
    assert response.status_code == 200
    for job in requeueable:
        job = Job.objects.get(pk=job.pk)
        assert (job.status, job.attempts, job.finished_at) == ("pending", 0, None)
        assert job.run_at <= timezone.now()
    assert status_of(running) == "running"
    assert messages_of(response) == [
        "Requeued 4 of 6 selected jobs. Skipped 2 jobs whose status does not allow it "
        "(Pending: 1, Running: 1). Requeue accepts only jobs that are Dead, Cancelled, Failed "
        "or Completed."
    ]


def test_requeue_of_only_eligible_jobs_says_how_many(admin_client):
    jobs = [job_in(Status.DEAD), job_in(Status.DEAD)]
    response = post_action(admin_client, "requeue_selected", jobs, confirmed=True)
    assert messages_of(response) == ["Requeued 2 jobs."]
    assert "messagelist" in response.content.decode()


@pytest.mark.parametrize(
    ("action", "status", "button"),
    [
        ("requeue_selected", Status.DEAD, "Yes, requeue"),
        ("cancel_selected", Status.PENDING, "Yes, cancel"),
        ("run_now_selected", Status.FAILED, "Yes, run now"),
        ("purge_selected", Status.COMPLETED, "Yes, purge"),
    ],
)
def test_every_action_asks_for_confirmation_first(admin_client, action, status, button):
    later = timezone.now() + timedelta(hours=1)
    job = job_in(status, run_at=later)
    before = Job.objects.values().get(pk=job.pk)
    response = post_action(admin_client, action, [job])
    assert response.status_code == 200
    assert response.templates[0].name == "django_sqlqueue/admin/confirm_bulk.html"
    content = response.content.decode()
    assert f'value="{button}"' in content
    assert f'name="action" value="{action}"' in content
    assert 'name="confirmed" value="yes"' in content
    assert f"#{job.pk}" in content
    assert Job.objects.values().get(pk=job.pk) == before
    assert messages_of(response) == []


def test_cancel_confirmed_cancels_waiting_jobs_and_stops_running_ones(admin_client):
    pending, failed = job_in(Status.PENDING), job_in(Status.FAILED)
    running, dead = job_in(Status.RUNNING), job_in(Status.DEAD)
    response = post_action(
        admin_client, "cancel_selected", [pending, failed, running, dead], confirmed=True
    )
    assert (status_of(pending), status_of(failed)) == ("cancelled", "cancelled")
    assert (status_of(running), status_of(dead)) == ("running", "dead")
    running.refresh_from_db()
    assert running.cancel_requested_at is not None, "the running job is asked to stop"
    [message] = messages_of(response)
    assert message.startswith("Cancelled 3 of 4 selected jobs. Skipped 1 job whose status")
    assert "(Dead: 1)" in message
    assert "Running jobs are asked to stop" in message


def test_cancel_confirmation_page_explains_running_jobs(admin_client):
    running = job_in(Status.RUNNING)
    content = post_action(admin_client, "cancel_selected", [running]).content.decode()
    assert "Running jobs are asked to stop" in content


def test_run_now_moves_run_at_of_waiting_jobs_and_keeps_attempts(admin_client):
    later = timezone.now() + timedelta(hours=2)
    pending = job_in(Status.PENDING, run_at=later)
    failed = job_in(Status.FAILED, run_at=later, attempts=2)
    completed = job_in(Status.COMPLETED, run_at=later)
    response = post_action(
        admin_client, "run_now_selected", [pending, failed, completed], confirmed=True
    )
    now = timezone.now()
    pending, failed, completed = (Job.objects.get(pk=j.pk) for j in (pending, failed, completed))
    assert pending.run_at <= now and failed.run_at <= now
    assert failed.attempts == 2 and failed.status == "failed"
    assert completed.run_at == later
    assert messages_of(response)[0].startswith("Made 2 of 3 selected jobs due now.")


def test_purge_asks_then_deletes_only_finished_jobs(admin_client):
    finished = [job_in(s) for s in ("completed", "dead", "cancelled")]
    waiting = [job_in(s) for s in ("pending", "failed", "running")]
    first = post_action(admin_client, "purge_selected", [*finished, *waiting])
    assert "Yes, purge" in first.content.decode()
    assert Job.objects.count() == 6
    response = post_action(admin_client, "purge_selected", [*finished, *waiting], confirmed=True)
    assert sorted(Job.objects.values_list("status", flat=True)) == ["failed", "pending", "running"]
    assert messages_of(response)[0].startswith("Purged 3 of 6 selected jobs. Skipped 3")


def test_select_across_acts_on_every_job_matching_the_filters(admin_client):
    dead_mail = [job_in(Status.DEAD, queue="mail") for _ in range(4)]
    dead_default = job_in(Status.DEAD, queue="default")
    response = post_action(
        admin_client,
        "requeue_selected",
        dead_mail[:1],  # the page's checkbox; select_across means "all that match"
        select_across=True,
        query="?queue=mail&status__exact=dead",
        confirmed=True,
    )
    assert [status_of(j) for j in dead_mail] == ["pending"] * 4
    assert status_of(dead_default) == "dead"
    assert messages_of(response) == ["Requeued 4 jobs."]


def test_select_across_purge_confirmation_then_purge(admin_client):
    for _ in range(3):
        job_in(Status.COMPLETED, queue="reports")
    keep = job_in(Status.COMPLETED, queue="default")
    query = "?queue=reports"
    some = list(Job.objects.filter(queue="reports")[:1])
    page = post_action(admin_client, "purge_selected", some, select_across=True, query=query)
    content = page.content.decode()
    assert "<strong>3</strong> jobs matching the current filters" in content
    assert 'name="select_across" value="1"' in content
    post_action(
        admin_client, "purge_selected", some, select_across=True, query=query, confirmed=True
    )
    assert list(Job.objects.values_list("pk", flat=True)) == [keep.pk]


# Races: a worker claims the job between the page view and the action.


def test_cancel_of_a_job_a_worker_just_claimed_asks_the_worker_to_stop(admin_client, claim):
    job = job_in(Status.PENDING)  # the admin sees it pending and selects it
    [claimed] = claim("worker-a")  # ...and a worker claims it meanwhile
    assert claimed.id == job.pk
    response = post_action(admin_client, "cancel_selected", [job], confirmed=True)
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.lease_owner, job.attempts) == ("running", "worker-a", 1)
    assert job.cancel_requested_at is not None
    assert messages_of(response)[0].startswith("Cancelled 1 job.")


def test_requeue_does_not_reset_a_failed_job_a_worker_just_claimed(admin_client, claim):
    job = job_in(Status.FAILED, attempts=2, run_at=timezone.now() - timedelta(seconds=1))
    [claimed] = claim("worker-b")
    assert claimed.id == job.pk
    post_action(admin_client, "requeue_selected", [job], confirmed=True)
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.lease_owner, job.attempts) == ("running", "worker-b", 3)


def test_run_now_leaves_a_claimed_job_alone(admin_client, claim):
    job = job_in(Status.PENDING, run_at=timezone.now() - timedelta(minutes=5))
    claim("worker-c")
    before = Job.objects.get(pk=job.pk)
    post_action(admin_client, "run_now_selected", [job], confirmed=True)
    after = Job.objects.get(pk=job.pk)
    assert (after.status, after.run_at, after.updated_at) == (
        "running",
        before.run_at,
        before.updated_at,
    )
