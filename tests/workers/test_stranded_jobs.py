"""A real worker process hands back, at its next heartbeat, a job the table says it runs but
that it does not hold: what a claim whose reply was lost, or a failover that kept a claim and
lost the attempt's end, leaves behind. Before, such a job waited for its lease to run out
(the measured failover: 68 s); here its lease is an hour long, so only the hand-back can let
the job run within the test's wait."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.testapp.jobs import noop

from .conftest import WorkerProcesses, wait_for

pytestmark = pytest.mark.workers


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_stranded_job_is_handed_back_at_the_next_heartbeat(
    workers: WorkerProcesses, concurrency: int
) -> None:
    supervisor = workers.start("-n", "1", "--concurrency", str(concurrency))
    worker = wait_for(lambda: Worker.objects.first(), timeout=60)
    assert isinstance(worker, Worker)
    started = timezone.now() - timedelta(seconds=2)
    # The claim committed, its reply never reached the worker: the row is running under the
    # worker's name, its lease an hour long.
    job = Job.objects.create(
        name=noop.name,
        status=Status.RUNNING,
        lease_owner=worker.id,
        attempts=1,
        started_at=started,
        lease_expires_at=started + timedelta(hours=1),
    )
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == Status.COMPLETED,
        timeout=30,
    )
    job.refresh_from_db()
    released, completed = job.history
    assert (released["outcome"], released["worker"]) == ("released", worker.id)
    assert "was not running it" in released["error"]
    assert completed["outcome"] == "completed"
    log = workers.log(supervisor)
    assert f"Worker {worker.id}: handed back 1 job the database says it runs" in log
    assert supervisor.poll() is None
