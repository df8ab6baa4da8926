"""`@task` functions the backend tests enqueue and real worker processes run.

Tasks with retry options use `dataclasses.replace`, which works on every Django line;
the decorator's own keyword arguments (6.1+ and the backport) are tested separately.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from datetime import timedelta
from typing import Any

from django_sqlqueue.references import id_in
from django_sqlqueue.tasks.compat import task
from tests.testapp.models import Execution

from . import recorders  # noqa: F401 - the worker-side signal receivers


class TaskBroke(Exception):
    """Raised on purpose, so a test can find its class path in TaskResult.errors."""


def _record(context: Any, label: str) -> None:
    Execution.objects.create(
        job_id=id_in(context.task_result.id),
        attempt=context.attempt,
        worker_pid=os.getpid(),
        label=label,
    )


@task
def add(a: int, b: int) -> int:
    return a + b


@task(takes_context=True)
def record(context: Any, label: str) -> str:
    _record(context, label)
    return label


@task(takes_context=True, queue_name="reports")
def report(context: Any, name: str) -> dict[str, Any]:
    _record(context, f"report:{name}")
    return {"name": name, "queue": context.task_result.task.queue_name}


@task(takes_context=True)
def fail_once(context: Any) -> dict[str, Any]:
    _record(context, "fail_once")
    if context.attempt == 1:
        raise TaskBroke("first attempt fails")
    return {
        "attempt": context.attempt,
        "id": context.task_result.id,
        "workers": len(context.task_result.worker_ids),
        "errors": len(context.task_result.errors),
        "started_at": context.task_result.started_at.isoformat(),
        "last_attempted_at": context.task_result.last_attempted_at.isoformat(),
    }


def always_fails(context: Any) -> None:
    _record(context, "always_fails")
    raise TaskBroke(f"boom on attempt {context.attempt}")


always_fails = dataclasses.replace(task(takes_context=True)(always_fails), max_attempts=3)


def too_slow(context: Any) -> None:
    _record(context, "too_slow")
    time.sleep(30)


too_slow = dataclasses.replace(
    task(takes_context=True)(too_slow), timeout=timedelta(seconds=1), max_attempts=1
)


def dies(context: Any) -> None:
    _record(context, "dies")
    os._exit(3)  # the worker process dies mid-task, as on SIGKILL or OOM


dies = dataclasses.replace(task(takes_context=True)(dies), max_attempts=1)


@task
def plain_failure() -> None:
    raise ValueError("no retry options of its own")


@task(takes_context=True)
async def double(context: Any, value: int) -> dict[str, Any]:
    await asyncio.sleep(0.01)
    await Execution.objects.acreate(
        job_id=id_in(context.task_result.id),
        attempt=context.attempt,
        worker_pid=os.getpid(),
        label="double",
    )
    return {"value": value * 2, "attempt": context.attempt}


@task
def returns_a_set() -> set[int]:
    return {1, 2}


@task
def returns_a_tuple() -> tuple[int, ...]:
    return (1, 2)


def undecorated(value: int) -> int:
    """For tests that decorate it themselves."""
    return value
