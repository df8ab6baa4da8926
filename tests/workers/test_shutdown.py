"""Graceful shutdown: SIGTERM lets running jobs finish within the grace period, then hands
them back without spending an attempt."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.probes import Probes
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
    assert supervisor.wait(timeout=60) == 0
    elapsed = time.monotonic() - began

    job.refresh_from_db()
    assert job.status == Status.PENDING
    assert job.attempts == 0  # the interrupted attempt is not spent
    assert job.lease_owner == ""
    assert job.history[-1]["outcome"] == "released"
    # Handed back when the grace ran out, by its worker: not run to its end, not killed.
    assert not Execution.objects.filter(job_id=job.pk, label="sleep-end").exists()
    assert elapsed >= 0.9, elapsed  # not before the grace period
    assert not Worker.objects.exists()
    log = workers.log(supervisor)
    assert "interrupted by shutdown" in log
    assert "did not stop; killing it" not in log


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
    wait_for(lambda: "Received SIGTERM" in workers.log(supervisor), timeout=30)
    supervisor.send_signal(signal.SIGINT)
    assert supervisor.wait(timeout=60) == 0
    log = workers.log(supervisor)
    assert "Second signal: interrupting running jobs" in log
    job.refresh_from_db()
    # Handed back at the second signal, long before its grace (60 s) or its end (20 s).
    assert job.status == Status.PENDING
    assert job.attempts == 0
    assert job.history[-1]["outcome"] == "released"
    assert not Execution.objects.filter(job_id=job.pk, label="sleep-end").exists()


def test_idle_workers_stop_promptly(workers, probes: Probes):
    # A 30 s poll interval and a grace period of 600 s: an idle worker deaf to the stop
    # would sleep on, and a supervisor that waited for its grace would outlast the wait.
    supervisor = workers.start("-n", "3", "--grace-period", "600", env={"SQLQUEUE_TEST_POLL": "30"})
    wait_for(lambda: Worker.objects.count() == 3, timeout=30)
    pids = set(Worker.objects.values_list("pid", flat=True))
    for pid in pids:
        probes.wait("worker-idle", pid=pid)
    signalled = probes.mark()
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=60) == 0
    assert not Worker.objects.exists()
    # Their waits ended because they were told to stop, not at their timeout. (A worker
    # whose wait ended by itself in the instant the signal came stops at its next look at
    # the stop without waiting again: not every worker need say so, but waits deaf to the
    # stop would leave none saying so.)
    woke = probes.find("worker-woke", after=signalled)
    assert {line["pid"] for line in woke if line["reason"] == "stop"}, woke


# A signal while the supervisor starts ---------------------------------------------------------
#
# The supervisor installs its handlers, logs its banner, then forks its workers. A stop signal
# anywhere in there must reach every worker it starts: none may claim a job, and the
# supervisor must exit at once, not when the grace period (GRACE) runs out.

#: The grace period of these supervisors: far longer than the tests wait for them to stop.
GRACE = "600"


def _assert_stopped_at_once(workers, supervisor, job: Job) -> str:
    """The supervisor exits by itself, well before its grace period (GRACE) could end: the
    signal reached it and every worker it started."""
    try:
        code = supervisor.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"not stopped 60 s after the signal, with a grace period of {GRACE} s: the signal "
            f"was lost, or a worker never heard of it:\n{workers.log(supervisor)}"
        ) from None
    log = workers.log(supervisor)
    assert code == 0, log
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
    supervisor = workers.start(
        "-n",
        "2",
        "--grace-period",
        GRACE,
        env={"SQLQUEUE_TEST_SIGNAL_ON": f"{signame}:self:django-sqlqueue supervisor pid"},
    )
    log = _assert_stopped_at_once(workers, supervisor, job)
    assert f"Received {signame}" in log
    assert _untouched(job), (job.status, job.attempts, job.history, log)
    assert "Worker " not in log  # none was started after the signal


def test_a_signal_while_the_workers_are_forked_reaches_each_of_them(workers, tmp_path):
    """The first worker signals its supervisor as it starts, while the others are still to
    be forked: those started after it must hear of it too. One signal in all: the workers
    after the first log the same line, and a second signal would mean "stop at once"."""
    job = sleep.enqueue(0.2)
    supervisor = workers.start(
        "-n",
        "4",
        "--grace-period",
        GRACE,
        env={
            "SQLQUEUE_TEST_SIGNAL_ON": "SIGTERM:parent:Worker ",
            "SQLQUEUE_TEST_SIGNAL_ONCE": str(tmp_path / "signalled"),
        },
    )
    log = _assert_stopped_at_once(workers, supervisor, job)
    assert log.count("Received SIGTERM") == 1 and "Second signal" not in log, log
    # The first worker may have claimed the job before the signal was forwarded to it; then
    # it finished it, as a job in hand at SIGTERM does.
    assert _untouched(job) or job.status == Status.COMPLETED, (job.status, job.history, log)


@pytest.mark.parametrize("delay_ms", [0, 1, 2, 5, 10, 20, 40, 80, 160])
def test_a_signal_at_any_point_of_start_up_stops_it_at_once(workers, delay_ms):
    """SIGTERM a given time after the banner appears in the log, wherever start-up is then."""
    job = sleep.enqueue(0.2)
    supervisor = workers.start("-n", "2", "--grace-period", GRACE)
    wait_for(lambda: "django-sqlqueue supervisor pid" in workers.log(supervisor), 30, 0.001)
    time.sleep(delay_ms / 1000)  # the moment of start-up this case signals at (0.16 s at most)
    supervisor.send_signal(signal.SIGTERM)
    log = _assert_stopped_at_once(workers, supervisor, job)
    # Not started, or started before the signal reached its worker and finished in the grace
    # period; never claimed and left behind.
    assert _untouched(job) or (job.status == Status.COMPLETED and job.attempts == 1), log
