"""Built-in pruning of old completed jobs, and `jobstatus --workers`."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from django_sqlqueue import operations
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status

pytestmark = pytest.mark.django_db


def finished(status: str, days_ago: float) -> Job:
    when = timezone.now() - timedelta(days=days_ago)
    return Job.objects.create(name="tests.noop", status=status, finished_at=when)


def test_prune_deletes_only_old_completed_jobs_one_batch_at_a_time():
    old = [finished(Status.COMPLETED, 8) for _ in range(5)]
    recent = finished(Status.COMPLETED, 1)
    old_dead = finished(Status.DEAD, 30)
    old_cancelled = finished(Status.CANCELLED, 30)
    pending = Job.objects.create(name="tests.noop")

    assert operations.prune_completed(7, batch_size=3) == 3
    assert operations.prune_completed(7, batch_size=3) == 2
    assert operations.prune_completed(7, batch_size=3) == 0
    assert not Job.objects.filter(pk__in=[j.pk for j in old]).exists()
    assert set(Job.objects.values_list("pk", flat=True)) == {
        recent.pk,
        old_dead.pk,
        old_cancelled.pk,
        pending.pk,
    }


@pytest.mark.workers
def test_supervisor_prunes_on_its_housekeeping_round(workers):
    old = finished(Status.COMPLETED, 8)
    kept = finished(Status.COMPLETED, 6)
    workers.run("--burst")
    assert not Job.objects.filter(pk=old.pk).exists()
    assert Job.objects.filter(pk=kept.pk).exists()


@pytest.mark.workers
def test_pruning_can_be_turned_off(workers):
    old = finished(Status.COMPLETED, 8)
    workers.run("--burst", env={"SQLQUEUE_TEST_PRUNE_DAYS": "none"})
    assert Job.objects.filter(pk=old.pk).exists()


def test_prune_setting_is_checked():
    from django_sqlqueue.checks import check_settings

    with override_settings(SQLQUEUE={"PRUNE_COMPLETED_AFTER_DAYS": -1}):
        assert [e.id for e in check_settings()] == ["django_sqlqueue.E003"]


def test_jobstatus_lists_workers_and_marks_stale_ones():
    now = timezone.now()
    Worker.objects.create(id="host:1:a", hostname="host", pid=1, last_seen_at=now, jobs_done=7)
    Worker.objects.create(
        id="host:2:b",
        hostname="host",
        pid=2,
        queues="mail",
        last_seen_at=now - timedelta(hours=1),
        current_job_id=42,
    )
    out = StringIO()
    call_command("jobstatus", "--workers", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("waiting: 0, pending: 0")
    assert "host:1:a: pid 1, queues all, idle, 7 jobs done" in lines[1]
    assert "host:2:b (stale): pid 2, queues mail, job 42" in lines[2]

    out = StringIO()
    call_command("jobstatus", "--workers", "--json", stdout=out)
    workers = json.loads(out.getvalue().splitlines()[1])["workers"]
    assert {w["id"]: w["stale"] for w in workers} == {"host:1:a": False, "host:2:b": True}


def test_jobstatus_says_how_many_running_jobs_a_worker_with_slots_holds():
    now = timezone.now()
    Worker.objects.create(id="host:3:c", hostname="host", pid=3, last_seen_at=now)
    for _ in range(3):
        Job.objects.create(name="tests.noop", status=Status.RUNNING, lease_owner="host:3:c")
    Worker.objects.filter(pk="host:3:c").update(current_job_id=Job.objects.first().pk)
    out = StringIO()
    call_command("jobstatus", "--workers", stdout=out)
    assert "(3 running jobs held)" in out.getvalue().splitlines()[1]
    out = StringIO()
    call_command("jobstatus", "--workers", "--json", stdout=out)
    assert json.loads(out.getvalue().splitlines()[1])["workers"][0]["held"] == 3


def test_jobstatus_without_workers_says_so():
    out = StringIO()
    call_command("jobstatus", "--workers", stdout=out)
    assert out.getvalue().splitlines()[1] == "No workers."
