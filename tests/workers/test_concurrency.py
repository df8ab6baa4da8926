"""`runworkers --concurrency C` with real worker processes: many jobs in flight per process,
and every guarantee kept per slot (crash, deaf handler, shutdown, cancel, atomic jobs)."""

from __future__ import annotations

import os
import signal
from collections import Counter as Tally

import pytest

import django_sqlqueue
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.testapp.jobs import (
    async_deaf_to_cancel,
    async_overrun,
    async_rendezvous,
    behind_gate,
    cooperative,
    deaf_to_timeout,
    increment,
    polite_to_timeout,
    rendezvous,
    sleep,
    stall_first,
)
from tests.testapp.models import Counter, Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers


def statuses() -> Tally[str]:
    return Tally(Job.objects.values_list("status", flat=True))


def most_at_once(label: str) -> int:
    """The most jobs of `label` that were running at one moment, from their start and end
    records (an end counts before a start of the same instant)."""
    events = [
        (created, 1 if kind == f"{label}-start" else -1)
        for created, kind in Execution.objects.filter(
            label__in=[f"{label}-start", f"{label}-end"]
        ).values_list("created_at", "label")
    ]
    running = most = 0
    for _, step in sorted(events):
        running += step
        most = max(most, running)
    return most


def started(label: str) -> int:
    return Execution.objects.filter(label=label).count()


def test_waiting_jobs_overlap_in_one_process(workers):
    """200 jobs that each wait until 40 have started: one process with 50 slots runs them
    all (with 4 at once, as one-job workers would, the first ones would never finish)."""
    jobs = [rendezvous.enqueue(quorum=40) for _ in range(200)]
    workers.run("--burst", "-n", "1", "--concurrency", "50", timeout=180)
    assert statuses() == {"completed": 200}
    assert started("meet-start") == 200, "each job ran once"
    assert most_at_once("meet") >= 40
    assert len({row.worker_pid for row in Execution.objects.all()}) == 1
    assert {job.attempts for job in Job.objects.filter(pk__in=[j.pk for j in jobs])} == {1}


def test_async_handlers_overlap_too(workers):
    """`async def` handlers run on their slot thread's own event loop: they overlap."""
    for _ in range(30):
        async_rendezvous.enqueue(quorum=20)
    workers.run("--burst", "-n", "1", "--concurrency", "25", timeout=180)
    assert statuses() == {"completed": 30}
    assert most_at_once("async-meet") >= 20


def test_sigkill_with_many_jobs_in_flight_reruns_each_once(workers):
    """SIGKILL a worker process running 30 jobs: each of them runs again exactly once (its
    attempt was spent), and the claimed jobs it had not started are not lost."""
    stalled = [stall_first.enqueue(seconds=600) for _ in range(30)]
    supervisor = workers.start("-n", "1", "--concurrency", "30")
    wait_for(lambda: started("stall-1") == 30, timeout=60)
    pid = Execution.objects.filter(label="stall-1").values_list("worker_pid", flat=True)[0]
    running = Job.objects.filter(status=Status.RUNNING).count()
    assert running == 30
    os.kill(pid, signal.SIGKILL)

    wait_for(lambda: statuses() == {"completed": 30}, timeout=120)
    assert started("stall-1") == 30
    assert started("stall-2") == 30, "each job in flight at the kill ran again, once"
    assert started("stall-3") == 0
    for job in Job.objects.filter(pk__in=[job.pk for job in stalled]):
        lost, done = job.history
        assert lost["outcome"] == "lost" and "killed by SIGKILL" in lost["error"]
        assert done["outcome"] == "completed"
    assert supervisor.poll() is None


