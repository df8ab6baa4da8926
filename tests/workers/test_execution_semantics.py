"""Execution semantics with real processes: at most one re-run per worker crash, fair
dispatch of mixed workloads, exactly-once database effects of atomic jobs, cancel of running
jobs (cooperative, interrupted, deaf), and progress."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections import Counter as Tally

import pytest

import django_sqlqueue
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.testapp.jobs import cooperative, deaf, increment, noop, progress, record, sleep
from tests.testapp.models import Counter, Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers


def statuses() -> Tally[str]:
    return Tally(Job.objects.values_list("status", flat=True))


def all_finished(total: int) -> bool:
    return Job.objects.filter(status=Status.COMPLETED).count() == total


def kill_a_busy_worker(exclude: set[int]) -> int | None:
    """SIGKILL one live worker process that is running a job; its pid."""
    pids = list(
        Worker.objects.exclude(current_job_id=None)
        .exclude(pid__in=exclude)
        .values_list("pid", flat=True)
    ) or list(Worker.objects.exclude(pid__in=exclude).values_list("pid", flat=True))
    if not pids:
        return None
    pid = random.choice(pids)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
        return pid
    return None


def time_to_kill(total: int, executions: int, killed: set[int]) -> bool:
    """The moment for the next kill: `executions` recorded and a worker not yet killed is up
    (or every job finished: no kill left to make)."""
    return all_finished(total) or (
        Execution.objects.count() >= executions and Worker.objects.exclude(pid__in=killed).exists()
    )


def test_a_killed_worker_reruns_at_most_the_job_it_was_running(workers):
    """The outcome of every finished job is durable before its worker starts the next one:
    however many jobs a worker had finished, a SIGKILL makes at most one of them run again."""
    total = 600
    record.enqueue_many([{"label": str(n), "sleep": 0.005} for n in range(total)])
    workers.start("-n", "2", env={"SQLQUEUE_TEST_HEARTBEAT": "0.5"})
    killed: set[int] = set()
    while not all_finished(total) and len(killed) < 6:
        # A kill each time 50 more jobs have run.
        wait_for(lambda: time_to_kill(total, 50 * (len(killed) + 1) + 1, killed), timeout=120)
        pid = kill_a_busy_worker(killed)
        if pid:
            killed.add(pid)
    wait_for(lambda: all_finished(total), timeout=120)
    runs = Tally(Execution.objects.values_list("job_id", flat=True))
    assert len(runs) == total
    reruns = sum(count - 1 for count in runs.values())
    assert len(killed) >= 3, "the test killed too few workers to mean anything"
    assert reruns <= len(killed), f"{reruns} re-runs for {len(killed)} kills"


def test_with_batch_completion_a_kill_can_rerun_several(workers):
    """The opt-in trade, shown: batched successes of a killed worker run again."""
    total = 3000
    noop.enqueue_many([{} for _ in range(total)])
    record.enqueue_many([{"label": str(n)} for n in range(total)])
    supervisor = workers.start(
        "-n", "1", env={"SQLQUEUE_TEST_BATCH_COMPLETION": "1", "SQLQUEUE_TEST_HEARTBEAT": "0.5"}
    )
    wait_for(lambda: Execution.objects.count() > 200, timeout=60)
    pid = Worker.objects.values_list("pid", flat=True).first()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: all_finished(2 * total), timeout=180)
    runs = Tally(Execution.objects.values_list("job_id", flat=True))
    assert sum(count - 1 for count in runs.values()) <= 20, "at most one batch re-ran"
    assert supervisor.poll() is None


def test_a_mixed_workload_uses_every_worker(workers):
    """After a stream of fast jobs, slow ones spread over all workers instead of piling up
    in one worker's hand."""
    supervisor = workers.start("-n", "4")
    wait_for(lambda: Worker.objects.count() == 4, timeout=30)
    noop.enqueue_many([{} for _ in range(3000)])
    wait_for(lambda: all_finished(3000), timeout=120)
    slow = sleep.enqueue_many([{"seconds": 0.3, "label": "slow"} for _ in range(40)])
    wait_for(lambda: all_finished(3040), timeout=120)
    per_worker = Tally(
        Execution.objects.filter(label="slow-end", job_id__in=[j.pk for j in slow]).values_list(
            "worker_pid", flat=True
        )
    )
    assert sum(per_worker.values()) == 40
    assert len(per_worker) == 4, f"slow jobs ran on {len(per_worker)} of 4 workers"
    assert max(per_worker.values()) <= 16, per_worker  # ideal 10 each
    assert supervisor.poll() is None


