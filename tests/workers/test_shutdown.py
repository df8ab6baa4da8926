"""Graceful shutdown: SIGTERM lets running jobs finish within the grace period, then hands
them back without spending an attempt."""

from __future__ import annotations

import signal
import time

import pytest

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.testapp.jobs import sleep
from tests.testapp.models import Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers


def _running(job: Job) -> bool:
    return Execution.objects.filter(job_id=job.pk, label="sleep-start").exists()


def test_sigterm_job_longer_than_grace_is_handed_back_at_once(workers):
    job = sleep.enqueue(2)
    supervisor = workers.start("-n", "1", "--grace-period", "1")
    wait_for(lambda: _running(job), timeout=30)

    supervisor.send_signal(signal.SIGTERM)
    began = time.monotonic()
    assert supervisor.wait(timeout=20) == 0
    elapsed = time.monotonic() - began

    job.refresh_from_db()
    assert job.status == Status.PENDING
    assert job.attempts == 0  # the interrupted attempt is not spent
    assert job.lease_owner == ""
    assert job.history[-1]["outcome"] == "released"
    assert not Execution.objects.filter(job_id=job.pk, label="sleep-end").exists()
    assert 0.9 <= elapsed < 8, elapsed
    assert not Worker.objects.exists()
    assert "interrupted by shutdown" in workers.log(supervisor)


def test_sigterm_job_within_grace_finishes(workers):
    job = sleep.enqueue(2)
    waiting = sleep.enqueue(0.1, label="never")
    supervisor = workers.start("-n", "1", "--grace-period", "10")
    wait_for(lambda: _running(job), timeout=30)

    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=30) == 0

    job.refresh_from_db()
    waiting.refresh_from_db()
    assert job.status == Status.COMPLETED
    assert job.attempts == 1
    # No new job was claimed once the signal arrived.
    assert waiting.status == Status.PENDING
    assert waiting.attempts == 0


def test_second_signal_stops_at_once(workers):
    job = sleep.enqueue(20)
    supervisor = workers.start("-n", "1", "--grace-period", "60")
    wait_for(lambda: _running(job), timeout=30)

    supervisor.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    supervisor.send_signal(signal.SIGINT)
    assert supervisor.wait(timeout=15) == 0
    job.refresh_from_db()
    assert job.status == Status.PENDING
    assert job.attempts == 0


def test_idle_workers_stop_promptly(workers):
    supervisor = workers.start("-n", "3")
    wait_for(lambda: Worker.objects.count() == 3, timeout=30)
    supervisor.send_signal(signal.SIGTERM)
    began = time.monotonic()
    assert supervisor.wait(timeout=15) == 0
    assert time.monotonic() - began < 5
    assert not Worker.objects.exists()