def test_a_thread_deaf_to_its_timeout_recycles_the_process_once_the_others_finish(workers):
    """A slot's handler cannot be interrupted: past its time limit it is asked to stop, and
    one that does not costs the process, after the other slots' jobs finished, each once."""
    deaf = deaf_to_timeout.enqueue(seconds=120)
    others = [sleep.enqueue(seconds=2, label="other") for _ in range(5)]
    supervisor = workers.start("-n", "1", "--concurrency", "8")
    wait_for(lambda: started("deaf-1") == 1 and started("other-start") == 5, timeout=60)
    pid = Execution.objects.get(label="deaf-1").worker_pid

    wait_for(lambda: statuses() == {"completed": 6}, timeout=120)
    deaf.refresh_from_db()
    first, second = deaf.history
    assert first["outcome"] == "timeout"
    assert "did not stop" in first["error"]
    assert second["outcome"] == "completed"
    assert started("other-start") == 5 and started("other-end") == 5, "none ran twice"
    for job in Job.objects.filter(pk__in=[job.pk for job in others]):
        assert job.attempts == 1
    wait_for(lambda: not Worker.objects.filter(pid=pid).exists(), timeout=30)
    assert Execution.objects.get(label="deaf-2").worker_pid != pid, "its process was replaced"
    assert supervisor.poll() is None


def test_a_handler_that_stops_at_its_time_limit_times_out_in_its_slot(workers):
    job = polite_to_timeout.enqueue()
    workers.run("--burst", "-n", "1", "--concurrency", "4", timeout=60)
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert job.history[-1]["outcome"] == "timeout"
    assert job.history[-1]["exception"] == "django_sqlqueue.exceptions.JobTimeout"


def test_sigterm_with_a_full_pool_finishes_every_job(workers):
    for _ in range(10):
        sleep.enqueue(seconds=1, label="drain")
    supervisor = workers.start("-n", "1", "--concurrency", "10")
    wait_for(lambda: started("drain-start") == 10, timeout=60)
    supervisor.send_signal(signal.SIGTERM)
    assert workers.wait(supervisor, timeout=60) == 0
    assert statuses() == {"completed": 10}
    assert started("drain-end") == 10


def test_second_signal_hands_the_running_jobs_back(workers):
    """The grace period over, the jobs still running go back to the queue, attempt unspent,
    and a later worker runs them."""
    stalled = [stall_first.enqueue(seconds=600) for _ in range(6)]
    supervisor = workers.start("-n", "1", "--concurrency", "6", "--grace-period", "0.5")
    wait_for(lambda: started("stall-1") == 6, timeout=60)
    supervisor.send_signal(signal.SIGTERM)
    assert workers.wait(supervisor, timeout=60) == 0
    assert statuses() == {"pending": 6}
    for job in Job.objects.filter(pk__in=[job.pk for job in stalled]):
        assert job.attempts == 0, "handed back unspent"
    # The next worker runs each again: attempt 1 again, so it stalls; make it quick.
    Job.objects.update(kwargs={"seconds": 0})
    workers.run("--burst", "-n", "1", "--concurrency", "6", timeout=60)
    assert statuses() == {"completed": 6}


def test_cancel_stops_one_slot_and_the_others_go_on(workers):
    target = cooperative.enqueue(seconds=60)
    others = [sleep.enqueue(seconds=1, label="beside") for _ in range(4)]
    workers.start("-n", "1", "--concurrency", "5")
    wait_for(lambda: started("cooperative-start") == 1, timeout=60)
    django_sqlqueue.cancel(target.pk)
    wait_for(lambda: Job.objects.get(pk=target.pk).status == Status.CANCELLED, timeout=30)
    wait_for(
        lambda: (
            Job.objects.filter(pk__in=[job.pk for job in others], status="completed").count() == 4
        ),
        timeout=60,
    )
    assert started("beside-start") == 4


def test_atomic_jobs_in_parallel_slots_commit_once_each(workers):
    Counter.objects.create(name="atomic", value=0)
    for _ in range(40):
        increment.enqueue(sleep=0.05)
    workers.run("--burst", "-n", "1", "--concurrency", "8", timeout=180)
    assert statuses() == {"completed": 40}
    assert Counter.objects.get(name="atomic").value == 40


# Queues with worker processes of their own --------------------------------------------


def running_in(queue: str) -> int:
    return Job.objects.filter(queue=queue, status=Status.RUNNING).count()


