"""Graceful shutdown: SIGTERM lets running jobs finish within the grace period, then hands
them back without spending an attempt."""

from __future__ import annotations

import signal
import subprocess
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


# A signal while the supervisor starts ---------------------------------------------------------
#
# The supervisor installs its handlers, logs its banner, then forks its workers. A stop signal
# anywhere in there must reach every worker it starts: none may claim a job, and the
# supervisor must exit at once, not when the grace period (60 s here) runs out.


def _assert_stopped_at_once(workers, supervisor, job: Job, began: float) -> str:
    try:
        code = supervisor.wait(timeout=15)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the signal was lost:\n{workers.log(supervisor)}") from None
    elapsed = time.monotonic() - began
    log = workers.log(supervisor)
    assert code == 0, log
    assert elapsed < 5, (elapsed, log)
    assert not Worker.objects.exists()
    job.refresh_from_db()
    assert job.lease_owner == ""
    return log


def _untouched(job: Job) -> bool:
    """Never started: pending, attempt unspent, no execution."""
    return (
        job.status == Status.PENDING
        and job.attempts == 0
        and not Execution.objects.filter(job_id=job.pk).exists()
    )


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_before_the_workers_are_forked_is_not_lost(workers, signame):
    """The signal arrives as the banner is logged: after the handlers, before any fork."""
    job = sleep.enqueue(0.2)
    began = time.monotonic()
    supervisor = workers.start(
        "-n",
        "2",
        "--grace-period",
        "60",
        env={"SQLQUEUE_TEST_SIGNAL_ON": f"{signame}:self:django-sqlqueue supervisor pid"},
    )
    log = _assert_stopped_at_once(workers, supervisor, job, began)
    assert f"Received {signame}" in log
    assert _untouched(job), (job.status, job.attempts, job.history, log)
    assert "Worker " not in log  # none was started after the signal


def test_a_signal_while_the_workers_are_forked_reaches_each_of_them(workers):
    """The first worker signals its supervisor as it starts, while the others are still to
    be forked: those started after it must hear of it too."""
    job = sleep.enqueue(0.2)
    began = time.monotonic()
    supervisor = workers.start(
        "-n",
        "4",
        "--grace-period",
        "60",
        env={"SQLQUEUE_TEST_SIGNAL_ON": "SIGTERM:parent:Worker "},
    )
    log = _assert_stopped_at_once(workers, supervisor, job, began)
    assert "Received SIGTERM" in log
    # The first worker may have claimed the job before the signal was forwarded to it; then
    # it finished it, as a job in hand at SIGTERM does.
    assert _untouched(job) or job.status == Status.COMPLETED, (job.status, job.history, log)


@pytest.mark.parametrize("delay_ms", [0, 1, 2, 5, 10, 20, 40, 80, 160])
def test_a_signal_at_any_point_of_start_up_stops_it_at_once(workers, delay_ms):
    """SIGTERM a given time after the banner appears in the log, wherever start-up is then."""
    job = sleep.enqueue(0.2)
    supervisor = workers.start("-n", "2", "--grace-period", "60")
    wait_for(lambda: "django-sqlqueue supervisor pid" in workers.log(supervisor), 30, 0.001)
    time.sleep(delay_ms / 1000)
    supervisor.send_signal(signal.SIGTERM)
    began = time.monotonic()
    log = _assert_stopped_at_once(workers, supervisor, job, began)
    # Not started, or started before the signal reached its worker and finished in the grace
    # period; never claimed and left behind.
    assert _untouched(job) or (job.status == Status.COMPLETED and job.attempts == 1), log
