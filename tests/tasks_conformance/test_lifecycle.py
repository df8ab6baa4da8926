"""A task's life through real `runworkers` processes: READY, RUNNING, then SUCCESSFUL or
FAILED, and what the TaskResult, TaskError and TaskContext say at each step."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from tests.testapp.models import Execution

from . import fragile_tasks, tasks
from .conftest import BREAK_IMPORT, RunWorkers, compat

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]

Status = compat.TaskResultStatus if compat else None


def when(text: str | None) -> datetime | None:
    return parse_datetime(text) if text else None


def wait_until(predicate: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {predicate}")
        time.sleep(0.05)
    return value


def assert_finished_once(result: Any) -> None:
    """What every result of a task that ran one attempt shows, whatever the outcome."""
    assert result.is_finished is True
    assert result.attempts == len(result.worker_ids) == 1
    assert isinstance(result.worker_ids[0], str) and result.worker_ids[0]
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at


class TestSuccess:
    def test_a_task_runs_once_and_its_result_says_so(
        self, run_workers: RunWorkers, backend: Any
    ) -> None:
        added = tasks.add.enqueue(2, 3)
        echoed = tasks.echo.enqueue(1, [2], k={"v": None})
        nothing = tasks.returns_none.enqueue()
        enqueued_at = added.enqueued_at

        run_workers()

        for result in (added, echoed, nothing):
            result.refresh()
            assert result.status == Status.SUCCESSFUL
            assert result.errors == []
            assert_finished_once(result)
            assert result == backend.get_result(result.id)
        assert added.return_value == 5
        assert added.enqueued_at == enqueued_at
        assert echoed.return_value == {"args": [1, [2]], "kwargs": {"k": {"v": None}}}
        assert (echoed.args, echoed.kwargs) == ([1, [2]], {"k": {"v": None}})
        assert nothing.return_value is None  # None, not "no value yet"

    def test_a_task_is_running_while_it_runs(
        self,
        start_workers: Callable[..., subprocess.Popen[str]],
        backend: Any,
        tmp_path: Path,
    ) -> None:
        release = tmp_path / "release"
        result = tasks.wait_for_file.enqueue(str(release))
        workers = start_workers("--burst")

        wait_until(lambda: Path(f"{release}.started").exists())
        running = backend.get_result(result.id)
        assert running.status == Status.RUNNING
        assert running.is_finished is False
        assert running.started_at is not None
        assert running.last_attempted_at == running.started_at
        assert running.finished_at is None
        assert running.attempts == len(running.worker_ids) == 1
        assert running.errors == []
        with pytest.raises(ValueError):
            running.return_value  # noqa: B018

        release.touch()
        output, _ = workers.communicate(timeout=60)
        assert workers.returncode == 0, output
        result.refresh()
        assert result.status == Status.SUCCESSFUL
        assert result.return_value == {"attempt": 1}
        assert result.started_at == running.started_at
        assert result.worker_ids == running.worker_ids


class TestFailure:
    def test_an_exception_fails_the_task_with_a_task_error(self, run_workers: RunWorkers) -> None:
        result = tasks.fails.enqueue("boom")  # one attempt

        run_workers()

        result.refresh()
        assert result.status == Status.FAILED
        assert_finished_once(result)
        with pytest.raises(ValueError):
            result.return_value  # noqa: B018
        [error] = result.errors
        assert isinstance(error, compat.TaskError)
        assert error.exception_class_path == "tests.tasks_conformance.tasks.ConformanceError"
        assert error.exception_class is tasks.ConformanceError
        assert error.traceback.startswith("Traceback (most recent call last)")
        assert "ConformanceError: boom (attempt 1)" in error.traceback
        assert "in fails" in error.traceback  # the frame that raised

    def test_a_return_value_that_cannot_be_stored_fails_the_task(
        self, run_workers: RunWorkers
    ) -> None:
        result = tasks.returns_unstorable.enqueue()

        run_workers()

        result.refresh()
        assert result.status == Status.FAILED
        assert_finished_once(result)
        [error] = result.errors
        assert error.exception_class_path == "builtins.TypeError"
        assert error.exception_class is TypeError

    def test_that_error_has_the_serialisers_traceback(self, run_workers: RunWorkers) -> None:
        result = tasks.returns_unstorable.enqueue()

        run_workers()

        result.refresh()
        [error] = result.errors
        assert error.traceback.startswith("Traceback (most recent call last)")
        assert error.traceback.rstrip().splitlines()[-1].startswith("TypeError")

    def test_a_module_the_worker_cannot_import_fails_with_the_import_error(
        self, run_workers: RunWorkers
    ) -> None:
        result = fragile_tasks.needs_a_dependency.enqueue()

        run_workers(env={BREAK_IMPORT: "1"})

        result.refresh()
        assert result.status == Status.FAILED
        [error] = result.errors
        assert error.exception_class_path in (
            "builtins.ModuleNotFoundError",
            "builtins.ImportError",
        )
        assert "conformance_dependency_not_installed" in error.traceback


class TestAttemptsAndContext:
    def test_the_context_describes_the_running_task(self, run_workers: RunWorkers) -> None:
        result = tasks.inspect_context.enqueue(7, word="seven")

        run_workers()

        result.refresh()
        seen = result.return_value
        assert seen["attempt"] == 1
        inside = seen["result"]
        assert inside["id"] == result.id
        assert inside["status"] == Status.RUNNING
        assert inside["is_finished"] is False
        assert inside["attempts"] == 1
        assert inside["worker_ids"] == result.worker_ids
        assert (inside["args"], inside["kwargs"]) == ([7], {"word": "seven"})
        assert inside["task"] == tasks.inspect_context.module_path
        assert when(inside["enqueued_at"]) == result.enqueued_at
        assert inside["started_at"] is not None
        assert inside["last_attempted_at"] is not None
        assert inside["finished_at"] is None

    def test_a_retried_task_counts_its_attempts(self, run_workers: RunWorkers) -> None:
        result = tasks.fails_first_attempt.enqueue()  # the backend retries without delay

        run_workers()

        result.refresh()
        assert result.status == Status.SUCCESSFUL
        seen = result.return_value
        assert seen["attempt"] == 2
        assert seen["result"]["attempts"] == 2
        assert seen["result"]["errors"] == ["tests.tasks_conformance.tasks.ConformanceError"]
        assert result.attempts == len(result.worker_ids) == 2
        [error] = result.errors
        assert "the first attempt fails" in error.traceback
        # started_at: when the first attempt started; last_attempted_at: the second.
        assert result.started_at < result.last_attempted_at <= result.finished_at
        assert when(seen["result"]["started_at"]) < when(seen["result"]["last_attempted_at"])

    def test_the_context_and_the_stored_result_agree_on_the_attempts_start(
        self, run_workers: RunWorkers
    ) -> None:
        once = tasks.inspect_context.enqueue()
        twice = tasks.fails_first_attempt.enqueue()

        run_workers()

        for result in (once, twice):
            result.refresh()
            inside = result.return_value["result"]
            assert when(inside["started_at"]) == result.started_at
            assert when(inside["last_attempted_at"]) == result.last_attempted_at

    def test_an_async_task_runs_in_the_worker(self, run_workers: RunWorkers) -> None:
        Execution.objects.create(job_id=0, attempt=1, worker_pid=0, label="async")
        result = tasks.async_double.enqueue(21)

        run_workers()

        result.refresh()
        assert result.status == Status.SUCCESSFUL
        assert result.return_value == {"value": 42, "attempt": 1, "orm": 1}


class TestScheduling:
    def test_run_after_holds_a_task_back_until_then(self, run_workers: RunWorkers) -> None:
        now = timezone.now()
        later = tasks.add.using(run_after=now + timedelta(hours=1)).enqueue(1, 1)
        due = tasks.add.using(run_after=now - timedelta(seconds=1)).enqueue(1, 2)

        run_workers()

        due.refresh()
        later.refresh()
        assert (due.status, due.return_value) == (Status.SUCCESSFUL, 3)
        assert later.status == Status.READY
        assert (later.started_at, later.worker_ids) == (None, [])
        assert later.task.run_after == now + timedelta(hours=1)

    def test_higher_priority_runs_first(self, run_workers: RunWorkers) -> None:
        priorities = [0, -100, 100, 50, -5, 1]
        for priority in priorities:
            tasks.record_order.using(priority=priority).enqueue(f"p{priority}")

        run_workers("-n", "1")

        ran = list(Execution.objects.order_by("id").values_list("label", flat=True))
        assert ran == [f"p{p}" for p in sorted(priorities, reverse=True)]

    def test_a_task_runs_on_its_queue(self, run_workers: RunWorkers) -> None:
        result = tasks.on_reports_queue.enqueue()

        run_workers("--queues", "default")
        result.refresh()
        assert result.status == Status.READY

        run_workers("--queues", "reports")
        result.refresh()
        assert (result.status, result.return_value) == (Status.SUCCESSFUL, "reports")
