"""Worker signals reach receivers (filtered by handler), broken receivers are harmless, and
the DEFAULT_TIMEOUT setting stops handlers that set no timeout of their own."""

from __future__ import annotations

import os
import signal

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status
from tests.testapp.jobs import add, discard, noop, signal_boom, sleep
from tests.testapp.models import Execution, SignalLog

from .conftest import wait_for

pytestmark = pytest.mark.workers


def test_completed_signal_is_filtered_by_handler(workers):
    summed = add.enqueue(2, 5)
    other = noop.enqueue()
    workers.run("--burst")
    logged = list(SignalLog.objects.filter(signal="completed").values_list("job_id", "detail"))
    assert logged == [(summed.pk, "7")]
    assert Job.objects.get(pk=other.pk).status == Status.COMPLETED


def test_dead_signal_is_the_dead_letter_hook(workers):
    job = discard.enqueue()
    workers.run("--burst")
    [row] = SignalLog.objects.filter(signal="dead")
    assert row.job_id == job.pk
    assert "payload is obsolete" in row.detail


def test_dead_signal_for_a_job_whose_worker_was_lost(workers):
    job = sleep.using(max_attempts=1).enqueue(5)
    workers.start("-n", "1")
    started = wait_for(
        lambda: Execution.objects.filter(job_id=job.pk, label="sleep-start").first(), 30
    )
    os.kill(started.worker_pid, signal.SIGKILL)
    row = wait_for(lambda: SignalLog.objects.filter(signal="dead", job_id=job.pk).first(), 30)
    assert "killed by SIGKILL" in row.detail


def test_a_raising_receiver_is_logged_and_harmless(workers):
    job = signal_boom.enqueue()
    output = workers.run("--burst")
    job.refresh_from_db()
    assert (job.status, job.result, job.attempts) == (Status.COMPLETED, "survived", 1)
    assert "a receiver with a bug" in output


def test_default_timeout_setting_applies_to_handlers_without_one(workers):
    job = sleep.using(max_attempts=1).enqueue(30)
    workers.run("--burst", env={"SQLQUEUE_TEST_TIMEOUT": "1"}, timeout=60)
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert job.last_error == "Timed out after 1 s."
    assert job.history[-1]["outcome"] == "timeout"
