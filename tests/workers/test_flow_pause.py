"""Pausing a queue while workers run: its jobs wait, running ones finish, others go on."""

from __future__ import annotations

import time

import pytest

import django_sqlqueue
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.testapp.jobs import record, sleep

from .conftest import wait_for

pytestmark = pytest.mark.workers


def done(job: Job) -> bool:
    return Job.objects.get(pk=job.pk).status == Status.COMPLETED


def test_pause_with_workers_running(workers):
    workers.start("-n", "2", env={"SQLQUEUE_TEST_POLL": "0.2"})
    wait_for(lambda: Worker.objects.count() == 2, timeout=30)
    # A job of the queue is running when the queue is paused: it finishes normally.
    running = sleep.using(queue="mail").enqueue(seconds=1.5)
    wait_for(lambda: Job.objects.get(pk=running.pk).status == Status.RUNNING, timeout=10)
    django_sqlqueue.pause_queue("mail")
    paused_at = time.monotonic()
    time.sleep(1.1)  # every worker has read the paused set again
    held = [record.using(queue="mail").enqueue(label=f"mail-{i}") for i in range(3)]
    others = [record.enqueue(label=f"default-{i}") for i in range(3)]
    for job in others:
        wait_for(lambda job=job: done(job), timeout=10)
    wait_for(lambda: done(running), timeout=10)
    time.sleep(max(0.0, 2.5 - (time.monotonic() - paused_at)))
    assert [Job.objects.get(pk=job.pk).status for job in held] == [Status.PENDING] * 3
    assert all(Job.objects.get(pk=job.pk).attempts == 0 for job in held)
    django_sqlqueue.resume_queue("mail")
    resumed_at = time.monotonic()
    for job in held:
        wait_for(lambda job=job: done(job), timeout=10)
    # Within the cache (1 s) and one poll interval.
    assert time.monotonic() - resumed_at < 3.0
