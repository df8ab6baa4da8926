"""Django's Tasks framework (`django.tasks`, or the `django-tasks` backport) on the job table.

`backend` stores tasks as jobs, `runner` runs them in the workers, `results` reads a job row as
a `TaskResult`, `compat` imports the framework from wherever this Django has it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import django

if TYPE_CHECKING:
    from ..rows import ClaimedJob
    from ..runtime.runner import JobRunner


def runner_factory(job: ClaimedJob) -> JobRunner | None:
    """The runner of a job a tasks backend stored; None for `@job` jobs.

    Registered by the app at start-up. The framework is imported only for a job that names a
    backend, so projects without `django.tasks` (Django 5.2 without the backport) never load it.
    """
    if not job.backend:
        return None
    from .runner import task_runner_factory

    return task_runner_factory(job)


#: Where TASKS may point at the backend: the documented path and the class's own module.
BACKEND_PATHS = frozenset(
    {"django_sqlqueue.backend.SQLQueueBackend", "django_sqlqueue.tasks.backend.SQLQueueBackend"}
)

#: The framework's own backends (Django's and the backport's), never subclasses of ours.
FRAMEWORK_BACKENDS = ("django.tasks.backends.", "django_tasks.backends.")


def is_our_backend(path: Any) -> bool:
    """Whether a TASKS BACKEND path names SQLQueueBackend or a subclass of it.

    Another path is imported to look at its classes (that backend's framework is installed if
    TASKS names it); one that cannot be imported is not ours. The framework's own backends
    (Django 6's default TASKS names one) are not imported: none is ours, and the import would
    add to every worker's start-up.
    """
    if path in BACKEND_PATHS:
        return True
    if not isinstance(path, str) or path.startswith(FRAMEWORK_BACKENDS):
        return False
    from django.utils.module_loading import import_string

    try:
        backend = import_string(path)
    except Exception:
        return False
    return any(
        f"{cls.__module__}.{cls.__qualname__}" in BACKEND_PATHS
        for cls in getattr(backend, "__mro__", ())
    )


def tasks_summary(tasks_setting: Any) -> str:
    """Which Tasks framework jobs the workers run, as the runworkers banner says it: the TASKS
    aliases that use this backend (the framework keeps no list of its tasks to count)."""
    framework = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
    entries = tasks_setting if isinstance(tasks_setting, dict) else {}
    aliases = [
        f"TASKS[{alias!r}]"
        for alias, entry in entries.items()
        if isinstance(entry, dict) and is_our_backend(entry.get("BACKEND"))
    ]
    if not aliases:
        return f"{framework}: none (TASKS names no SQLQueueBackend)"
    return f"{framework}: every task enqueued through {', '.join(aliases)}"
