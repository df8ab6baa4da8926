"""Helpers for a project's own tests: run enqueued jobs in-process, assert what was enqueued.

    from django_sqlqueue.testing import assert_enqueued, captured_jobs, run_jobs

    def test_signup_sends_the_welcome_email(client):
        client.post("/signup/", {"email": "ada@example.com"})
        assert_enqueued("shop.send_welcome_email", to="ada@example.com")
        run_jobs()
        assert len(mail.outbox) == 1

`run_jobs()` runs due jobs through the worker's own code (see running.py); the assertions read
the job table (see capture.py). The pytest plugin (pytest_plugin.py) wraps them in fixtures.
Nothing here is imported before it is used: the plugin module loads when pytest starts,
before Django is set up.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .capture import (
        CapturedJobs,
        assert_enqueued,
        assert_not_enqueued,
        captured_jobs,
        enqueued_jobs,
    )
    from .running import run_jobs

__all__ = [
    "CapturedJobs",
    "assert_enqueued",
    "assert_not_enqueued",
    "captured_jobs",
    "enqueued_jobs",
    "run_jobs",
]

_MODULES = {
    "CapturedJobs": "capture",
    "assert_enqueued": "capture",
    "assert_not_enqueued": "capture",
    "captured_jobs": "capture",
    "enqueued_jobs": "capture",
    "run_jobs": "running",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
