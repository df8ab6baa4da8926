"""Fixtures shared by the whole suite.

Every fixture here works on all three databases; tests that need one vendor skip themselves
with the `vendor` fixture. Test jobs live in tests/testapp/jobs.py (auto-discovered).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from django_sqlqueue.conf import get_settings
from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.claiming import Claimer
from django_sqlqueue.registry import JobHandler, job, registry
from django_sqlqueue.rows import ClaimedJob

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def alias() -> str:
    """The database alias the queue lives on (SQLQUEUE['DATABASE'])."""
    return get_settings().database


@pytest.fixture
def vendor(alias: str) -> str:
    """`sqlite`, `postgresql` or `mysql`: for tests that only make sense on one of them."""
    return connections[alias].vendor


@pytest.fixture
def make_job(db: None, alias: str) -> Callable[..., Any]:
    """Insert a Job row in any state directly, to set up a scenario in one line.

    `make_job(status="dead", finished_at=...)`: unspecified fields take the model defaults,
    the name defaults to the registered no-op job.
    """
    from django_sqlqueue.models import Job

    def make(**fields: Any) -> Job:
        fields.setdefault("name", "tests.noop")
        return Job.objects.using(alias).create(**fields)

    return make


@pytest.fixture
def claimer(db: None, alias: str) -> Claimer:
    """The vendor's claimer for the queue database."""
    return queue_database(alias).claimer()


@pytest.fixture
def claim(claimer: Claimer) -> Callable[..., list[ClaimedJob]]:
    """`claim(worker_id, queues=None, limit=1, lease_seconds=60, now=None)` → claimed jobs."""

    def do_claim(
        worker_id: str = "worker-1",
        queues: Sequence[str] | None = None,
        limit: int = 1,
        lease_seconds: float = 60,
        now: datetime | None = None,
    ) -> list[ClaimedJob]:
        return claimer.claim(worker_id, queues, limit, lease_seconds, now or timezone.now())

    return do_claim


@pytest.fixture
def register_job() -> Iterator[Callable[..., JobHandler[Any, Any]]]:
    """Register a handler for one test only: `register_job("name", func, queue="q")`.

    Without `func` a function returning its keyword arguments is used. Every name registered
    through this fixture is removed from the registry when the test ends.
    """
    names: list[str] = []

    def register(
        name: str, func: Callable[..., Any] | None = None, **options: Any
    ) -> JobHandler[Any, Any]:
        if func is None:

            def func(*args: Any, **kwargs: Any) -> Any:
                return {"args": list(args), "kwargs": kwargs}

        handler = job(name, **options)(func)
        names.append(name)
        return handler

    yield register
    for name in names:
        registry.unregister(name)


@pytest.fixture
def child_env(alias: str) -> dict[str, str]:
    """Environment for a child process that must use the test database pytest created.

    Only meaningful in `django_db(transaction=True)` tests: otherwise the rows of the test
    are uncommitted and invisible to the child.
    """
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["SQLQUEUE_TEST_DB_NAME"] = str(connections[alias].settings_dict["NAME"])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.fixture
def spawn_django(child_env: dict[str, str]) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start `python -c <code>` with Django set up on the test database; returns the Popen.

    The code runs after `django.setup()`; its stdout and stderr are pipes (text). Children
    still running when the test ends are killed, so a failing test leaves no process behind.
    """
    children: list[subprocess.Popen[str]] = []

    def spawn(code: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        prelude = "import django\ndjango.setup()\n"
        child = subprocess.Popen(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            cwd=REPO_ROOT,
            env={**child_env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        children.append(child)
        return child

    yield spawn
    for child in children:
        if child.poll() is None:
            child.kill()
        child.communicate()


@pytest.fixture
def in_other_thread() -> Callable[..., Any]:
    """Run `func()` in a new thread, which has its own database connection, and return its value.

    Shows what another connection (a worker, another request) sees at this moment. The
    thread's connection is closed before returning, so database teardown is not blocked.
    """

    def run(func: Callable[[], Any], timeout: float = 30) -> Any:
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = func()
            except BaseException as exc:  # re-raised in the calling thread
                outcome["error"] = exc
            finally:
                connections.close_all()

        thread = threading.Thread(target=target)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"{func!r} did not return within {timeout}s")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    return run


@pytest.fixture
def rewind_job_ids(alias: str) -> Callable[[int], None]:
    """`rewind_job_ids(n)`: the next job stored gets id `n`, as after a PostgreSQL failover
    that lost the sequence's progress with the newest commits (asynchronous replication).
    Needs a transactional test (MySQL's ALTER TABLE commits)."""
    from django_sqlqueue.models import Job

    def rewind(next_id: int) -> None:
        connection = connections[alias]
        table = connection.ops.quote_name(Job._meta.db_table)
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(
                    "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s, false)",
                    [Job._meta.db_table, next_id],
                )
            elif connection.vendor == "mysql":
                cursor.execute(f"ALTER TABLE {table} AUTO_INCREMENT = {int(next_id)}")
            else:
                cursor.execute(
                    "UPDATE sqlite_sequence SET seq = %s WHERE name = %s",
                    [next_id - 1, Job._meta.db_table],
                )

    return rewind
