"""What `manage.py jobs requeue|cancel|run-now|purge` does to the jobs its filters select.

The operations are the admin actions' (`operations.py`): each changes only the statuses its
transition names, in one conditional UPDATE or DELETE, so a worker claiming or finishing a
job at that moment wins. The selection is read by id, CHUNK_SIZE ids at a time, and each
chunk is changed in its own short transaction: bounded work per statement and per
transaction, however many jobs match.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q, QuerySet

from .. import operations
from ..models import Job
from ..queries import jobs
from ..states import CANCEL, FINISHED, REQUEUE, RUN_NOW, STOP, Status
from .job_filters import JobFilters

#: Ids per UPDATE (or DELETE) and per transaction.
CHUNK_SIZE = 1000


@dataclass(frozen=True)
class BulkOperation:
    """One subcommand: the statuses it changes and the operation that changes them.

    `done`, `would` and `ask` are sentences about `{jobs}` ("12 jobs"): after the change, for
    `--dry-run`, and as the confirmation's question.
    """

    key: str
    sources: tuple[Status, ...]
    done: str
    would: str
    ask: str
    apply: Callable[[list[int], str], operations.BulkResult] = dataclasses.field(repr=False)

    def statuses(self, filters: JobFilters) -> list[str]:
        """The statuses it acts on: its own, narrowed by `--status`; ValueError for a
        `--status` it never changes."""
        own = [status.value for status in dict.fromkeys(self.sources)]
        if not filters.statuses:
            return own
        refused = [status for status in filters.statuses if status not in own]
        if refused:
            raise ValueError(
                f"{self.key} applies to {', '.join(own)} jobs, not {', '.join(refused)} "
                "(the same rule as the admin's action)."
            )
        return [status for status in own if status in filters.statuses]

    def selection(self, filters: JobFilters, alias: str) -> QuerySet[Job]:
        """The jobs the filters select and this operation would change."""
        statuses = self.statuses(filters)
        rest = dataclasses.replace(filters, statuses=())
        if self is PURGE:
            # Finished jobs nothing still needs, by their finish time.
            queryset = operations.purgeable(statuses=statuses, alias=alias)
            return rest.apply(queryset, age_field="finished_at")
        condition = Q(status__in=[s for s in statuses if s not in STOP_VALUES])
        if self is CANCEL_JOBS and Status.RUNNING.value in statuses:
            # A running job is asked to stop, once.
            condition |= Q(status=Status.RUNNING, cancel_requested_at__isnull=True)
        return rest.apply(jobs(alias).filter(condition))


STOP_VALUES = tuple(status.value for status in STOP.sources)


def _purge(ids: list[int], alias: str) -> operations.BulkResult:
    queryset = operations.purgeable(alias=alias).filter(id__in=ids)
    return operations.BulkResult(operations.purge(queryset, batch_size=CHUNK_SIZE))


REQUEUE_JOBS = BulkOperation(
    key="requeue",
    sources=REQUEUE.sources,
    done="Requeued {jobs}.",
    would="Would requeue {jobs}",
    ask="Requeue {jobs}",
    apply=lambda ids, alias: operations.requeue_many(ids, alias=alias),
)
CANCEL_JOBS = BulkOperation(
    key="cancel",
    sources=(*CANCEL.sources, *STOP.sources),
    done="Cancelled {jobs}.",
    would="Would cancel {jobs}",
    ask="Cancel {jobs}",
    apply=lambda ids, alias: operations.cancel_many(ids, alias=alias),
)
RUN_NOW_JOBS = BulkOperation(
    key="run-now",
    sources=RUN_NOW.sources,
    done="Made {jobs} due now.",
    would="Would make {jobs} due now",
    ask="Make {jobs} due now",
    apply=lambda ids, alias: operations.run_now_many(ids, alias=alias),
)
PURGE = BulkOperation(
    key="purge",
    sources=FINISHED,
    done="Purged {jobs}.",
    would="Would purge {jobs}",
    ask="Delete {jobs} for good",
    apply=_purge,
)
OPERATIONS = {op.key: op for op in (REQUEUE_JOBS, CANCEL_JOBS, RUN_NOW_JOBS, PURGE)}


@dataclass
class Outcome:
    """What a run changed: `changed` jobs, `stopping` running jobs asked to stop (cancel),
    out of `seen` selected; the rest changed status meanwhile (a worker came first)."""

    changed: int = 0
    stopping: int = 0
    seen: int = 0

    @property
    def raced(self) -> int:
        return max(0, self.seen - self.changed - self.stopping)


def id_chunks(queryset: QuerySet[Job], size: int = CHUNK_SIZE) -> Iterator[list[int]]:
    """The ids of `queryset`, lowest first, `size` at a time (keyset paging: each read starts
    past the last id, so none is read twice even when the change keeps it selected)."""
    ids = queryset.order_by("id").values_list("id", flat=True)
    last = 0
    while True:
        chunk = list(ids.filter(id__gt=last)[:size])
        if not chunk:
            return
        yield chunk
        last = chunk[-1]


def run(operation: BulkOperation, queryset: QuerySet[Job], size: int = CHUNK_SIZE) -> Outcome:
    """Apply `operation` to every job of `queryset`, one transaction per chunk of ids."""
    outcome = Outcome()
    alias = queryset.db
    for ids in id_chunks(queryset, size):
        with transaction.atomic(using=alias):
            result = operation.apply(ids, alias)
        outcome.changed += result.changed
        outcome.stopping += result.stopping
        outcome.seen += len(ids)
    return outcome
