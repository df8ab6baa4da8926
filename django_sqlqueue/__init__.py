"""django-sqlqueue: a durable job queue in the database your Django project already runs.

The public API is what this module exports; everything else is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backoff import Backoff
from .exceptions import (
    Discard,
    InvalidJobError,
    JobAlreadyRegistered,
    Retry,
    SQLQueueError,
    UnknownJobError,
)
from .registry import JobHandler, job, registry
from .states import Status

if TYPE_CHECKING:
    from .context import JobContext
    from .models import Job

__version__ = "0.1.0"

__all__ = [
    "Backoff",
    "Discard",
    "InvalidJobError",
    "Job",
    "JobAlreadyRegistered",
    "JobContext",
    "JobHandler",
    "Retry",
    "SQLQueueError",
    "Status",
    "UnknownJobError",
    "enqueue",
    "job",
    "registry",
]


def enqueue(name: str, /, *args: Any, **kwargs: Any) -> Job:
    """Enqueue the job registered as `name` (for code that cannot import its handler)."""
    from .enqueueing import enqueue as _enqueue

    return _enqueue(name, *args, **kwargs)


def __getattr__(name: str) -> Any:
    # Models can only be imported once Django's app registry is ready.
    if name == "Job":
        from .models import Job

        return Job
    if name == "JobContext":
        from .context import JobContext

        return JobContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
