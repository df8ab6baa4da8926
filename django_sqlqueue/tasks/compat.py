"""One import point for Django's Tasks framework: `django.tasks` on Django 6.0+, the
`django-tasks` backport (`django_tasks`) on Django 5.2.

The two expose the same classes under slightly different names (`InvalidTask` in core,
`InvalidTaskError` in the backport); the rest of the backend imports them from here only.

On Django 6.x a library built on the backport (Wagtail imports `django_tasks` on every Django)
may load the backport beside `django.tasks`: `signals()` then names both frameworks' signals.
"""

from __future__ import annotations

import inspect
import sys
from typing import TYPE_CHECKING

import django

if TYPE_CHECKING:
    from django.dispatch import Signal

# The type checker runs on Django 6.1 (the dev extra) and reads the first branch only.
if TYPE_CHECKING or django.VERSION >= (6, 0):
    from django.tasks import DEFAULT_TASK_BACKEND_ALIAS as DEFAULT_BACKEND
    from django.tasks import DEFAULT_TASK_QUEUE_NAME as DEFAULT_QUEUE
    from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus, task, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    FRAMEWORK = "django.tasks"
else:
    try:
        import django_tasks  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the installed packages
        raise ImportError(
            f"django_sqlqueue.backend needs Django's Tasks framework: Django 6.0+, or on "
            f"Django {django.get_version()} the backport, `pip install "
            f"'django-sqlqueue[tasks-backport]'` (package django-tasks)."
        ) from exc
    from django_tasks import DEFAULT_TASK_BACKEND_ALIAS as DEFAULT_BACKEND
    from django_tasks import DEFAULT_TASK_QUEUE_NAME as DEFAULT_QUEUE
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    FRAMEWORK = "django_tasks"

#: The backport's signals module, where libraries built on the backport connect receivers.
BACKPORT_SIGNALS = "django_tasks.signals"
_SIGNALS = {
    "task_enqueued": task_enqueued,
    "task_started": task_started,
    "task_finished": task_finished,
}


def signals(name: str) -> list[Signal]:
    """The framework's signal `name` and, on Django 6.x once something imported the backport's
    signals, the backport's too: a receiver a library connected there hears our tasks as well.

    A receiver can only be connected to a module that was imported, so the backport is never
    imported here.
    """
    found = [_SIGNALS[name]]
    backport = sys.modules.get(BACKPORT_SIGNALS) if FRAMEWORK == "django.tasks" else None
    if backport is not None:
        found.append(getattr(backport, name))
    return found


#: True where `@task(...)` passes unknown keyword arguments on to the backend's task class
#: (Django 6.1+ and the backport); on Django 6.0 the decorator rejects them.
DECORATOR_PASSES_OPTIONS = any(
    parameter.kind is inspect.Parameter.VAR_KEYWORD
    for parameter in inspect.signature(task).parameters.values()
)

__all__ = [
    "BACKPORT_SIGNALS",
    "DECORATOR_PASSES_OPTIONS",
    "DEFAULT_BACKEND",
    "DEFAULT_QUEUE",
    "FRAMEWORK",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "normalize_json",
    "signals",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
