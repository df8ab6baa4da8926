"""While the database refuses the queue's statements: every supervisor path at shutdown
(drain, recovering a killed worker's jobs, removing its row, housekeeping, closing
connections) survives the errors, and the supervisor exits 0 after a clean SIGTERM; a worker's
hard stop of a hung handler still ends its process (its heartbeat thread does not die).

The outage is simulated without touching the shared servers: the queue's tables are renamed
away (every statement on them fails with a database error), then back.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import pytest
from django.db import connection

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.testapp.jobs import deaf
from tests.testapp.models import Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers


@contextlib.contextmanager
def tables_away() -> Iterator[None]:
    """The queue's job and worker tables unreachable under their names, for the duration."""
    moved = [
        (model, model._meta.db_table, f"{model._meta.db_table}_away") for model in (Job, Worker)
    ]
    with connection.schema_editor() as editor:
        for model, name, away in moved:
            editor.alter_db_table(model, name, away)
    try:
        yield
    finally:
        with connection.schema_editor() as editor:
            for model, name, away in moved:
                editor.alter_db_table(model, away, name)


def test_sigterm_during_an_outage_exits_0(workers):
    """A handler deaf to every interrupt forces the kill path: the supervisor kills its
    worker, cannot reach the database to recover its job, says so, and still exits 0. The job
    comes back when its lease expires (recovered by the next supervisor)."""
    job = deaf.enqueue(seconds=120, swallow=True)
    supervisor = workers.start("-n", "1", "--grace-period", "0.5")
    wait_for(lambda: Execution.objects.filter(job_id=job.pk, label="deaf-start").exists(), 30)
    with tables_away():
        supervisor.send_signal(signal.SIGTERM)
        code = supervisor.wait(timeout=40)
    log = workers.log(supervisor)
    assert code == 0, log
    assert "Traceback" not in log, log
    assert "Could not recover jobs of" in log
    assert "Supervisor stopped" in log
    job.refresh_from_db()
    assert job.status == Status.RUNNING  # until its lease expires
    workers.start("-n", "1")
    wait_for(lambda: Job.objects.get(pk=job.pk).status != Status.RUNNING, timeout=30)
    assert "stopped renewing its lease" in Job.objects.get(pk=job.pk).history[0]["error"]


def test_a_hung_handler_costs_its_process_even_during_an_outage(workers):
    """The heartbeat's hard stop of a handler deaf to its timeout cannot record the timeout
    (the tables are away): the worker process ends all the same and is replaced, and the job
    is recovered once the database answers again."""
    job = deaf.using(max_attempts=1).enqueue(seconds=120, swallow=True)
    supervisor = workers.start("-n", "1", env={"SQLQUEUE_TEST_TIMEOUT": "1"})
    started = wait_for(
        lambda: Execution.objects.filter(job_id=job.pk, label="deaf-start").first(), 30
    )
    with tables_away():
        # The hard stop (timeout 1 s + its grace), its failed record, and the supervisor
        # seeing the worker end and failing to recover its job: all during the outage.
        wait_for(
            lambda: (
                "was replaced because a handler ignored its timeout" in workers.log(supervisor)
                and "Could not recover jobs of" in workers.log(supervisor)
            ),
            timeout=60,
        )
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.DEAD, timeout=30)
    log = workers.log(supervisor)
    assert "ignored its timeout" in log, log
    assert "could not record its timeout" in log, log
    wait_for(lambda: Worker.objects.exclude(pid=started.worker_pid).exists(), timeout=30)
    assert supervisor.poll() is None
