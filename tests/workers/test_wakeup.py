"""Idle workers: NOTIFY wakes them on PostgreSQL; SQLite takes writers and workers together
without a `database is locked` error."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import connection

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.probes import Line, Probes
from tests.testapp.jobs import noop
from tests.testapp.models import Execution

from .conftest import ROOT, wait_for

pytestmark = pytest.mark.workers


@pytest.mark.skipif(connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's")
def test_notify_wakes_an_idle_worker(workers, probes: Probes):
    # A 10 s poll interval: a worker that missed the notification would wake by its timeout.
    workers.start("-n", "1", env={"SQLQUEUE_TEST_POLL": "10"})
    worker = wait_for(lambda: Worker.objects.first(), timeout=30)
    since: int | Line = 0
    for _ in range(5):
        # The worker is idle, blocked on its LISTEN socket.
        probes.wait("worker-idle", after=since, pid=worker.pid, waiter="listen")
        enqueued = probes.mark()
        job = noop.enqueue()
        woke = probes.wait("worker-woke", after=enqueued, pid=worker.pid)
        assert woke["reason"] == "notify", woke
        wait_for(lambda job=job: Job.objects.get(pk=job.pk).status == Status.COMPLETED, 30)
        since = woke


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite write-lock contention")
def test_sqlite_four_workers_and_a_busy_enqueuer_see_no_lock_errors(workers, worker_env, tmp_path):
    seconds = 20
    script = tmp_path / "enqueuer.py"
    script.write_text(
        "import time, django\n"
        "django.setup()\n"
        "from django.db import transaction\n"
        "from tests.testapp.jobs import record\n"
        "from tests.testapp.models import Order\n"
        f"errors = 0; done = 0; end = time.monotonic() + {seconds}\n"
        "while time.monotonic() < end:\n"
        "    try:\n"
        "        with transaction.atomic():\n"
        "            Order.objects.create(reference='o')\n"
        "            record.enqueue(label='web')\n"
        "        done += 1\n"
        "    except Exception as exc:\n"
        "        errors += 1; print('ERROR', exc, flush=True)\n"
        "    time.sleep(0.002)\n"
        "print('DONE', done, 'ERRORS', errors, flush=True)\n"
    )
    supervisor = workers.start("-n", "4")
    enqueuer = subprocess.run(
        [sys.executable, str(script)],
        env=worker_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    assert enqueuer.returncode == 0, enqueuer.stderr
    assert "ERRORS 0" in enqueuer.stdout, enqueuer.stdout
    done = int(enqueuer.stdout.split("DONE ")[1].split()[0])
    assert done > 100
    wait_for(lambda: Execution.objects.count() == done, timeout=60)
    assert Job.objects.filter(status=Status.COMPLETED).count() == done
    log = workers.log(supervisor)
    assert "database is locked" not in log
    assert "database error" not in log
