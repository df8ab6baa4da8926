"""A library built on the django-tasks backport, as Wagtail is: its tasks come from
`django_tasks.task` and its receivers listen on `django_tasks.signals`, even on Django 6.x.

Imported only where the backport is installed beside `django.tasks` (Django 6.x).
"""

from __future__ import annotations

import os
from typing import Any

from django_tasks import task
from django_tasks.signals import task_enqueued, task_finished, task_started

from django_sqlqueue.references import id_in
from tests.testapp.models import Execution

from . import recorders  # noqa: F401 - the same worker's receivers on django.tasks' signals

#: Label prefix of the rows the backport's signals write.
BACKPORT_PREFIX = "backport:"


@task
def shout(text: str) -> str:
    return text.upper()


def _record(name: str, task_result: Any) -> None:
    if not task_result.task.module_path.startswith(f"{__name__}."):
        return  # the library hears every task; the test counts its own
    Execution.objects.create(
        job_id=id_in(task_result.id),
        attempt=task_result.attempts,
        worker_pid=os.getpid(),
        label=f"{BACKPORT_PREFIX}{name}:{task_result.status}",
    )


def on_enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _record("task_enqueued", task_result)


def on_started(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _record("task_started", task_result)


def on_finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
    _record("task_finished", task_result)


task_enqueued.connect(on_enqueued, dispatch_uid="tests.backport_client.enqueued")
task_started.connect(on_started, dispatch_uid="tests.backport_client.started")
task_finished.connect(on_finished, dispatch_uid="tests.backport_client.finished")
