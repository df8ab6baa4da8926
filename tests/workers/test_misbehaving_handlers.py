"""Handlers that misbehave, with real worker processes: a transaction left open, a fork, an
`os._exit(0)`, a lingering thread, GIL-bound C code. Each costs its own attempt at most —
never its worker, a slot, or a second run of another job."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.testapp.jobs import (
    big_result,
    exit_zero,
    fork_and_return,
    hold_gil,
    increment,
    leak,
    leak_in_atomic_job,
    linger,
    record,
    sleep,
)
from tests.testapp.models import Counter, Execution

from .conftest import wait_for

#: How long the GIL-holding handler holds it: two and a half of the test settings' 4 s lease.
GIL_SECONDS = 10.0

pytestmark = pytest.mark.workers


def finished(ids: list[int]) -> bool:
    return (
        not Job.objects.filter(pk__in=ids)
        .exclude(status__in=[Status.COMPLETED, Status.DEAD])
        .exists()
    )


@pytest.mark.parametrize("how", ["atomic", "autocommit"])
def test_a_handler_leaving_a_transaction_open_costs_only_its_attempt(workers, how):
    """The leaking job fails (then goes dead) saying why, its write in the open transaction
    is rolled back, and both workers keep draining the queue: every other job completes."""
    leaking = [leak.using(max_attempts=2).enqueue(how=how, label=f"leak{n}") for n in range(3)]
    others = record.enqueue_many([{"label": f"ok{n}"} for n in range(60)])
    supervisor = workers.start("-n", "2")
    ids = [job.pk for job in leaking] + [job.pk for job in others]
    wait_for(lambda: finished(ids), timeout=90)
    assert supervisor.poll() is None
    assert Job.objects.filter(pk__in=[j.pk for j in others], status=Status.COMPLETED).count() == 60
    for job in leaking:
        job.refresh_from_db()
        assert job.status == Status.DEAD, job.history
        assert [h["outcome"] for h in job.history] == ["error", "error"]
        assert "left a transaction open" in job.last_error
        expected = "never exited" if how == "atomic" else "autocommit turned off"
        assert expected in job.last_error
        assert job.history[-1]["exception"].endswith("TransactionLeftOpen")
    # Written before the leak: kept; written inside the open transaction: rolled back.
    assert Execution.objects.filter(label__endswith="-start").count() == 6
    assert not Execution.objects.filter(label__endswith="-inside").exists()
    # Nothing ran twice; no worker was lost.
    runs = list(Execution.objects.filter(label__startswith="ok").values_list("job_id", flat=True))
    assert len(runs) == len(set(runs)) == 60
    assert not Job.objects.filter(last_error__contains="was lost").exists()


def test_an_atomic_job_leaving_a_block_open_is_not_completed(workers):
    """The job's completion was written inside the transaction its handler left open: it is
    rolled back with the handler's write, and the attempt fails saying why."""
    Counter.objects.create(name="atomic", value=0)
    job = leak_in_atomic_job.enqueue()
    after = increment.enqueue()
    workers.start("-n", "1")
    wait_for(lambda: finished([job.pk, after.pk]), timeout=30)
    job.refresh_from_db()
    assert job.status == Status.DEAD and job.result is None, job.history
    assert "left a transaction open" in job.last_error
    assert Job.objects.get(pk=after.pk).status == Status.COMPLETED
    assert Counter.objects.get(name="atomic").value == 1  # the next job's, not the leaker's


def test_os_exit_zero_in_a_handler_is_noticed_at_once(workers):
    """A worker that exits with status 0 while it runs a job crashed, as with any other
    status: its job is recovered at once (not when the 30 s lease expires) and it is
    replaced."""
    job = exit_zero.using(max_attempts=2).enqueue()
    after = record.enqueue(label="after")
    supervisor = workers.start("-n", "1", env={"SQLQUEUE_TEST_LEASE": "30"})
    # Recovered at once, by the supervisor that saw its worker exit: not by lease expiry,
    # whose entry would say the worker "stopped renewing its lease".
    first = wait_for(lambda: Job.objects.get(pk=job.pk).history, timeout=60)[0]
    assert "exited with status 0 while running job" in first["error"], first
    wait_for(lambda: finished([job.pk, after.pk]), timeout=60)
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert [h["outcome"] for h in job.history] == ["lost", "lost"]
    assert all("exited with status 0 while running job" in h["error"] for h in job.history)
    assert Job.objects.get(pk=after.pk).status == Status.COMPLETED
    assert supervisor.poll() is None


def gone(pid: int) -> bool:
    """The process has ended (or is a zombie its parent has not reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in {"Z", "X"}


def test_a_child_a_handler_forked_never_runs_the_worker_loop(workers):
    """The child returns into the worker's code as the parent does: it is ended there, so it
    records nothing, claims nothing, and the parent's connection keeps working."""
    forking = fork_and_return.enqueue()
    supervisor = workers.start("-n", "1")
    wait_for(lambda: finished([forking.pk]), timeout=30)
    others = record.enqueue_many([{"label": f"after{n}"} for n in range(30)])
    wait_for(lambda: finished([job.pk for job in others]), timeout=30)
    forking.refresh_from_db()
    assert forking.status == Status.COMPLETED
    assert [h["outcome"] for h in forking.history] == ["completed"]
    child = forking.result
    assert child and child != 0
    wait_for(lambda: gone(child), timeout=10)
    (worker_pid,) = Worker.objects.values_list("pid", flat=True)
    assert set(
        Execution.objects.filter(label__startswith="after").values_list("worker_pid", flat=True)
    ) == {worker_pid}
    assert Execution.objects.filter(label__startswith="after").count() == 30
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=30) == 0
    assert gone(child)
    assert "forked by a job handler, returned into the worker" in workers.log(supervisor)


