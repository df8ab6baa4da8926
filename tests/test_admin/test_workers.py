"""The workers panel: read-only, stale workers marked, current job linked."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.admin.workers import is_stale, stale_before
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status

from .helpers import job_in

pytestmark = pytest.mark.django_db

LIST = "admin:django_sqlqueue_worker_changelist"


def workers(**overrides) -> tuple[Worker, Worker]:
    now = timezone.now()
    alive = Worker.objects.create(
        id="web-1:10:w0", hostname="web-1", pid=10, queues="mail", last_seen_at=now, **overrides
    )
    stale = Worker.objects.create(
        id="web-2:20:w0", hostname="web-2", pid=20, last_seen_at=now - timedelta(minutes=5)
    )
    return alive, stale


def test_panel_lists_workers_marks_stale_ones_and_links_the_current_job(viewer):
    job = job_in(Status.RUNNING)
    alive, stale = workers(current_job_id=job.pk, jobs_done=42)
    response = viewer.get(reverse(LIST))
    assert response.status_code == 200
    content = response.content.decode()
    rows = {w.pk: w for w in response.context["cl"].result_list}
    assert set(rows) == {alive.pk, stale.pk}
    job_url = reverse("admin:django_sqlqueue_job_change", args=[job.pk])
    assert f'<a href="{job_url}">job #{job.pk}</a>' in content
    assert content.count('sq-badge sq-dead">stale') == 1
    assert content.count('sq-badge sq-completed">alive') == 1
    assert "(all queues)" in content  # the stale worker listens to every queue
    assert ">42<" in content


def test_stale_filter(viewer):
    alive, stale = workers()
    ids = lambda response: [w.pk for w in response.context["cl"].result_list]  # noqa: E731
    assert ids(viewer.get(reverse(LIST), {"heartbeat": "stale"})) == [stale.pk]
    assert ids(viewer.get(reverse(LIST), {"heartbeat": "alive"})) == [alive.pk]


@override_settings(SQLQUEUE={"LEASE_SECONDS": 60, "HEARTBEAT_SECONDS": 10})
def test_stale_means_three_missed_heartbeats():
    now = timezone.now()
    assert stale_before(now) == now - timedelta(seconds=30)
    worker = Worker(id="w", hostname="h", pid=1, last_seen_at=now - timedelta(seconds=29))
    assert not is_stale(worker, now)
    worker.last_seen_at = now - timedelta(seconds=31)
    assert is_stale(worker, now)


def test_worker_page_is_read_only(admin_client):
    alive, _ = workers()
    assert admin_client.get(reverse("admin:django_sqlqueue_worker_add")).status_code == 403
    change = reverse("admin:django_sqlqueue_worker_change", args=[alive.pk])
    assert admin_client.get(change).status_code == 200
    assert admin_client.post(change, {"pid": 99}).status_code == 403
    delete = reverse("admin:django_sqlqueue_worker_delete", args=[alive.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert Worker.objects.get(pk=alive.pk).pid == 10


def test_a_worker_with_slots_shows_how_many_more_jobs_it_holds_and_its_page_lists_them(viewer):
    """runworkers --concurrency: one process holds many running jobs."""
    alive, _ = workers()
    held = [job_in(Status.RUNNING) for _ in range(3)]
    Job.objects.filter(pk__in=[job.pk for job in held]).update(lease_owner=alive.pk)
    job_in(Status.RUNNING)  # another worker's
    Worker.objects.filter(pk=alive.pk).update(current_job_id=held[0].pk)
    content = viewer.get(reverse(LIST)).content.decode()
    assert f">job #{held[0].pk}</a>" in content
    assert "and 2 more" in content
    page = viewer.get(reverse("admin:django_sqlqueue_worker_change", args=[alive.pk]))
    text = page.content.decode()
    for job in held:
        url = reverse("admin:django_sqlqueue_job_change", args=[job.pk])
        assert f'<a href="{url}">job #{job.pk}</a>' in text
