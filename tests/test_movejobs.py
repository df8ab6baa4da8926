"""`manage.py movejobs`: a project leaving its SQLite queue for the test database (PostgreSQL,
MariaDB, or another SQLite file) keeps every waiting job, with its id, and runs each once.

The old project is a real one: its own processes, whose queue database is an SQLite file
(`sqlite_source`), enqueue the jobs and run workers there; the new project's processes know
that file under the same alias and move the jobs with the real command.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from django_sqlqueue.management.moving import reset_id_sequence
from django_sqlqueue.models import Job
from django_sqlqueue.states import Status
from tests.stopping import stop_group, with_stack_dumps
from tests.testapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent


def run(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run(env, "-m", "django", *args)


def python(env: dict[str, str], code: str) -> str:
    result = run(env, "-c", "import django\ndjango.setup()\n" + textwrap.dedent(code))
    assert result.returncode == 0, result.stderr
    return result.stdout


def source_statuses(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as database:
        rows = database.execute("SELECT status, count(*) FROM django_sqlqueue_job GROUP BY status")
        return dict(rows.fetchall())


@pytest.fixture
def projects(
    child_env: dict[str, str], tmp_path: Path
) -> tuple[dict[str, str], dict[str, str], Path]:
    """(old project's environment, new project's, the SQLite file of the old queue)."""
    path = tmp_path / "old-queue.sqlite3"
    new = {**child_env, "SQLQUEUE_TEST_SQLITE_SOURCE": str(path)}
    old = {**new, "SQLQUEUE_TEST_QUEUE_DATABASE": "sqlite_source"}
    migrated = manage(old, "migrate", "--database", "sqlite_source", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    return old, new, path


def test_waiting_jobs_move_with_their_ids_and_run_once(projects: Any, tmp_path: Path) -> None:
    old, new, path = projects
    # The old project's queue: 30 jobs, of which 3 failed (awaiting a retry), 2 completed and
    # 1 dead; one with an idempotency key; one due in an hour.
    python(
        old,
        """
        from datetime import timedelta
        from django.utils import timezone
        from django_sqlqueue.models import Job
        from tests.testapp.jobs import record

        jobs = record.enqueue_many([{"label": f"old-{n}"} for n in range(30)])
        record.using(idempotency_key="old-key").enqueue(label="keyed")
        record.using(delay=timedelta(hours=1)).enqueue(label="later")
        old = Job.objects.using("sqlite_source")
        ids = [job.pk for job in jobs]
        old.filter(pk__in=ids[:3]).update(status="failed", attempts=1, last_error="boom")
        done = timezone.now()
        old.filter(pk__in=ids[3:5]).update(status="completed", attempts=1, finished_at=done)
        old.filter(pk=ids[5]).update(status="dead", attempts=5, finished_at=done)
        """,
    )
    waiting = {Status.PENDING: 26, Status.FAILED: 3}

    # Workers still run on the old queue (idle, on a queue with no jobs): no move.
    log_path = tmp_path / "old-workers.log"
    log = log_path.open("wb")
    workers = subprocess.Popen(
        [sys.executable, "-m", "django", "runworkers", "--queues", "elsewhere"],
        env=with_stack_dumps(old),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while _workers_in(path) == 0:
            assert time.monotonic() < deadline, "the old project's worker never reported in"
            time.sleep(0.1)
        refused = manage(new, "movejobs", "--from", "sqlite_source")
        assert refused.returncode != 0
        assert "worker(s) reported in on 'sqlite_source'" in refused.stderr
    finally:
        stop_group(workers, log_path)
    assert Job.objects.count() == 0

    moved = manage(new, "movejobs", "--from", "sqlite_source")
    assert moved.returncode == 0, moved.stderr
    assert "Moved 29 jobs from 'sqlite_source' to 'default' (pending 26, failed 3), ids kept." in (
        moved.stdout
    )
    assert source_statuses(path) == {"completed": 2, "dead": 1}
    assert {status: Job.objects.filter(status=status).count() for status in waiting} == waiting
    failed = Job.objects.filter(status=Status.FAILED)
    assert all(job.attempts == 1 and job.last_error == "boom" for job in failed)
    keyed = Job.objects.get(idempotency_key="old-key")
    assert keyed.kwargs == {"label": "keyed"}
    later = Job.objects.get(kwargs__label="later")
    assert later.run_at > timezone.now() + timedelta(minutes=50)

    # The new project's workers run every job that is due, once.
    ran = manage(new, "runworkers", "-n", "2", "--burst")
    assert ran.returncode == 0, ran.stderr
    runs = list(Execution.objects.values_list("job_id", flat=True))
    assert len(runs) == len(set(runs)) == 28
    assert set(runs) == set(Job.objects.exclude(pk=later.pk).values_list("pk", flat=True))

    # Run again: nothing left to move.
    again = manage(new, "movejobs", "--from", "sqlite_source")
    assert "Moved 0 jobs" in again.stdout, again.stderr


def _workers_in(path: Path) -> int:
    try:
        with sqlite3.connect(path) as database:
            return int(
                database.execute("SELECT count(*) FROM django_sqlqueue_worker").fetchone()[0]
            )
    except sqlite3.OperationalError:
        return 0


def test_finished_jobs_resumed_moves_and_taken_ids(projects: Any) -> None:
    old, new, path = projects
    python(
        old,
        """
        from django.utils import timezone
        from django_sqlqueue.models import Job
        from tests.testapp.jobs import record

        record.enqueue(label="first")
        done = record.enqueue(label="done")
        Job.objects.using("sqlite_source").filter(pk=done.pk).update(
            status="completed", finished_at=timezone.now()
        )
        """,
    )
    first = manage(new, "movejobs", "--from", "sqlite_source")
    assert "Moved 1 job " in first.stdout, first.stderr
    assert source_statuses(path) == {"completed": 1}

    # Finished jobs move only when asked.
    finished = manage(new, "movejobs", "--from", "sqlite_source", "--include-finished")
    assert "Moved 1 job " in finished.stdout and "(completed 1)" in finished.stdout
    assert source_statuses(path) == {}
    assert Job.objects.filter(kwargs__label="done", status=Status.COMPLETED).exists()

    # A move interrupted after a batch was copied but before the source lost it: the copy is
    # recognised on the next run, not made twice.
    python(
        old,
        """
        from django_sqlqueue.models import Job

        Job.objects.using("sqlite_source").create(name="tests.record", kwargs={"label": "x"})
        """,
    )
    python(
        new,
        """
        from django_sqlqueue.models import Job
        from django_sqlqueue.management.moving import MoveReport, move_batch

        batch = list(Job.objects.using("sqlite_source").filter(kwargs__label="x"))
        move_batch(batch, "default", renumber=False, report=MoveReport())
        """,
    )
    resumed = manage(new, "movejobs", "--from", "sqlite_source")
    assert "1 jobs had been copied by an earlier run" in resumed.stdout, resumed.stderr
    assert Job.objects.filter(kwargs__label="x").count() == 1
    assert source_statuses(path) == {}

    # The new queue already holds a job under the id the old one gives its next job.
    out = python(old, "from tests.testapp.jobs import record\nprint(record.enqueue().pk)\n")
    newcomer = Job.objects.create(id=int(out), name="tests.record", kwargs={"label": "new"})
    reset_id_sequence("default")  # as if it had been enqueued (the sequence gave that id)
    refused = manage(new, "movejobs", "--from", "sqlite_source")
    assert refused.returncode != 0
    assert "--renumber" in refused.stderr
    renumbered = manage(new, "movejobs", "--from", "sqlite_source", "--renumber")
    assert "Moved 1 job " in renumbered.stdout and "new ids" in renumbered.stdout
    assert Job.objects.count() == 5
    assert Job.objects.get(pk=newcomer.pk).kwargs == {"label": "new"}
    assert source_statuses(path) == {}


def test_jobs_waiting_for_others_are_not_moved(projects: Any) -> None:
    """Workflows would be split between two databases: the move is refused, nothing moves."""
    old, new, path = projects
    python(
        old,
        """
        from tests.testapp.jobs import record

        first = record.enqueue(label="first")
        record.using(after=[first]).enqueue(label="then")
        """,
    )
    refused = manage(new, "movejobs", "--from", "sqlite_source")
    assert refused.returncode != 0
    assert "1 job(s) of 'sqlite_source' wait for other jobs" in refused.stderr
    assert source_statuses(path) == {"pending": 1, "waiting": 1}
    assert not Job.objects.exists()
