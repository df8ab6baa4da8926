"""Workers whose database connections are cut log it, reconnect and carry on: nothing is
lost and nothing stays running."""

from __future__ import annotations

import contextlib
import time

import pytest
from django.db import DatabaseError, connection

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status
from tests.testapp.jobs import record
from tests.testapp.models import Execution

from .conftest import wait_for

pytestmark = [
    pytest.mark.workers,
    pytest.mark.skipif(connection.vendor == "sqlite", reason="SQLite has no connections to cut"),
]


def cut_other_connections() -> int:
    """Terminate every other session on the test database, as a server restart would."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return len(cursor.fetchall())
        cursor.execute(
            "SELECT id FROM information_schema.processlist "
            "WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        )
        ids = [row[0] for row in cursor.fetchall()]
        for session in ids:
            # It may have ended on its own meanwhile.
            with contextlib.suppress(DatabaseError):
                cursor.execute(f"KILL {int(session)}")
        return len(ids)


def test_workers_survive_their_connections_being_cut(workers):
    total = 400
    record.enqueue_many([{"label": str(i), "sleep": 0.01} for i in range(total)])
    supervisor = workers.start("-n", "2")

    cuts = 0
    for threshold in (50, 150, 250):
        wait_for(lambda t=threshold: Execution.objects.count() >= t, timeout=60)
        cuts += cut_other_connections()
        time.sleep(0.2)
    assert cuts >= 3

    # Rows whose claim reply was lost with a connection come back once their lease expires.
    try:
        wait_for(lambda: Job.objects.filter(status=Status.COMPLETED).count() == total, timeout=120)
    except AssertionError:
        left = Job.objects.exclude(status=Status.COMPLETED)
        rows = list(left.values("id", "status", "lease_owner", "lease_expires_at", "run_at"))
        raise AssertionError(
            f"{len(rows)} of {total} jobs not completed: {rows[:20]}\n"
            f"supervisor exit: {supervisor.poll()}\n{workers.log(supervisor)[-6000:]}"
        ) from None
    assert supervisor.poll() is None
    assert not Job.objects.exclude(status=Status.COMPLETED).exists()
    assert Execution.objects.values("job_id").distinct().count() == total
    log = workers.log(supervisor)
    assert "database error" in log or "heartbeat failed" in log
