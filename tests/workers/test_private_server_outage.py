"""The database server stops while a supervisor shuts down: a real fault on a private
PostgreSQL (benchmarks/cluster/pgserver.py: initdb in a temporary directory, run as the
`postgres` OS user, reached only through its own Unix socket), never the shared servers.

A long job runs; the server is stopped (`pg_ctl stop -m fast`, or `immediate`: no shutdown
checkpoint, connections dropped without goodbye); the supervisor gets SIGTERM. It must exit 0
without a traceback, leaving the job to its lease; once the server is back, a new supervisor
recovers the job and runs it to completion.

It needs root (PostgreSQL runs as another user) and PostgreSQL's server programs: elsewhere
it is skipped with the reason, but in CI (CI=true) a machine without them fails it. It runs
in the PostgreSQL run of the suite only (the same server programs serve every run).
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from . import private_postgres
from .conftest import WorkerProcesses, wait_for
from .private_postgres import IN_CI, django, why_not

pytestmark = [
    pytest.mark.workers,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the private server is PostgreSQL"
    ),
]

DB_NAME = "sqlqueue_outage"
JOB_SECONDS = 8


@pytest.fixture
def private_server() -> Iterator[Any]:
    reason = why_not()
    if reason:
        if IN_CI:
            pytest.fail(f"CI must run the private-server outage test, but it {reason}")
        pytest.skip(reason)
    from benchmarks.cluster.pgserver import PrivatePostgres

    # Not under pytest's tmp_path: the postgres user must be able to reach its directory.
    server = PrivatePostgres(Path(tempfile.mkdtemp(prefix="sqlqueue-pg-")), [], "127.0.0.1")
    try:
        server.init({"listen_addresses": "''", "fsync": "off"})  # its socket only
        server.start()
        with server.admin() as admin:
            admin.execute(f"CREATE DATABASE {DB_NAME}")
        yield server
    finally:
        server.cleanup()


def query(server: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(
        host=str(server.sockets),
        port=server.django_database(DB_NAME)["PORT"],
        user="postgres",
        dbname=DB_NAME,
        autocommit=True,
    ) as conn:
        return conn.execute(sql, params).fetchall()


def server_env(server: Any, **extra: str) -> dict[str, str]:
    """This process's environment, pointed at the private server's test database."""
    port = server.django_database(DB_NAME)["PORT"]
    return private_postgres.server_env(str(server.sockets), port, DB_NAME, **extra)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_server_stopped_during_shutdown(private_server, tmp_path, mode):
    server = private_server
    env = server_env(server)
    django(env, "migrate", "-v", "0")
    job_id = int(
        django(
            env,
            "shell",
            "-c",
            f"from tests.testapp.jobs import sleep; print(sleep.enqueue(seconds={JOB_SECONDS}).pk)",
        ).split()[-1]
    )
    workers = WorkerProcesses(env, tmp_path)
    try:
        supervisor = workers.start("-n", "1", "--grace-period", "1")
        wait_for(
            lambda: query(server, "SELECT 1 FROM testapp_execution WHERE label = 'sleep-start'"),
            timeout=60,
        )
        server.stop(mode)
        supervisor.send_signal(signal.SIGTERM)
        code = supervisor.wait(timeout=60)
        log = workers.log(supervisor)
        assert code == 0, log
        assert "Traceback" not in log, log
        assert "Supervisor stopped" in log, log
        # The outage was met: the worker could not hand its job back, nor the supervisor
        # recover it.
        assert "Could not recover jobs of" in log, log

        server.start()
        (status,) = query(server, "SELECT status FROM django_sqlqueue_job WHERE id = %s", job_id)
        assert status == ("running",), "the job stays running until its lease expires"
        workers.start("-n", "1")
        wait_for(
            lambda: query(
                server,
                "SELECT 1 FROM django_sqlqueue_job WHERE id = %s AND status = 'completed'",
                job_id,
            ),
            timeout=60,
            interval=0.5,
        )
        ((history,),) = query(
            server, "SELECT history FROM django_sqlqueue_job WHERE id = %s", job_id
        )
        assert [entry["outcome"] for entry in history] == ["lost", "completed"], history
    finally:
        workers.cleanup()


OUTAGE_SECONDS = 5


def stored_ticks(server: Any, key: str) -> list[str]:
    """The ticks a schedule's jobs were enqueued for, from their keys, in order."""
    rows = query(
        server,
        "SELECT idempotency_key FROM django_sqlqueue_job WHERE idempotency_key LIKE %s",
        f"schedule:{key}:%",
    )
    return sorted(row[0].removeprefix(f"schedule:{key}:") for row in rows)


def seconds_between(ticks: list[str]) -> list[float]:
    from datetime import datetime
    from itertools import pairwise

    moments = [datetime.strptime(tick, "%Y-%m-%dT%H:%M:%SZ") for tick in ticks]
    return [(b - a).total_seconds() for a, b in pairwise(moments)]


def test_the_ticks_an_outage_spans_follow_the_missed_policy(private_server, tmp_path):
    """schedules.md: a tick no supervisor could store because the database was down is a
    missed tick. With `missed="all"` each is stored once the server is back, in order, none
    twice; with `latest` only the latest, and the log says how many were left out."""
    import json

    server = private_server
    env = server_env(
        server,
        SQLQUEUE_TEST_SCHEDULES=json.dumps(
            {
                "every": {"job": "tests.noop", "cron": "* * * * * *", "missed": "all"},
                "latest": {"job": "tests.noop", "cron": "* * * * * *", "missed": "latest"},
            }
        ),
    )
    django(env, "migrate", "-v", "0")
    workers = WorkerProcesses(env, tmp_path)
    try:
        supervisor = workers.start("-n", "1")
        wait_for(lambda: len(stored_ticks(server, "latest")) >= 2, timeout=60, interval=0.2)
        server.stop("fast")
        time.sleep(OUTAGE_SECONDS)  # the outage itself: ticks pass while nothing can store them
        server.start()
        before = len(stored_ticks(server, "latest"))
        wait_for(
            lambda: len(stored_ticks(server, "latest")) >= before + 3, timeout=90, interval=0.5
        )
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0, workers.log(supervisor)
        log = workers.log(supervisor)
    finally:
        workers.cleanup()

    every = stored_ticks(server, "every")
    assert len(every) == len(set(every))
    assert set(seconds_between(every)) == {1.0}, f"a gap or a repeat in {every}"
    assert len(every) >= OUTAGE_SECONDS + 4, every
    latest = stored_ticks(server, "latest")
    assert len(latest) == len(set(latest))
    assert max(seconds_between(latest)) >= OUTAGE_SECONDS - 2, f"no gap in {latest}"
    assert "Schedule latest:" in log and "not enqueued (missed='latest')" in log, log