def test_a_lingering_thread_does_not_cost_a_slot_with_max_jobs(workers):
    """A handler leaves a non-daemon thread that sleeps for an hour: the recycled worker still
    exits, and the supervisor starts a fresh one for the rest of the queue."""
    first = linger.enqueue()
    rest = record.enqueue_many([{"label": f"r{n}"} for n in range(4)])
    supervisor = workers.start("-n", "1", "--max-jobs", "1")
    wait_for(lambda: finished([first.pk] + [job.pk for job in rest]), timeout=60)
    pids = set(Execution.objects.values_list("worker_pid", flat=True))
    assert len(pids) == 5, "each job in a fresh worker (--max-jobs 1)"
    # Every worker that unregistered has exited, or is exiting: the last one can be between
    # removing its row and its exit when the last job shows finished. Its lingering thread
    # sleeps an hour, so a process it kept alive is still there after the wait.
    unregistered = pids - set(Worker.objects.values_list("pid", flat=True))
    wait_for(lambda: all(gone(pid) for pid in unregistered), timeout=15)
    assert "left 1 thread(s) running (lingering)" in workers.log(supervisor)
    assert supervisor.poll() is None


def test_a_result_over_the_limit_fails_only_its_job(workers):
    """5 MB is refused before the write (MAX_RESULT_BYTES, 1 MiB): dead at once, no retry, and
    the jobs around it complete once each, on the same worker."""
    before = record.enqueue_many([{"label": f"b{n}"} for n in range(5)])
    big = big_result.enqueue(5_000_000)  # max_attempts=3
    after = record.enqueue_many([{"label": f"a{n}"} for n in range(5)])
    supervisor = workers.start("-n", "1", env={"SQLQUEUE_TEST_BATCH_COMPLETION": "1"})
    others = [job.pk for job in before + after]
    wait_for(lambda: finished([big.pk, *others]), timeout=60)
    big.refresh_from_db()
    assert big.status == Status.DEAD and big.attempts == 1, big.history
    assert "5000002 bytes as JSON; the limit is MAX_RESULT_BYTES, 1048576" in big.last_error
    assert big.result is None
    assert Job.objects.filter(pk__in=others, status=Status.COMPLETED).count() == 10
    assert Execution.objects.count() == 10
    assert len(set(Execution.objects.values_list("worker_pid", flat=True))) == 1
    assert supervisor.poll() is None


def test_a_handler_holding_the_gil_past_its_lease_runs_once(workers):
    """`sum(range(...))` holds the GIL for GIL_SECONDS, past the 4 s lease: the worker's heartbeat
    thread cannot run, but the supervisor renews the lease of the job its live, working child
    runs. The job completes once, is never recovered, never runs twice."""
    job = hold_gil.enqueue(seconds=GIL_SECONDS)
    supervisor = workers.start("-n", "2")
    wait_for(lambda: finished([job.pk]), timeout=120)
    job.refresh_from_db()
    assert job.status == Status.COMPLETED, job.history
    assert [h["outcome"] for h in job.history] == ["completed"]
    assert Execution.objects.filter(job_id=job.pk, label="gil-start").count() == 1
    began, ended = (
        Execution.objects.get(job_id=job.pk, label=label).created_at
        for label in ("gil-start", "gil-end")
    )
    assert (ended - began).total_seconds() > 4, "the handler held the GIL for less than a lease"
    assert supervisor.poll() is None


def test_a_handler_holding_the_gil_beside_other_slots_leaves_each_job_to_run_once(workers):
    """With --concurrency, a handler holding the GIL starves its process's other slots and
    its heartbeat alike: the supervisor keeps the leases of every job its live child holds
    (three, here), so none of them is recovered or run twice while the GIL is held."""
    held = hold_gil.enqueue(seconds=GIL_SECONDS)
    beside = [sleep.enqueue(seconds=2, label=f"beside-{n}") for n in range(2)]
    supervisor = workers.start("-n", "1", "--concurrency", "3")
    ids = [held.pk, *(job.pk for job in beside)]
    wait_for(lambda: finished(ids), timeout=120)
    for job in Job.objects.filter(pk__in=ids):
        assert job.status == Status.COMPLETED, (job.pk, job.history)
        assert [h["outcome"] for h in job.history] == ["completed"], job.history
    assert Execution.objects.filter(job_id=held.pk, label="gil-start").count() == 1
    for job in beside:
        assert (
            Execution.objects.filter(job_id=job.pk, label=f"{job.kwargs['label']}-start").count()
            == 1
        )
    assert len(set(Execution.objects.values_list("worker_pid", flat=True))) == 1, "one process"
    began, ended = (
        Execution.objects.get(job_id=held.pk, label=label).created_at
        for label in ("gil-start", "gil-end")
    )
    assert (ended - began).total_seconds() > 4, "the handler held the GIL for less than a lease"
    assert supervisor.poll() is None
