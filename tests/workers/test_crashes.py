"""Crash recovery with real processes: SIGKILL of a worker, of a whole supervisor, and a
zombie that wakes up after its lease was taken away."""

from __future__ import annotations

import os
import signal
import time

import pytest

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.testapp.jobs import sleep
from tests.testapp.models import Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers


def _started(job: Job, label: str = "sleep") -> Execution | None:
    return Execution.objects.filter(job_id=job.pk, label=f"{label}-start").order_by("id").last()


def _status(job: Job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def test_sigkilled_worker_job_runs_again_elsewhere(workers):
    job = sleep.enqueue(3)
    supervisor = workers.start("-n", "2")
    first = wait_for(lambda: _started(job), timeout=30)
    os.kill(first.worker_pid, signal.SIGKILL)

    wait_for(lambda: _status(job) == Status.COMPLETED, timeout=60)
    job.refresh_from_db()
    assert job.attempts == 2
    lost, done = job.history
    assert lost["outcome"] == "lost"
    assert "killed by SIGKILL" in lost["error"]
    assert lost["worker"] in lost["error"]
    assert done["outcome"] == "completed"
    finisher = Execution.objects.get(job_id=job.pk, label="sleep-end")
    assert finisher.worker_pid != first.worker_pid
    # The supervisor replaced the dead worker and is still running.
    assert supervisor.poll() is None
    wait_for(lambda: Worker.objects.count() == 2, timeout=30)
    assert not Worker.objects.filter(pid=first.worker_pid).exists()


def test_sigkilled_worker_with_no_attempts_left_goes_dead(workers):
    job = sleep.using(max_attempts=1).enqueue(3)
    workers.start("-n", "1")
    first = wait_for(lambda: _started(job), timeout=30)
    os.kill(first.worker_pid, signal.SIGKILL)

    wait_for(lambda: _status(job) == Status.DEAD, timeout=30)
    job.refresh_from_db()
    assert "was lost" in job.last_error
    assert job.history[-1]["worker"] in job.last_error
    assert "killed by SIGKILL" in job.last_error


def test_killed_supervisor_jobs_come_back_after_the_lease(workers):
    """SIGKILL the supervisor and its workers at once: nobody saw them die, so the job is
    only recovered when its lease expires — by the next supervisor."""
    job = sleep.enqueue(seconds=30)
    first = workers.start("-n", "1")
    wait_for(lambda: _started(job), timeout=30)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    killed_at = time.monotonic()
    assert _status(job) == Status.RUNNING

    Job.objects.filter(pk=job.pk).update(kwargs={"seconds": 0.1})  # make the rerun quick
    workers.start("-n", "1")
    wait_for(lambda: _status(job) == Status.COMPLETED, timeout=60)
    job.refresh_from_db()
    lease_seconds = 4  # tests/settings.py
    assert time.monotonic() - killed_at >= lease_seconds - 1
    assert [h["outcome"] for h in job.history] == ["lost", "completed"]
    assert "stopped renewing its lease" in job.history[0]["error"]


def test_long_job_on_a_live_worker_is_never_stolen(workers):
    """A job running for twice its lease keeps it: the heartbeat renews it."""
    job = sleep.enqueue(9)  # lease is 4 s in tests/settings.py
    workers.start("-n", "2")
    wait_for(lambda: _status(job) == Status.COMPLETED, timeout=60)
    job.refresh_from_db()
    assert job.attempts == 1
    assert [h["outcome"] for h in job.history] == ["completed"]
    assert Execution.objects.filter(job_id=job.pk, label="sleep-start").count() == 1


def test_zombie_worker_cannot_overwrite_the_new_owner(workers):
    """A worker frozen (SIGSTOP) past its lease loses the job; when it wakes and finishes,
    its late result is discarded (fencing) and the new owner's outcome stands."""
    job = sleep.enqueue(1, label="z")
    supervisor = workers.start("-n", "2")
    zombie = wait_for(lambda: _started(job, "z"), timeout=30)
    os.kill(zombie.worker_pid, signal.SIGSTOP)
    try:
        wait_for(lambda: _status(job) == Status.COMPLETED, timeout=60)
    finally:
        os.kill(zombie.worker_pid, signal.SIGCONT)
    job.refresh_from_db()
    lost, completed = job.history
    assert lost["outcome"] == "lost" and completed["outcome"] == "completed"
    assert completed["worker"] != lost["worker"]
    # The zombie now finishes its sleep and tries to record its result.
    wait_for(
        lambda: Execution.objects.filter(
            job_id=job.pk, label="z-end", worker_pid=zombie.worker_pid
        ).exists(),
        timeout=30,
    )
    # ... and is refused: its result is not written.
    refused = f"Job {job.reference} tests.sleep attempt 1/"
    wait_for(
        lambda: any(
            refused in line and "but its lease was lost; its result was discarded" in line
            for line in workers.log(supervisor).splitlines()
        ),
        timeout=30,
    )
    job.refresh_from_db()
    assert job.status == Status.COMPLETED
    assert [h["outcome"] for h in job.history] == ["lost", "completed"]
    assert job.history[-1]["worker"] == completed["worker"]
