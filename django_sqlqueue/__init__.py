"""django-sqlqueue: a durable job queue in the database your Django project already runs.

The public API is what this module exports; everything else is internal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .backoff import Backoff
from .chains import Chain, chain
from .exceptions import (
    Discard,
    InvalidJobError,
    JobAlreadyRegistered,
    JobCancelled,
    Retry,
    SQLQueueError,
    UnknownJobError,
)
from .options import JobOptions
from .registry import JobHandler, PreparedJob, job, registry
from .states import Status

if TYPE_CHECKING:
    from .batches import Batch, BatchFactory
    from .context import JobContext
    from .databases.batches import BatchProgress
    from .models import Job
    from .operations import BulkResult, OperationResult

__version__ = "0.1.0"

__all__ = [
    "Backoff",
    "Batch",
    "BatchProgress",
    "BulkResult",
    "Chain",
    "Discard",
    "InvalidJobError",
    "Job",
    "JobAlreadyRegistered",
    "JobCancelled",
    "JobContext",
    "JobHandler",
    "JobOptions",
    "OperationResult",
    "PreparedJob",
    "Retry",
    "SQLQueueError",
    "Status",
    "UnknownJobError",
    "batch",
    "cancel",
    "cancel_many",
    "chain",
    "enqueue",
    "job",
    "pause_queue",
    "registry",
    "requeue",
    "requeue_many",
    "resume_queue",
    "run_now",
    "run_now_many",
]


def enqueue(name: str, /, *args: Any, **kwargs: Any) -> Job:
    """Enqueue the job registered as `name` (for code that cannot import its handler)."""
    return registry.get(name).enqueue(*args, **kwargs)


def cancel(job: Job | int | str, /) -> OperationResult:
    """Cancel a job: at once if it waits; if it runs, its worker is asked to stop it (the
    handler sees `context.cancel_requested`, and is interrupted after CANCEL_GRACE_SECONDS).
    A finished job is left alone: the result says so (`applied` is False)."""
    from . import operations

    return operations.cancel(job)


def requeue(job: Job | int | str, /) -> OperationResult:
    """Run a dead, cancelled, failed or completed job again from scratch (attempts reset)."""
    from . import operations

    return operations.requeue(job)


def run_now(job: Job | int | str, /) -> OperationResult:
    """Make a waiting (pending or failed) job due now; its attempts are kept."""
    from . import operations

    return operations.run_now(job)


def pause_queue(name: str, /, *, by: str = "", reason: str = "", wait: bool = True) -> bool:
    """Stop workers starting jobs of queue `name`: once this returns (inside a transaction,
    once that commits), no job of it starts; running jobs finish normally, new jobs are still
    accepted. It waits up to a second for that while workers run (`wait=False`: it does
    not, and workers stop within about a second). True if it was not paused already."""
    from . import operations

    return operations.pause_queue(name, by=by, reason=reason, wait=wait)


def resume_queue(name: str, /) -> bool:
    """Let workers claim from a paused queue again. True if it was paused."""
    from . import operations

    return operations.resume_queue(name)


def cancel_many(ids: Iterable[int], /) -> BulkResult:
    """`cancel` for many job ids: `changed` were cancelled, `stopping` were running and asked
    to stop."""
    from . import operations

    return operations.cancel_many(ids)


def requeue_many(ids: Iterable[int], /) -> BulkResult:
    from . import operations

    return operations.requeue_many(ids)


def run_now_many(ids: Iterable[int], /) -> BulkResult:
    from . import operations

    return operations.run_now_many(ids)


batch: BatchFactory


def __getattr__(name: str) -> Any:
    # Models can only be imported once Django's app registry is ready.
    if name == "Job":
        from .models import Job

        return Job
    if name == "JobContext":
        from .context import JobContext

        return JobContext
    if name in ("batch", "Batch"):
        # Batches store rows: the models must be ready.
        from . import batches

        return getattr(batches, name)
    if name == "BatchProgress":
        from .databases.batches import BatchProgress

        return BatchProgress
    if name in ("BulkResult", "OperationResult"):
        from . import operations

        return getattr(operations, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
