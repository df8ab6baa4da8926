"""The TASKS setting the backend tests run against, for tests/settings.py to import.

Empty where no Tasks framework is installed (Django 5.2 without the backport): the backend
tests then skip themselves, saying why.
"""

from __future__ import annotations

import importlib.util

import django


def _framework_apps() -> list[str] | None:
    """Apps the framework needs in INSTALLED_APPS; None if it is not installed."""
    if django.VERSION >= (6, 0):
        return []
    if importlib.util.find_spec("django_tasks") is not None:
        return ["django_tasks"]
    return None


_apps = _framework_apps()
TASKS_APPS: list[str] = _apps or []
TASKS: dict[str, dict[str, object]] = (
    {}
    if _apps is None
    else {
        "default": {
            "BACKEND": "django_sqlqueue.backend.SQLQueueBackend",
            "QUEUES": ["default", "reports"],
            # Retries at once, so that one `runworkers --burst` sees every attempt.
            "OPTIONS": {"BACKOFF": 0},
        },
        "strict": {
            "BACKEND": "django_sqlqueue.backend.SQLQueueBackend",
            "QUEUES": ["default"],
            "OPTIONS": {"MAX_ATTEMPTS": 2, "BACKOFF": 0},
        },
    }
)