def test_a_flooded_queue_never_takes_another_queues_slots(workers):
    """`--queues flood:3,other:2`: flood's backlog fills its own 3 slots, never other's."""
    Counter.objects.create(name="gate", value=0)
    flood = [behind_gate.using(queue="flood").enqueue(label="flood") for _ in range(20)]
    supervisor = workers.start("-n", "1", "--queues", "flood:3,other:2")
    wait_for(lambda: started("flood-start") == 3, timeout=60)
    others = [behind_gate.using(queue="other").enqueue(label="other") for _ in range(2)]
    wait_for(lambda: started("other-start") == 2, timeout=60)
    assert running_in("flood") == 3 and started("flood-start") == 3
    assert running_in("other") == 2
    pids = {queue: set() for queue in ("flood", "other")}
    for row in Execution.objects.filter(label__endswith="-start"):
        pids[row.label.split("-")[0]].add(row.worker_pid)
    assert not pids["flood"] & pids["other"], "each queue has processes of its own"
    Counter.objects.filter(name="gate").update(value=1)
    wait_for(lambda: statuses() == {"completed": 22}, timeout=120)
    assert started("flood-end") == 20 and started("other-end") == 2
    assert {job.attempts for job in Job.objects.filter(pk__in=[j.pk for j in flood + others])} == {
        1
    }
    supervisor.send_signal(signal.SIGTERM)
    assert workers.wait(supervisor, timeout=60) == 0


def test_the_queues_setting_gives_a_queue_its_own_slots_beside_every_other_queue(workers):
    """QUEUES = {"flood": {"concurrency": 2}}: flood's processes take only flood's jobs; the
    other processes take every other queue's, never flood's, with --concurrency slots."""
    Counter.objects.create(name="gate", value=0)
    for _ in range(10):
        behind_gate.using(queue="flood").enqueue(label="flood")
    supervisor = workers.start(
        "-n",
        "1",
        "--concurrency",
        "3",
        env={"SQLQUEUE_TEST_QUEUES": '{"flood": {"concurrency": 2}}'},
    )
    wait_for(lambda: started("flood-start") == 2, timeout=60)
    for queue in ("default", "mail", "reports"):
        behind_gate.using(queue=queue).enqueue(label="rest")
    wait_for(lambda: started("rest-start") == 3, timeout=60)
    assert started("flood-start") == 2, "the other processes leave flood's backlog alone"
    Counter.objects.filter(name="gate").update(value=1)
    wait_for(lambda: statuses() == {"completed": 13}, timeout=120)
    supervisor.send_signal(signal.SIGTERM)
    assert workers.wait(supervisor, timeout=60) == 0


# `async def` handlers: one event loop per process, tasks that can be stopped -------------


def test_an_async_handler_past_its_time_limit_is_cancelled_in_its_slot(workers):
    """A task, unlike a thread, can be interrupted: the attempt times out at its limit and
    the process goes on (no recycling), its other slots' jobs untouched."""
    job = async_overrun.enqueue(seconds=120)
    beside = [sleep.enqueue(seconds=0.5, label="beside") for _ in range(3)]
    workers.run("--burst", "-n", "1", "--concurrency", "4", timeout=60)
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert job.history[-1]["outcome"] == "timeout"
    assert "did not stop" not in job.history[-1]["error"]
    for other in Job.objects.filter(pk__in=[j.pk for j in beside]):
        assert (other.status, other.attempts) == (Status.COMPLETED, 1)
    pids = set(Execution.objects.values_list("worker_pid", flat=True))
    assert len(pids) == 1, "one process ran them all: it was not replaced"


def test_cancel_of_an_async_handler_cancels_its_task_after_the_grace(workers):
    job = async_deaf_to_cancel.enqueue(seconds=120)
    workers.start("-n", "1", "--concurrency", "4", env={"SQLQUEUE_TEST_CANCEL_GRACE": "0.5"})
    wait_for(lambda: started("async-deaf-start") == 1, timeout=60)
    pid = Execution.objects.get(label="async-deaf-start").worker_pid
    django_sqlqueue.cancel(job.pk)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.CANCELLED, timeout=30)
    job.refresh_from_db()
    assert job.attempts == 1
    assert job.history[-1]["exception"] == "django_sqlqueue.exceptions.JobCancelled"
    after = sleep.enqueue(seconds=0, label="after")
    wait_for(lambda: Job.objects.get(pk=after.pk).status == Status.COMPLETED, timeout=30)
    assert Execution.objects.get(label="after-start").worker_pid == pid, "not recycled"
