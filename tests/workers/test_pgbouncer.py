"""PostgreSQL through PgBouncer in transaction pooling mode (docs/databases.md#pgbouncer…): the
workers, producers and checks of a project whose queue database is pooled.

The suite starts its own PgBouncer (tests/pgbouncer.py) in front of the PostgreSQL it tests
on. In CI a PgBouncer that cannot be started fails these tests; elsewhere they are skipped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.pgbouncer import POOL_SIZE, PgBouncer, PgBouncerUnavailable
from tests.probes import Line, Probes
from tests.testapp.jobs import fail_once, record
from tests.testapp.models import Execution, Order

from .conftest import ROOT, WorkerProcesses, wait_for

pytestmark = [
    pytest.mark.workers,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PgBouncer is PostgreSQL's"),
]

IN_CI = os.environ.get("CI", "") in ("true", "1")

#: What a pooled server session must look like after the workers have used it: every setting
#: the queue changes for one transaction back to its default, no LISTEN, no prepared
#: statement, no advisory lock, no temporary table.
SESSION_PROBE = (
    "SELECT current_setting('synchronous_commit'), current_setting('enable_sort'), "
    "current_setting('enable_incremental_sort'), current_setting('jit'), "
    "(SELECT count(*) FROM pg_listening_channels()), "
    "(SELECT count(*) FROM pg_prepared_statements), "
    "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()), "
    "pg_my_temp_schema() <> 0"
)


@pytest.fixture(scope="module")
def pgbouncer() -> Iterator[PgBouncer]:
    server = settings.DATABASES["default"]
    bouncer = PgBouncer(str(server["HOST"]), str(server["PORT"]))
    try:
        bouncer.start()
    except PgBouncerUnavailable as exc:
        bouncer.cleanup()
        if IN_CI:
            pytest.fail(f"PgBouncer is required in CI: {exc}")
        pytest.skip(str(exc))
    yield bouncer
    bouncer.cleanup()


@pytest.fixture
def pooled(worker_env: dict[str, str], pgbouncer: PgBouncer) -> dict[str, str]:
    """Environment of a process whose queue database goes through PgBouncer."""
    return {"SQLQUEUE_TEST_PGBOUNCER_PORT": str(pgbouncer.port)}


def pooled_sessions(pgbouncer: PgBouncer) -> list[tuple[Any, ...]]:
    """SESSION_PROBE on every server connection of the test database's pool: as many clients
    as the pool has servers, each holding one in a transaction while it looks."""
    clients = [
        psycopg.connect(
            host="127.0.0.1",
            port=pgbouncer.port,
            user="postgres",
            dbname=str(connection.settings_dict["NAME"]),
        )
        for _ in range(POOL_SIZE)
    ]
    try:
        return [tuple(client.execute(SESSION_PROBE).fetchone() or ()) for client in clients]
    finally:
        for client in clients:
            client.close()


def direct_session() -> tuple[Any, ...]:
    with connection.cursor() as cursor:
        cursor.execute(SESSION_PROBE)
        return tuple(cursor.fetchone())


def django_check(env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "django", "check", "--database", "default"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_the_checks_see_the_pooler_and_what_it_needs(
    worker_env: dict[str, str], pooled: dict[str, str]
) -> None:
    careless = django_check(
        {
            **worker_env,
            **pooled,
            "SQLQUEUE_TEST_PREPARE_THRESHOLD": "5",
            "SQLQUEUE_TEST_SERVER_CURSORS": "1",
        }
    )
    for check in ("W020", "W021", "W022"):
        assert f"django_sqlqueue.{check}" in careless, careless

    ready = django_check({**worker_env, **pooled, "SQLQUEUE_TEST_LISTEN_DATABASE": "direct"})
    assert "no issues" in ready, ready

    direct = django_check({**worker_env, "SQLQUEUE_TEST_LISTEN_DATABASE": ""})
    assert "no issues" in direct, direct


def test_each_job_runs_once_and_leaves_no_session_state(
    workers: WorkerProcesses, pooled: dict[str, str], pgbouncer: PgBouncer
) -> None:
    jobs = record.enqueue_many([{"label": f"job-{n}"} for n in range(400)])
    flaky = [fail_once.enqueue() for _ in range(40)]  # each fails once, then succeeds

    # 400 + 2 * 40 attempts in all; --stop-after waits for the retries, --burst would not.
    log = workers.run(
        "-n",
        "3",
        "--stop-after",
        str(len(jobs) + 2 * len(flaky)),
        env={**pooled, "SQLQUEUE_TEST_LISTEN_DATABASE": "direct"},
        timeout=240,
    )

    assert Job.objects.exclude(status=Status.COMPLETED).count() == 0, log
    runs = Execution.objects.values_list("job_id", "attempt")
    per_job: dict[int, list[int]] = {}
    for job_id, attempt in runs:
        per_job.setdefault(job_id, []).append(attempt)
    assert all(per_job[job.pk] == [1] for job in jobs), "a job ran twice or not at all"
    assert all(sorted(per_job[job.pk]) == [1, 2] for job in flaky)
    assert "lease was lost" not in log
    assert "database error" not in log

    # Every server connection the workers shared looks as a new one would.
    sessions = pooled_sessions(pgbouncer)
    assert sessions == [direct_session()] * POOL_SIZE


def test_a_rolled_back_enqueue_leaves_nothing(
    spawn_django: Callable[..., subprocess.Popen[str]], pooled: dict[str, str]
) -> None:
    child = spawn_django(
        """
        from django.db import transaction
        from tests.testapp.jobs import record
        from tests.testapp.models import Order

        try:
            with transaction.atomic():
                Order.objects.create(reference="rolled back")
                record.enqueue(label="rolled back")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        # The same client goes on through the pool: its next enqueue commits.
        record.enqueue(label="after")
        print("DONE")
        """,
        env=pooled,
    )
    out, err = child.communicate(timeout=60)
    assert "DONE" in out, err

    assert not Order.objects.filter(reference="rolled back").exists()
    assert not Job.objects.filter(kwargs__label="rolled back").exists()
    assert Job.objects.filter(kwargs__label="after").count() == 1


def test_an_idempotent_enqueue_race_gives_one_job(
    spawn_django: Callable[..., subprocess.Popen[str]], pooled: dict[str, str]
) -> None:
    start = time.time() + 6  # every child imported Django and waits for the same moment
    children = [
        spawn_django(
            f"""
            import time
            from tests.testapp.jobs import noop

            while time.time() < {start}:
                time.sleep(0.001)
            job = noop.using(idempotency_key="race through the pool").enqueue()
            print("JOB", job.pk, job.deduplicated)
            """,
            env=pooled,
        )
        for _ in range(6)
    ]
    outcomes = []
    for child in children:
        out, err = child.communicate(timeout=90)
        assert "JOB" in out, err
        _, pk, deduplicated = out.split()[-3:]
        outcomes.append((int(pk), deduplicated == "True"))

    [job] = Job.objects.filter(idempotency_key="race through the pool")
    assert {pk for pk, _ in outcomes} == {job.pk}
    assert sorted(deduplicated for _, deduplicated in outcomes) == [False] + [True] * 5


def wake_ups(
    workers: WorkerProcesses,
    spawn_django: Callable[..., subprocess.Popen[str]],
    probes: Probes,
    tmp_path: Path,
    worker_env: dict[str, str],
    enqueue_env: dict[str, str],
    count: int = 5,
) -> tuple[int, list[Line]]:
    """Enqueue `count` jobs one at a time to one idle worker, from a process with
    `enqueue_env`, each once the worker waits again: the worker's pid, and why it woke after
    each enqueue (its worker-woke probe)."""
    supervisor = workers.start("-n", "1", env=worker_env)
    worker = wait_for(lambda: Worker.objects.first(), timeout=30)
    turns = tmp_path / f"enqueuer-{supervisor.pid}"
    turns.mkdir()
    # One job each time the test writes a file `go-N`.
    enqueuer = spawn_django(
        f"""
        import time
        from pathlib import Path
        from tests.testapp.jobs import noop

        turns = Path({str(turns)!r})
        for n in range({count}):
            deadline = time.monotonic() + 60
            while not (turns / f"go-{{n}}").exists():
                assert time.monotonic() < deadline, "never told to enqueue"
                time.sleep(0.005)
            noop.enqueue()
        print("DONE")
        """,
        env=enqueue_env,
    )
    wakes = []
    since: int | Line = 0
    for n in range(count):
        probes.wait("worker-idle", after=since, pid=worker.pid)  # the worker waits
        enqueued = probes.mark()
        (turns / f"go-{n}").touch()
        woke = probes.wait("worker-woke", after=enqueued, pid=worker.pid)
        wait_for(lambda n=n: Job.objects.filter(status=Status.COMPLETED).count() == n + 1, 30)
        wakes.append(woke)
        since = woke
    out, err = enqueuer.communicate(timeout=60)
    assert "DONE" in out, err
    os.killpg(supervisor.pid, signal.SIGTERM)
    supervisor.wait(timeout=30)
    Job.objects.all().delete()
    Worker.objects.all().delete()
    return worker.pid, wakes


def test_wake_up_through_pgbouncer_is_by_notification_as_direct(
    workers: WorkerProcesses,
    spawn_django: Callable[..., subprocess.Popen[str]],
    pooled: dict[str, str],
    probes: Probes,
    tmp_path: Path,
) -> None:
    # A 10 s poll interval: a worker that missed a notification would sleep on.
    slow_poll = {"SQLQUEUE_TEST_POLL": "10"}
    direct = wake_ups(workers, spawn_django, probes, tmp_path, slow_poll, {})
    through_pool = wake_ups(
        workers,
        spawn_django,
        probes,
        tmp_path,
        {**slow_poll, **pooled, "SQLQUEUE_TEST_LISTEN_DATABASE": "direct"},
        pooled,
    )
    # Without LISTEN_DATABASE: adaptive polling, never longer than POLL_INTERVAL (1 s here).
    polling = wake_ups(
        workers, spawn_django, probes, tmp_path, {**pooled, "SQLQUEUE_TEST_POLL": "1"}, pooled
    )

    # Idle on its LISTEN socket, woken by each job's notification: through PgBouncer (with
    # LISTEN_DATABASE) as directly.
    for name, (pid, wakes) in {"direct": direct, "pgbouncer + LISTEN": through_pool}.items():
        assert {idle["waiter"] for idle in probes.find("worker-idle", pid=pid)} == {"listen"}
        assert [woke["reason"] for woke in wakes] == ["notify"] * len(wakes), (name, wakes)
    # Behind the pooler without LISTEN_DATABASE it polls, never longer than POLL_INTERVAL.
    pid, wakes = polling
    waits = probes.find("worker-idle", pid=pid)
    assert {idle["waiter"] for idle in waits} == {"poll"}, waits[-5:]
    assert max(idle["seconds"] for idle in waits) <= 1.0, waits[-5:]
    assert {woke["reason"] for woke in wakes} == {"timeout"}, wakes