def test_atomic_jobs_count_exactly_once_under_kills(workers):
    """Each atomic job adds one in the transaction that records its completion: whatever is
    killed when, the counter ends at exactly the number of jobs."""
    total = 400
    Counter.objects.create(name="atomic", value=0)
    increment.enqueue_many([{"sleep": 0.004} for _ in range(total)])
    workers.start("-n", "2", env={"SQLQUEUE_TEST_HEARTBEAT": "0.5"})
    killed: set[int] = set()
    while not all_finished(total) and len(killed) < 6:
        # A kill each time 30 more jobs have counted (an execution commits with its count).
        wait_for(lambda: time_to_kill(total, 30 * (len(killed) + 1), killed), timeout=180)
        pid = kill_a_busy_worker(killed)
        if pid:
            killed.add(pid)
    wait_for(lambda: all_finished(total), timeout=180)
    assert len(killed) >= 3
    executions = Execution.objects.filter(label="increment").count()
    assert Counter.objects.get(name="atomic").value == total
    assert executions == total, "an execution's own record rolls back with it too"


def test_cancel_of_a_cooperative_running_job(workers):
    job = cooperative.enqueue(seconds=60)
    after = noop.enqueue()
    workers.start("-n", "1", env={"SQLQUEUE_TEST_CANCEL_GRACE": "30"})
    wait_for(lambda: Execution.objects.filter(job_id=job.pk).exists(), timeout=30)
    result = django_sqlqueue.cancel(job.pk)
    assert (result.applied, result.status) == (True, "running")
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.CANCELLED, timeout=10)
    job.refresh_from_db()
    assert job.history[-1]["outcome"] == "cancelled"
    assert job.history[-1]["exception"] == "django_sqlqueue.exceptions.JobCancelled"
    assert job.attempts == 1, "a cancelled job is not retried"
    # The worker goes on with the next job.
    wait_for(lambda: Job.objects.get(pk=after.pk).status == Status.COMPLETED, timeout=10)


def test_cancel_of_a_deaf_handler_interrupts_it_after_the_grace(workers):
    job = deaf.enqueue(seconds=60)
    workers.start("-n", "1", env={"SQLQUEUE_TEST_CANCEL_GRACE": "1"})
    wait_for(lambda: Execution.objects.filter(job_id=job.pk).exists(), timeout=30)
    asked = time.monotonic()
    django_sqlqueue.cancel(job)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.CANCELLED, timeout=15)
    assert time.monotonic() - asked >= 1.0, "not before its grace"
    job.refresh_from_db()
    assert job.attempts == 1
    assert "did not stop in time" in job.last_error


def test_a_handler_that_swallows_the_interrupt_costs_its_process(workers):
    job = deaf.enqueue(seconds=120, swallow=True)
    after = noop.enqueue()
    supervisor = workers.start("-n", "1", env={"SQLQUEUE_TEST_CANCEL_GRACE": "0.5"})
    wait_for(lambda: Execution.objects.filter(job_id=job.pk).exists(), timeout=30)
    pid = Execution.objects.get(job_id=job.pk).worker_pid
    django_sqlqueue.cancel(job.pk)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.CANCELLED, timeout=30)
    wait_for(lambda: Job.objects.get(pk=after.pk).status == Status.COMPLETED, timeout=30)
    assert not Worker.objects.filter(pid=pid).exists(), "its worker was replaced"
    assert supervisor.poll() is None


def test_cancel_of_a_finished_job_is_a_clear_no_op(workers):
    job = noop.enqueue()
    workers.run("--burst")
    result = django_sqlqueue.cancel(job)
    assert (result.applied, result.status) == (False, "completed")
    assert "completed" in result.message


def test_progress_is_stored_while_the_job_runs(workers):
    job = progress.enqueue(steps=4, pause=0.8)
    workers.start("-n", "1")
    seen = wait_for(
        lambda: (
            Job.objects.filter(pk=job.pk, progress__gte=25)
            .values_list("progress", "progress_message", "status")
            .first()
        ),
        timeout=30,
    )
    percent, message, status = seen
    assert 25 <= percent <= 100
    assert status == Status.RUNNING and message.startswith("step ")
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.COMPLETED, timeout=30)
