"""Who may do what: change permission for requeue/cancel/run now, delete for purge.

A user without the permission sees no action and no button, and a forged POST gets a 403.
"""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status

from .helpers import changelist_url, job_in, operation_url

pytestmark = pytest.mark.django_db

PURGE_OLD = "admin:django_sqlqueue_job_purge_old"


def offered_actions(client) -> set[str]:
    content = client.get(changelist_url()).content.decode()
    names = ("requeue_selected", "cancel_selected", "run_now_selected", "purge_selected")
    return {name for name in names if f'value="{name}"' in content}


def forge(client, action: str, job: Job, confirmed: bool = True):
    data = {"action": action, ACTION_CHECKBOX_NAME: [str(job.pk)], "index": "0"}
    if confirmed:
        data["confirmed"] = "yes"
    return client.post(changelist_url(), data)


def test_actions_offered_match_permissions(admin_client, viewer, changer, purger):
    job_in(Status.DEAD)
    everything = {"requeue_selected", "cancel_selected", "run_now_selected", "purge_selected"}
    assert offered_actions(admin_client) == everything
    assert offered_actions(viewer) == set()
    assert offered_actions(changer) == {"requeue_selected", "cancel_selected", "run_now_selected"}
    assert offered_actions(purger) == {"purge_selected"}


@pytest.mark.parametrize(
    ("action", "status"),
    [
        ("requeue_selected", Status.DEAD),
        ("cancel_selected", Status.PENDING),
        ("run_now_selected", Status.PENDING),
        ("purge_selected", Status.COMPLETED),
    ],
)
def test_viewer_forging_any_bulk_action_gets_403(viewer, action, status):
    job = job_in(status)
    before = Job.objects.values().get(pk=job.pk)
    assert forge(viewer, action, job).status_code == 403
    assert Job.objects.values().get(pk=job.pk) == before


def test_changer_cannot_purge(changer):
    job = job_in(Status.COMPLETED)
    assert forge(changer, "purge_selected", job).status_code == 403
    assert changer.post(operation_url(job, "purge"), {"confirmed": "yes"}).status_code == 403
    assert changer.get(operation_url(job, "purge")).status_code == 403
    assert changer.get(reverse(PURGE_OLD)).status_code == 403
    assert Job.objects.filter(pk=job.pk).exists()


@pytest.mark.parametrize("action", ["requeue", "cancel", "run_now"])
def test_purger_cannot_change_jobs(purger, action):
    job = job_in(Status.FAILED)
    assert forge(purger, f"{action}_selected", job).status_code == 403
    assert purger.post(operation_url(job, action), {"confirmed": "yes"}).status_code == 403
    assert Job.objects.get(pk=job.pk).status == "failed"


@pytest.mark.parametrize("action", ["requeue", "cancel", "run_now", "purge"])
def test_viewer_forging_a_page_action_gets_403(viewer, action):
    job = job_in(Status.FAILED if action != "purge" else Status.DEAD)
    before = Job.objects.values().get(pk=job.pk)
    assert viewer.post(operation_url(job, action), {"confirmed": "yes"}).status_code == 403
    assert viewer.get(operation_url(job, action)).status_code == 403
    assert Job.objects.values().get(pk=job.pk) == before


def test_viewer_cannot_open_or_post_the_purge_form(viewer):
    job = job_in(Status.COMPLETED)
    assert viewer.get(reverse(PURGE_OLD)).status_code == 403
    data = {"days": "0", "statuses": ["completed"], "confirmed": "yes"}
    assert viewer.post(reverse(PURGE_OLD), data).status_code == 403
    assert Job.objects.filter(pk=job.pk).exists()


def test_purge_old_link_only_for_users_who_may_purge(admin_client, changer, purger):
    url = reverse(PURGE_OLD)
    assert url in admin_client.get(changelist_url()).content.decode()
    assert url in purger.get(changelist_url()).content.decode()
    assert url not in changer.get(changelist_url()).content.decode()


def test_changer_may_requeue(changer):
    job = job_in(Status.DEAD)
    forge(changer, "requeue_selected", job, confirmed=False)  # the confirmation page
    assert Job.objects.get(pk=job.pk).status == "dead"
    forge(changer, "requeue_selected", job)
    assert Job.objects.get(pk=job.pk).status == "pending"


def test_purger_may_purge(purger):
    job = job_in(Status.DEAD)
    forge(purger, "purge_selected", job)
    assert not Job.objects.filter(pk=job.pk).exists()


def test_anonymous_users_are_sent_to_the_login_page(client):
    job = job_in(Status.DEAD)
    response = client.post(operation_url(job, "requeue"))
    assert response.status_code == 302
    assert "/login/" in response["Location"]
    assert Job.objects.get(pk=job.pk).status == "dead"
