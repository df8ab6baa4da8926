"""Fixtures of the conformance suite: the framework's API, the backend, real workers.

The framework's classes are reached through `compat`, imported below and nowhere else in
this package, so that moving the compatibility module means changing one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from django_sqlqueue.references import id_in
from tests.tasksapp.tasks_settings import TASKS

if TASKS:
    # The one import of the compatibility module: django.tasks on Django 6.x, the
    # django-tasks backport on Django 5.2.
    from django_sqlqueue.tasks import compat
else:  # Django 5.2 without the backport: nothing to test against.
    compat = None
    collect_ignore_glob = ["test_*.py"]

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Set in a worker's environment to make `fragile_tasks` fail to import there.
BREAK_IMPORT = "CONFORMANCE_BREAK_IMPORT"

RunWorkers = Callable[..., "subprocess.CompletedProcess[str]"]


def pytest_report_header(config: pytest.Config) -> str:
    if compat is None:
        return "tasks_conformance: skipped, no Tasks framework (Django 5.2 needs django-tasks)"
    return f"tasks_conformance: against {compat.FRAMEWORK}"


@pytest.fixture
def backend() -> Any:
    """The backend the suite's tasks use (TASKS['default'])."""
    return compat.task_backends["default"]


def _worker_env(child_env: dict[str, str], extra: dict[str, str] | None) -> dict[str, str]:
    return {**child_env, "DJANGO_SETTINGS_MODULE": "tests.settings", **(extra or {})}


@pytest.fixture
def run_workers(child_env: dict[str, str]) -> RunWorkers:
    """`runworkers --burst OPTIONS` in a child process, to completion.

    A non-zero exit, or no exit within `timeout` seconds, fails the test with the log.
    """

    def run(
        *options: str, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "django", "runworkers", "--burst", *options],
            cwd=REPO_ROOT,
            env=_worker_env(child_env, env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"runworkers exited {done.returncode}:\n{done.stderr}"
        return done

    return run


@pytest.fixture
def start_workers(child_env: dict[str, str]) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """`runworkers OPTIONS` left running, for tests that look at a task while it runs.

    Every process started is killed with its process group when the test ends.
    """
    started: list[subprocess.Popen[str]] = []

    def start(*options: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "django", "runworkers", *options],
            cwd=REPO_ROOT,
            env=_worker_env(child_env, env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)


@pytest.fixture
def enqueued_signals() -> Iterator[list[tuple[Any, Any]]]:
    """(sender, task_result) of every task_enqueued this process sends during the test."""
    received: list[tuple[Any, Any]] = []

    def receive(sender: Any, task_result: Any, **kwargs: Any) -> None:
        received.append((sender, task_result))

    compat.task_enqueued.connect(receive, weak=False)
    yield received
    compat.task_enqueued.disconnect(receive)


def worker_signals(result: Any) -> list[dict[str, Any]]:
    """What the worker-side receivers in `tasks` saw for `result`, in the order sent."""
    from tests.testapp.models import SignalLog

    rows = SignalLog.objects.filter(
        job_id=id_in(result.id), signal__in=["task_started", "task_finished"]
    ).order_by("id")
    return [{"signal": row.signal, **json.loads(row.detail)} for row in rows]
