"""`manage.py jobhealth`: its exit status and line in each state of the queue."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connections
from django.utils import timezone

from django_sqlqueue.management.commands import jobhealth
from django_sqlqueue.models import Job, Worker

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("jobhealth", *args, stdout=out, stderr=err)
    except SystemExit as exit:
        return int(exit.code or 0), err.getvalue().strip()
    return 0, out.getvalue().strip()


def live_worker(queues: str = "", **fields) -> Worker:
    return Worker.objects.create(id=f"h:{queues}:w", hostname="h", pid=1, queues=queues, **fields)


def test_no_worker():
    assert run() == (jobhealth.NO_WORKER, "unhealthy: no live worker heartbeat")


def test_stale_worker_is_no_worker():
    live_worker(last_seen_at=timezone.now() - timedelta(minutes=10))
    assert run()[0] == jobhealth.NO_WORKER


def test_healthy():
    live_worker()
    code, line = run()
    assert code == 0
    assert line == "healthy: 1 live worker(s), no backlog"


def test_backlog_too_old():
    live_worker()
    Job.objects.create(
        name="tests.noop", queue="mail", run_at=timezone.now() - timedelta(minutes=5)
    )
    assert run("--max-pending-age", "600")[0] == 0
    code, line = run("--max-pending-age", "60")
    assert code == jobhealth.BACKLOG_TOO_OLD
    assert line.startswith("unhealthy: a due job in queue 'mail' has waited 30")
    # A job scheduled for later, or a failed one waiting for its retry, is not late.
    Job.objects.all().delete()
    Job.objects.create(name="tests.noop", run_at=timezone.now() + timedelta(hours=1))
    Job.objects.create(
        name="tests.noop", status="failed", run_at=timezone.now() + timedelta(minutes=1)
    )
    assert run("--max-pending-age", "1")[0] == 0
    # A retry that is due and not taken is late like a pending job.
    Job.objects.create(
        name="tests.noop", status="failed", run_at=timezone.now() - timedelta(minutes=3)
    )
    assert run("--max-pending-age", "60")[0] == jobhealth.BACKLOG_TOO_OLD


def test_queue_narrows_workers_and_backlog():
    live_worker(queues="mail")
    Job.objects.create(name="tests.noop", queue="mail", run_at=timezone.now() - timedelta(hours=1))
    assert run("--queue", "reports") == (
        jobhealth.NO_WORKER,
        "unhealthy: no live worker heartbeat for queue 'reports'",
    )
    assert run("--queue", "mail", "--max-pending-age", "60")[0] == jobhealth.BACKLOG_TOO_OLD
    live_worker(queues="")  # takes every queue
    Job.objects.all().delete()
    assert run("--queue", "reports", "--max-pending-age", "60")[0] == 0


@pytest.fixture
def unreachable_database():
    """The queue database's connection pointed at a server or file that is not there."""
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent/sqlqueue/db.sqlite3"
    else:
        connection.settings_dict["HOST"] = "127.0.0.1"
        connection.settings_dict["PORT"] = "1"
    yield
    connection.close()
    connection.settings_dict.clear()
    connection.settings_dict.update(saved)


@pytest.mark.django_db(transaction=True)
def test_database_down(unreachable_database):
    code, line = run()
    assert code == jobhealth.DATABASE_DOWN
    assert line.startswith("unhealthy: database 'default' does not answer: ")
    assert "\n" not in line
