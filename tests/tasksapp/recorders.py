"""Receivers that write the framework's worker-side signals to a table, so a test can count
what worker processes sent. Connected when `tasks` is imported, as a worker does."""

from __future__ import annotations

import os
from typing import Any

from django_sqlqueue.references import id_in
from django_sqlqueue.tasks.compat import task_finished, task_started
from tests.testapp.models import Execution

SIGNAL_PREFIX = "signal:"


def _record(name: str, task_result: Any) -> None:
    Execution.objects.create(
        job_id=id_in(task_result.id),
        attempt=task_result.attempts,
        worker_pid=os.getpid(),
        label=f"{SIGNAL_PREFIX}{name}:{task_result.status}",
    )


def on_started(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _record("task_started", task_result)


def on_finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _record("task_finished", task_result)


task_started.connect(on_started, dispatch_uid="tests.tasksapp.started")
task_finished.connect(on_finished, dispatch_uid="tests.tasksapp.finished")
