"""Pausing a queue while workers run: its jobs wait, running ones finish, others go on."""

from __future__ import annotations

import pytest
from django.utils import timezone

import django_sqlqueue
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.probes import Probes
from tests.testapp.jobs import record, sleep
from tests.testapp.models import Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers


def done(job: Job) -> bool:
    return Job.objects.get(pk=job.pk).status == Status.COMPLETED


def test_pause_with_workers_running(workers, probes: Probes):
    workers.start("-n", "2", env={"SQLQUEUE_TEST_POLL": "0.2"})
    wait_for(lambda: Worker.objects.count() == 2, timeout=30)
    pids = set(Worker.objects.values_list("pid", flat=True))
    # A job of the queue is running when the queue is paused: it finishes normally.
    running = sleep.using(queue="mail").enqueue(seconds=1.5)
    wait_for(lambda: Job.objects.get(pk=running.pk).status == Status.RUNNING, timeout=10)
    paused = probes.mark()
    django_sqlqueue.pause_queue("mail")
    for pid in pids:  # every worker has read the paused set again
        probes.wait("paused-read", after=paused, pid=pid, paused=["mail"])
    held = [record.using(queue="mail").enqueue(label=f"mail-{i}") for i in range(3)]
    others = [record.enqueue(label=f"default-{i}") for i in range(3)]
    for job in others:
        wait_for(lambda job=job: done(job), timeout=10)
    wait_for(lambda: done(running), timeout=10)
    # Both workers are idle now; each claims twice more (a claim, then its wait) while the
    # held jobs are due, and leaves them.
    idle = probes.mark()
    for pid in pids:
        probes.wait("worker-idle", after=idle, pid=pid, count=2)
    assert [Job.objects.get(pk=job.pk).status for job in held] == [Status.PENDING] * 3
    assert all(Job.objects.get(pk=job.pk).attempts == 0 for job in held)
    resumed = probes.mark()
    django_sqlqueue.resume_queue("mail")
    for job in held:
        wait_for(lambda job=job: done(job), timeout=30)
    # Each held job ran once its worker read the paused set again and found the queue
    # resumed (the once-a-second reread: tests/flow/test_pausing.py).
    for job in held:
        execution = Execution.objects.get(job_id=job.pk)
        reread = probes.find("paused-read", after=resumed, pid=execution.worker_pid, paused=[])
        assert reread, f"job {job.pk} ran before its worker saw the resume"
        assert reread[0]["at"] <= execution.created_at.timestamp()


def test_no_job_of_a_paused_queue_starts_once_pause_queue_returned(workers, probes: Probes):
    """pause_queue returns only once no worker can start a job of the queue: neither one it
    holds in a claimed batch nor one a claim with its last reading of the paused queues
    takes. Before, it returned at once, and a busy worker went on starting the queue's jobs
    for up to a second."""
    workers.start("-n", "2")
    wait_for(lambda: Worker.objects.count() == 2, timeout=30)
    stream = record.using(queue="mail")
    stream.enqueue_many([{"label": "stream"} for _ in range(20_000)])
    started = Execution.objects.filter(label="stream")
    wait_for(lambda: started.count() >= 200, timeout=60)
    django_sqlqueue.pause_queue("mail")
    returned = timezone.now()
    idle = probes.mark()
    for pid in Worker.objects.values_list("pid", flat=True):
        probes.wait("worker-idle", after=idle, pid=pid)
    late = started.filter(created_at__gt=returned)
    assert not late.exists(), f"{late.count()} jobs of the paused queue started after it returned"
    assert Job.objects.filter(queue="mail", status=Status.PENDING).count() > 0
    assert not Job.objects.filter(queue="mail", status=Status.RUNNING).exists()
