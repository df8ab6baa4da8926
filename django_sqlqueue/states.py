"""The job state machine as plain data and functions: no I/O, tested directly."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.db import models

#: Priorities run highest first; the range matches django.tasks so they map one to one.
PRIORITY_MIN = -100
PRIORITY_MAX = 100


class Status(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed (retry scheduled)"
    DEAD = "dead", "Dead"
    CANCELLED = "cancelled", "Cancelled"


#: Statuses a worker may claim from (once `run_at` has passed).
CLAIMABLE = (Status.PENDING, Status.FAILED)
#: Statuses that never change again unless a person requeues the job.
FINISHED = (Status.COMPLETED, Status.DEAD, Status.CANCELLED)
#: Statuses `requeue` accepts.
REQUEUEABLE = (Status.DEAD, Status.CANCELLED, Status.FAILED, Status.COMPLETED)
#: Statuses `cancel` accepts: a running job belongs to its worker.
CANCELLABLE = (Status.PENDING, Status.FAILED)

TRANSITIONS: Mapping[str, frozenset[str]] = {
    Status.PENDING: frozenset({Status.RUNNING, Status.CANCELLED}),
    Status.FAILED: frozenset({Status.RUNNING, Status.CANCELLED, Status.PENDING}),
    Status.RUNNING: frozenset({Status.COMPLETED, Status.FAILED, Status.DEAD, Status.PENDING}),
    Status.COMPLETED: frozenset({Status.PENDING}),
    Status.DEAD: frozenset({Status.PENDING}),
    Status.CANCELLED: frozenset({Status.PENDING}),
}


def can_transition(current: str, target: str) -> bool:
    """True if the state machine (DESIGN.md §3) allows `current` → `target`."""
    return target in TRANSITIONS.get(current, frozenset())


def outcome_of_failure(attempts: int, max_attempts: int) -> Status:
    """Where a failed attempt leads: a retry while attempts are left, else the dead letter."""
    return Status.FAILED if attempts < max_attempts else Status.DEAD


def summarize(counts: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Fold `(status, count)` rows into a dict with every status present, in a stable order."""
    summary = {status.value: 0 for status in Status}
    for status, count in counts:
        summary[status] = summary.get(status, 0) + count
    return summary


def format_summary(summary: Mapping[str, int]) -> str:
    """`pending: 12, running: 3, ...` as `jobstatus` prints it."""
    return ", ".join(f"{status}: {count}" for status, count in summary.items())
