"""The Django admin mounted at another path (Wagtail mounts it at `/django-admin/`): every link
and form of the job and worker pages follows it, none assumes `/admin/`."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin import helpers
from django.test import Client
from django.urls import reverse

from django_sqlqueue.models import Worker
from django_sqlqueue.states import Status

from .helpers import job_in, staff_client

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls_elsewhere")]

LINK = re.compile(r'(?:href|action)="(/[^"]*)"')


@pytest.fixture
def boss(db: Any) -> Client:
    return staff_client(
        "boss", "view_job", "change_job", "delete_job", "view_worker", "change_worker"
    )


def links(response: Any) -> list[str]:
    assert response.status_code == 200, response.content[:500]
    return LINK.findall(response.content.decode())


def test_no_page_links_to_admin(boss: Client) -> None:
    worker = Worker.objects.create(id="host:1:w0", hostname="host", pid=1, queues="default")
    running = job_in(Status.RUNNING, lease_owner=worker.id)
    dead = job_in(Status.DEAD)
    job_in(Status.PENDING)
    changelist = reverse("admin:django_sqlqueue_job_changelist")
    assert changelist == "/django-admin/django_sqlqueue/job/"
    seen = [
        *links(boss.get(changelist)),
        *links(boss.get(reverse("admin:django_sqlqueue_job_change", args=[running.pk]))),
        *links(boss.get(reverse("admin:django_sqlqueue_job_change", args=[dead.pk]))),
        *links(boss.get(reverse("admin:django_sqlqueue_job_operation", args=[dead.pk, "requeue"]))),
        *links(boss.get(reverse("admin:django_sqlqueue_job_purge_old"))),
        *links(
            boss.post(
                changelist,
                {
                    "action": "purge_selected",
                    helpers.ACTION_CHECKBOX_NAME: [str(dead.pk)],
                    "select_across": "0",
                    "index": "0",
                },
            )
        ),
        *links(boss.get(reverse("admin:django_sqlqueue_worker_changelist"))),
        *links(boss.get(reverse("admin:django_sqlqueue_worker_change", args=[worker.pk]))),
    ]
    ours = [url for url in seen if "/django_sqlqueue/" in url]
    assert f"/django-admin/django_sqlqueue/worker/{worker.pk}/change/" in ours
    assert f"/django-admin/django_sqlqueue/job/{running.pk}/change/" in ours
    assert [url for url in seen if url.startswith("/admin/")] == []
