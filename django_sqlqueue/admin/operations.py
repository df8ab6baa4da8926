"""What each admin action does to jobs, and how its outcome is told to the user.

The actions only ever call the service layer (services.requeue, cancel, run_now, purge): each
is one conditional UPDATE or DELETE naming the statuses it may change, so a worker claiming
or finishing a job at the same moment wins and the job is reported as skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from django.contrib import messages
from django.db.models import QuerySet

from .. import services
from ..models import Job
from ..states import CANCELLABLE, CLAIMABLE, FINISHED, REQUEUEABLE, Status

#: Jobs read and acted on per round trip when a whole filtered selection is acted on.
CHUNK_SIZE = 500


def _purge(ids: list[int], alias: str) -> int:
    return services.purge(services.purgeable(alias=alias).filter(id__in=ids))


@dataclass(frozen=True)
class JobOperation:
    """One action: the statuses it accepts, the permission it needs, the service it calls."""

    key: str
    label: str
    past: str
    allowed: tuple[Status, ...]
    permission: str  # a ModelAdmin has_<permission>_permission method
    confirm: bool
    help: str
    apply: Callable[[list[int], str], int] = field(repr=False)

    def accepts(self, status: str) -> bool:
        return status in self.allowed


REQUEUE = JobOperation(
    key="requeue",
    label="Requeue",
    past="Requeued",
    allowed=REQUEUEABLE,
    permission="requeue",
    confirm=False,
    help="Back to pending, due now, with its attempts reset to 0.",
    apply=lambda ids, alias: services.requeue(ids, alias=alias),
)
CANCEL = JobOperation(
    key="cancel",
    label="Cancel",
    past="Cancelled",
    allowed=CANCELLABLE,
    permission="cancel",
    confirm=True,
    help="A pending or failed job will not run again (until requeued).",
    apply=lambda ids, alias: services.cancel(ids, alias=alias),
)
RUN_NOW = JobOperation(
    key="run_now",
    label="Run now",
    past="Moved to now",
    allowed=CLAIMABLE,
    permission="run_now",
    confirm=False,
    help="A waiting (pending or failed) job becomes due now; its attempts are kept.",
    apply=lambda ids, alias: services.run_now(ids, alias=alias),
)
PURGE = JobOperation(
    key="purge",
    label="Purge",
    past="Purged",
    allowed=FINISHED,
    permission="purge",
    confirm=True,
    help="Deletes a finished (completed, dead or cancelled) job for good.",
    apply=_purge,
)

OPERATIONS: dict[str, JobOperation] = {op.key: op for op in (REQUEUE, CANCEL, RUN_NOW, PURGE)}

RUNNING_NOTE = (
    "Running jobs cannot be cancelled: a running job belongs to the worker running it until "
    "it completes or fails. If that worker is gone, the job comes back when its lease expires."
)


@dataclass
class Outcome:
    """What an action did: how many jobs it changed, and the statuses it found on the rest."""

    operation: JobOperation
    changed: int = 0
    seen: Counter[str] = field(default_factory=Counter)

    @property
    def selected(self) -> int:
        return sum(self.seen.values())

    @property
    def eligible(self) -> int:
        return sum(n for status, n in self.seen.items() if self.operation.accepts(status))

    @property
    def refused(self) -> Counter[str]:
        """Statuses the action does not accept, as found when the jobs were read."""
        return Counter({s: n for s, n in self.seen.items() if not self.operation.accepts(s)})

    @property
    def raced(self) -> int:
        """Jobs that were eligible when read but had changed by the time of the update."""
        return self.eligible - self.changed

    @property
    def level(self) -> int:
        if self.changed == 0:
            return messages.WARNING
        return messages.SUCCESS if self.changed == self.selected else messages.WARNING

    def message(self) -> str:
        op = self.operation
        noun = "job" if self.changed == 1 else "jobs"
        if self.changed == self.selected:
            parts = [f"{op.past} {self.changed} {noun}."]
        else:
            parts = [
                f"{op.past} {self.changed} of {self.selected} selected {noun_for(self.selected)}."
            ]
        refused = self.refused
        if refused:
            total = sum(refused.values())
            breakdown = ", ".join(f"{n} {status}" for status, n in sorted(refused.items()))
            allowed = ", ".join(s.value for s in op.allowed)
            parts.append(
                f"Skipped {total} whose status does not allow it ({breakdown}); "
                f"{op.label.lower()} accepts only {allowed} jobs."
            )
        if self.raced > 0:
            parts.append(
                f"Skipped {self.raced} whose status changed meanwhile "
                "(a worker claimed or finished it first); nothing was done to it."
            )
        if op is CANCEL and refused.get(Status.RUNNING.value):
            parts.append(RUNNING_NOTE)
        return " ".join(parts)


def noun_for(count: int) -> str:
    return "job" if count == 1 else "jobs"


def apply_to_rows(operation: JobOperation, rows: Sequence[tuple[int, str]], alias: str) -> Outcome:
    """Act on jobs read as `(id, status)`: only those whose status the action accepts.

    The service re-checks the status in its UPDATE, so a job that changed since it was read
    is left alone and counted as raced.
    """
    outcome = Outcome(operation, seen=Counter(status for _, status in rows))
    eligible = [job_id for job_id, status in rows if operation.accepts(status)]
    if eligible:
        outcome.changed = operation.apply(eligible, alias)
    return outcome


def id_status_chunks(
    queryset: QuerySet[Job], size: int = CHUNK_SIZE
) -> Iterator[list[tuple[int, str]]]:
    """`(id, status)` of every job in `queryset`, by id, `size` at a time (keyset paging)."""
    base = queryset.order_by("id").values_list("id", "status")
    last = None
    while True:
        page = base.filter(id__gt=last) if last is not None else base
        rows = list(page[:size])
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def apply_to_queryset(operation: JobOperation, queryset: QuerySet[Job]) -> Outcome:
    """Act on every job in `queryset`, in chunks, so a selection of millions stays bounded."""
    total = Outcome(operation)
    for rows in id_status_chunks(queryset):
        part = apply_to_rows(operation, rows, queryset.db)
        total.changed += part.changed
        total.seen.update(part.seen)
    return total
