"""A locked database is not a crash: a job whose worker is alive never runs twice because
nobody could write for a while.

A review held a read-only transaction open on SQLite (`BEGIN IMMEDIATE`, as a slow page
under ATOMIC_REQUESTS or a shell would) past the jobs' leases: nothing could renew them, and
once the lock was gone the supervisor recovered both running jobs and ran them again while
their workers were still running them. The supervisor now spares the workers it knows are
alive; their heartbeats renew the leases as soon as they can write.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.testapp.jobs import record, sleep
from tests.testapp.models import Execution

from .conftest import WorkerProcesses, wait_for

pytestmark = pytest.mark.workers


@pytest.fixture
def sqlite_file() -> str:
    if connection.vendor != "sqlite":
        pytest.skip("the write lock of a whole database is SQLite's")
    return str(connection.settings_dict["NAME"])


def test_a_transaction_holding_the_write_lock_past_the_leases_runs_no_job_twice(
    workers: WorkerProcesses, sqlite_file: str
) -> None:
    jobs = [sleep.enqueue(8, label=f"locked-{n}") for n in range(2)]
    supervisor = workers.start("-n", "2")
    wait_for(lambda: Job.objects.filter(status=Status.RUNNING).count() == 2, 30)

    holder = sqlite3.connect(sqlite_file, isolation_level=None, timeout=30)
    holder.execute("BEGIN IMMEDIATE")  # what a long read-only atomic() block takes
    try:
        # Hold it until both leases have expired by a margin (reads go on meanwhile).
        wait_for(
            lambda: all(
                job.lease_expires_at is not None
                and job.lease_expires_at < timezone.now() - timedelta(seconds=1)
                for job in Job.objects.filter(pk__in=[j.pk for j in jobs])
            ),
            30,
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    wait_for(lambda: Job.objects.filter(status=Status.COMPLETED).count() == 2, 60)
    for job in Job.objects.filter(pk__in=[j.pk for j in jobs]):
        assert job.attempts == 1, job.history
        assert [entry["outcome"] for entry in job.history] == ["completed"]
        label = job.kwargs["label"]
        assert Execution.objects.filter(job_id=job.pk, label=f"{label}-start").count() == 1
    assert "Recovered jobs with expired leases" not in workers.log(supervisor)


def test_a_job_its_live_worker_does_not_know_it_holds_comes_back(
    workers: WorkerProcesses,
) -> None:
    """Sparing a live worker must not strand what it does not hold. A claim whose reply a
    cut connection lost leaves rows in `running` under a live worker's name that it never
    renews: once its heartbeat runs past their lease, they are recovered and run (on every
    database: the worker is alive throughout)."""
    supervisor = workers.start("-n", "1")
    worker_id = wait_for(lambda: Worker.objects.values_list("id", flat=True).first(), 30)
    with transaction.atomic():  # the worker never sees the job pending
        job = record.enqueue(label="lost-claim")
        # What the lost claim committed: the row is the live worker's, unknown to it.
        Job.objects.filter(pk=job.pk).update(
            status=Status.RUNNING,
            lease_owner=worker_id,
            lease_expires_at=timezone.now() + timedelta(seconds=1),
            attempts=1,
        )
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.COMPLETED, 60)
    assert supervisor.poll() is None
    assert Execution.objects.filter(job_id=job.pk).count() == 1
    assert "Recovered jobs with expired leases" in workers.log(supervisor)
