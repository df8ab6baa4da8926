"""The tasks of the conformance suite, run by real worker processes.

Importing this module (as a worker does before it runs one of these tasks) connects the
receivers that write each worker-side signal to the SignalLog table, with what the signal's
TaskResult said, so that a test can read what workers sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from django_sqlqueue.references import id_in
from tests.testapp.models import Execution, SignalLog

from .conftest import compat

task = compat.task


class ConformanceError(Exception):
    """Raised on purpose; its class path must come back in TaskError."""


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def snapshot(result: Any) -> dict[str, Any]:
    """What a TaskResult says, as JSON: for the signal log and for return values."""
    return {
        "id": result.id,
        "status": str(result.status),
        "attempts": result.attempts,
        "worker_ids": list(result.worker_ids),
        "is_finished": result.is_finished,
        "errors": [error.exception_class_path for error in result.errors],
        "enqueued_at": _iso(result.enqueued_at),
        "started_at": _iso(result.started_at),
        "last_attempted_at": _iso(result.last_attempted_at),
        "finished_at": _iso(result.finished_at),
        "args": result.args,
        "kwargs": result.kwargs,
        "backend": result.backend,
        "task": result.task.module_path,
        "queue_name": result.task.queue_name,
        "priority": result.task.priority,
    }


def _log(name: str, sender: Any, task_result: Any) -> None:
    detail = snapshot(task_result)
    detail["sender"] = f"{sender.__module__}.{sender.__qualname__}"
    detail["pid"] = os.getpid()
    if task_result.status == compat.TaskResultStatus.SUCCESSFUL:
        detail["return_value"] = task_result.return_value
    SignalLog.objects.create(signal=name, job_id=id_in(task_result.id), detail=json.dumps(detail))


def on_task_started(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _log("task_started", sender, task_result)


def on_task_finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _log("task_finished", sender, task_result)


compat.task_started.connect(on_task_started, dispatch_uid="tasks_conformance.started")
compat.task_finished.connect(on_task_finished, dispatch_uid="tasks_conformance.finished")


def _only_once(func: Any) -> Any:
    """`@task` with one attempt: the framework has no retries, so a failure is final."""
    return dataclasses.replace(task(func), max_attempts=1)


def _only_once_with_context(func: Any) -> Any:
    return dataclasses.replace(task(takes_context=True)(func), max_attempts=1)


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


@task
def returns_none() -> None:
    return None


@task(takes_context=True)
def inspect_context(context: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Returns what its TaskContext said while it ran."""
    return {"attempt": context.attempt, "result": snapshot(context.task_result)}


@task(takes_context=True)
def fails_first_attempt(context: Any) -> dict[str, Any]:
    if context.attempt == 1:
        raise ConformanceError("the first attempt fails")
    return {"attempt": context.attempt, "result": snapshot(context.task_result)}


def fails(context: Any, message: str) -> None:
    raise ConformanceError(f"{message} (attempt {context.attempt})")


fails = _only_once_with_context(fails)


def returns_unstorable() -> set[int]:
    return {1, 2, 3}


returns_unstorable = _only_once(returns_unstorable)


@task(takes_context=True)
async def async_double(context: Any, value: int) -> dict[str, Any]:
    await asyncio.sleep(0)
    rows = await Execution.objects.filter(label="async").acount()
    return {"value": value * 2, "attempt": context.attempt, "orm": rows}


@task(takes_context=True)
def record_order(context: Any, label: str) -> str:
    """Writes a row as it starts, so a test can read the order tasks ran in."""
    Execution.objects.create(
        job_id=id_in(context.task_result.id),
        attempt=context.attempt,
        worker_pid=os.getpid(),
        label=label,
    )
    return label


@task(queue_name="reports")
def on_reports_queue() -> str:
    return "reports"


@task(takes_context=True)
def wait_for_file(context: Any, path: str, timeout: float = 60) -> dict[str, Any]:
    """Runs until `path` exists, so that a test can look at the task while it runs."""
    Path(f"{path}.started").write_text(context.task_result.id)
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout} s")
        time.sleep(0.02)
    return {"attempt": context.attempt}


@task
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b
