"""`@task` functions run by real `runworkers --burst` processes against the test database.

Worker processes send task_started/task_finished; tests.tasksapp.recorders writes each to
the Execution table, which is how these tests count them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from tests.tasksapp.tasks_settings import TASKS

if not TASKS:
    pytest.skip(
        "No Tasks framework installed: Django 5.2 needs the backport (django-tasks).",
        allow_module_level=True,
    )

from django_sqlqueue import operations
from django_sqlqueue.models import Job
from django_sqlqueue.references import id_in
from django_sqlqueue.tasks.compat import TaskResultStatus, task_enqueued
from tests.tasksapp import tasks
from tests.tasksapp.recorders import SIGNAL_PREFIX
from tests.testapp.jobs import add as add_job
from tests.testapp.models import Execution

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]

REPO_ROOT = Path(__file__).resolve().parent.parent

RunWorkers = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture(autouse=True)
def tasks_configured() -> None:
    assert settings.TASKS == TASKS, (
        "tests/settings.py must import TASKS from tests.tasksapp.tasks_settings"
    )


@pytest.fixture
def run_workers(child_env: dict[str, str]) -> RunWorkers:
    """`manage.py runworkers --burst [options]` in a child process; fails the test unless it
    exits 0 within `timeout` seconds."""

    def run(*options: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**child_env, "DJANGO_SETTINGS_MODULE": "tests.settings"}
        done = subprocess.run(
            [sys.executable, "-m", "django", "runworkers", "--burst", *options],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"runworkers exited {done.returncode}:\n{done.stderr}"
        return done

    return run


def labels(result: Any) -> list[str]:
    """What the task itself recorded, in order (signals left out)."""
    rows = Execution.objects.filter(job_id=id_in(result.id)).order_by("id")
    return [row.label for row in rows if not row.label.startswith(SIGNAL_PREFIX)]


def signals_of(result: Any) -> list[tuple[str, int]]:
    """(signal:status, attempt) the workers sent for the task, in order."""
    rows = Execution.objects.filter(job_id=id_in(result.id), label__startswith=SIGNAL_PREFIX)
    return [(row.label.removeprefix(SIGNAL_PREFIX), row.attempt) for row in rows.order_by("id")]


def test_enqueue_run_and_read_the_result(run_workers: RunWorkers, alias: str) -> None:
    enqueued: list[Any] = []

    def on_enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
        enqueued.append(task_result.id)

    task_enqueued.connect(on_enqueued)
    try:
        result = tasks.add.enqueue(2, 3)
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert result.status == TaskResultStatus.READY

    run_workers()

    done = tasks.add.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 5
    assert done.errors == []
    assert len(done.worker_ids) == done.attempts == 1
    assert done.enqueued_at == result.enqueued_at
    assert done.enqueued_at <= done.started_at <= done.finished_at
    assert done.last_attempted_at == done.started_at
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert Job.objects.get(pk=id_in(result.id)).status == Job.Status.COMPLETED
    # Each signal once: task_enqueued here, the other two in the worker process.
    assert enqueued == [result.id]
    assert signals_of(result) == [("task_started:RUNNING", 1), ("task_finished:SUCCESSFUL", 1)]


def test_failing_task_is_retried_then_failed(run_workers: RunWorkers) -> None:
    result = tasks.always_fails.enqueue()  # max_attempts=3; the backend's OPTIONS: no backoff

    run_workers()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == len(result.worker_ids) == 3
    assert [error.exception_class for error in result.errors] == [tasks.TaskBroke] * 3
    for attempt, error in enumerate(result.errors, start=1):
        assert f"TaskBroke: boom on attempt {attempt}" in error.traceback
        assert "Traceback (most recent call last)" in error.traceback
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018
    assert Job.objects.get(pk=id_in(result.id)).status == Job.Status.DEAD
    # takes_context: the context saw the real attempt number each time.
    assert list(
        Execution.objects.filter(job_id=id_in(result.id), label="always_fails")
        .order_by("id")
        .values_list("attempt", flat=True)
    ) == [1, 2, 3]
    assert signals_of(result) == [
        ("task_started:RUNNING", 1),
        ("task_finished:READY", 1),
        ("task_started:RUNNING", 2),
        ("task_finished:READY", 2),
        ("task_started:RUNNING", 3),
        ("task_finished:FAILED", 3),
    ]


def test_backend_options_set_max_attempts(run_workers: RunWorkers) -> None:
    result = tasks.plain_failure.using(backend="strict").enqueue()  # OPTIONS MAX_ATTEMPTS 2

    run_workers()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert [error.exception_class_path for error in result.errors] == ["builtins.ValueError"] * 2


def test_context_after_a_retry(run_workers: RunWorkers) -> None:
    result = tasks.fail_once.enqueue()

    run_workers()

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    seen = result.return_value
    assert {k: seen[k] for k in ("attempt", "id", "workers", "errors")} == {
        "attempt": 2,
        "id": result.id,
        "workers": 2,
        "errors": 1,
    }
    assert [error.exception_class for error in result.errors] == [tasks.TaskBroke]
    # The running attempt's start, as the task saw it, is the one its result keeps.
    assert datetime.fromisoformat(seen["started_at"]) == result.started_at
    assert datetime.fromisoformat(seen["last_attempted_at"]) == result.last_attempted_at
    assert result.started_at < result.last_attempted_at


def test_run_after_is_respected(run_workers: RunWorkers) -> None:
    now = timezone.now()
    later = tasks.add.using(run_after=now + timedelta(hours=1)).enqueue(1, 1)
    due = tasks.add.using(run_after=now - timedelta(seconds=1)).enqueue(1, 2)

    run_workers()

    due.refresh()
    later.refresh()
    assert (due.status, due.return_value) == (TaskResultStatus.SUCCESSFUL, 3)
    assert later.status == TaskResultStatus.READY
    assert (later.started_at, later.worker_ids) == (None, [])

    operations.run_now_many([id_in(later.id)])
    run_workers()

    later.refresh()
    assert (later.status, later.return_value) == (TaskResultStatus.SUCCESSFUL, 2)


def test_higher_priority_runs_first(run_workers: RunWorkers) -> None:
    priorities = [0, -100, 100, 50, -5]
    results = [tasks.record.using(priority=p).enqueue(f"p{p}") for p in priorities]

    run_workers("-n", "1")

    ran = Execution.objects.filter(label__startswith="p").order_by("id")
    assert [row.label for row in ran] == ["p100", "p50", "p0", "p-5", "p-100"]
    assert {tasks.record.get_result(r.id).status for r in results} == {TaskResultStatus.SUCCESSFUL}


def test_async_task(run_workers: RunWorkers) -> None:
    result = tasks.double.enqueue(21)

    run_workers()

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"value": 42, "attempt": 1}
    assert labels(result) == ["double"]  # its ORM call, through sync_to_async, was committed


def test_queue_name_is_the_job_queue(run_workers: RunWorkers) -> None:
    result = tasks.report.enqueue("monthly")

    run_workers("--queues", "default")
    result.refresh()
    assert result.status == TaskResultStatus.READY

    run_workers("--queues", "reports")
    result.refresh()
    assert result.return_value == {"name": "monthly", "queue": "reports"}


def test_tasks_and_jobs_run_side_by_side(run_workers: RunWorkers) -> None:
    job = add_job.enqueue(1, 2)
    result = tasks.add.enqueue(3, 4)

    run_workers()

    job.refresh()
    result.refresh()
    assert (job.status, job.result) == (Job.Status.COMPLETED, 3)
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 7)


@pytest.mark.slow
def test_timeout_fails_the_attempt(run_workers: RunWorkers) -> None:
    result = tasks.too_slow.enqueue()  # timeout=timedelta(seconds=1), max_attempts=1

    run_workers()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class_path == "django_sqlqueue.exceptions.JobTimeout"
    assert labels(result) == ["too_slow"]


def test_a_worker_dying_mid_task_fails_the_attempt(run_workers: RunWorkers) -> None:
    result = tasks.dies.enqueue()  # max_attempts=1

    run_workers()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class_path == "django_sqlqueue.exceptions.WorkerLost"
    assert "was lost" in error.traceback
    assert labels(result) == ["dies"]
    assert signals_of(result) == [("task_started:RUNNING", 1)]  # it never finished


def test_return_values_must_be_json(run_workers: RunWorkers) -> None:
    a_set = tasks.returns_a_set.enqueue()
    a_tuple = tasks.returns_a_tuple.enqueue()

    run_workers()

    a_set.refresh()
    a_tuple.refresh()
    assert (a_tuple.status, a_tuple.return_value) == (TaskResultStatus.SUCCESSFUL, [1, 2])
    assert a_set.status == TaskResultStatus.FAILED
    assert len(a_set.errors) == 1  # not retried: the same code would return the same value
    assert a_set.errors[0].exception_class_path == "builtins.TypeError"
    traceback = a_set.errors[0].traceback
    assert traceback.startswith("Traceback (most recent call last):")
    assert traceback.rstrip().splitlines()[-1].startswith("TypeError: The handler's return value")


def test_jobs_a_worker_cannot_run_say_why(run_workers: RunWorkers) -> None:
    gone = Job.objects.create(name="tests.tasksapp.tasks.gone", backend="default")
    no_module = Job.objects.create(name="tests.tasksapp.no_such_module.task", backend="default")
    not_a_task = Job.objects.create(name="tests.tasksapp.tasks.undecorated", backend="default")
    no_backend = Job.objects.create(name="tests.tasksapp.tasks.add", backend="removed")

    run_workers()

    for job in (gone, no_module, not_a_task, no_backend):
        job.refresh_from_db()
        assert job.status == Job.Status.DEAD
        assert job.attempts == 1  # dead at once: retrying would not help
        [attempt] = job.history
        assert attempt["outcome"] == "unknown"
        assert attempt["traceback"].startswith("Traceback (most recent call last):")
    assert "'tests.tasksapp.tasks.gone' cannot be imported" in gone.last_error
    assert "is a function, not a Task" in not_a_task.last_error
    assert "TASKS['removed']" in no_backend.last_error
    # Recorded as the exception loading the task raised, as any other failure would be.
    assert gone.history[0]["exception"] == "builtins.ImportError"
    assert no_module.history[0]["exception"] == "builtins.ModuleNotFoundError"
    assert (
        no_module.history[0]["traceback"]
        .rstrip()
        .endswith("ModuleNotFoundError: No module named 'tests.tasksapp.no_such_module'")
    )
    assert not_a_task.history[0]["exception"] == "builtins.ImportError"
    # InvalidTaskBackend in django.tasks, InvalidTaskBackendError in the backport.
    assert ".InvalidTaskBackend" in no_backend.history[0]["exception"]
