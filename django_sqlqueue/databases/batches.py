"""Workflows: whether a batch has finished, and its callback stored exactly once.

A batch (`JobBatch`) finishes once it is closed and none of its members, nor of its child
batches, is left unfinished. Nothing a member's end writes touches the batch's row (a counter
every worker updated would queue each member's end behind the last on PostgreSQL and
MariaDB): its end only notes the batch, and the note is looked at later, once per worker's
claimed round (`check_noted`), with one probe of the members' (batch, status) index. The
batch that has nothing left is finished by one conditional UPDATE (`finished_at IS NULL`) in
the transaction that stores its callback: two checkers at once store one callback, and a
checker killed before its commit stores none, leaving the batch to the next checker or to
the supervisors' sweep (`BatchSweeper`).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db import DatabaseError, transaction
from django.db.models import Count
from django.utils import timezone

from ..models import Job, JobBatch
from ..rows import NewJob
from ..states import UNFINISHED_VALUES, Status
from .inserting import Inserter

logger = logging.getLogger("django_sqlqueue")

#: Most batches one sweep looks at.
BATCH = 500

_noted: dict[str, set[int]] = defaultdict(set)
_noted_lock = threading.Lock()


class StoresOn(Protocol):
    """The queue database a callback is stored on (a `QueueDatabase`)."""

    alias: str

    def inserter(self) -> Inserter:
        """The INSERT statements of its connection."""

    def wake(self, queue: str) -> None:
        """Wake idle workers of `queue`: a job of it became due now."""


@dataclass(frozen=True)
class BatchProgress:
    """Where a batch stands: its members by outcome (`context.batch`, `Batch.progress()`)."""

    id: int
    total: int
    completed: int
    dead: int
    cancelled: int
    #: open (members may still join), closed (waiting for members) or finished.
    state: str
    label: str = ""

    @property
    def unfinished(self) -> int:
        return self.total - self.completed - self.dead - self.cancelled

    @property
    def finished(self) -> bool:
        return self.state == "finished"


def progress(alias: str, batch_id: int) -> BatchProgress | None:
    """The batch's members counted by status (one grouped read of its index range)."""
    batch = JobBatch.objects.using(alias).filter(id=batch_id).first()
    if batch is None:
        return None
    counts = dict(
        Job.objects.using(alias)
        .filter(batch_id=batch_id)
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by()
    )
    return BatchProgress(
        id=batch_id,
        total=sum(counts.values()),
        completed=counts.get(Status.COMPLETED.value, 0),
        dead=counts.get(Status.DEAD.value, 0),
        cancelled=counts.get(Status.CANCELLED.value, 0),
        state=batch.state,
        label=batch.label,
    )


def batch_of_job(alias: str, job_id: int, batch_id: int | None) -> BatchProgress | None:
    """`context.batch`: the batch job `job_id` is the callback of, else the one it is a
    member of (`batch_id`), else None."""
    called_back = (
        JobBatch.objects.using(alias).filter(callback_job_id=job_id).values_list("id", flat=True)
    )
    owner = called_back.first() or batch_id
    return None if owner is None else progress(alias, owner)


def anything_left(alias: str, batch_id: int) -> bool:
    """Whether a member of the batch, or a child batch, has not finished: one index probe
    (two at the batch's end)."""
    members = Job.objects.using(alias).filter(batch_id=batch_id, status__in=UNFINISHED_VALUES)
    if members.exists():
        return True
    children = JobBatch.objects.using(alias).filter(parent_id=batch_id, finished_at__isnull=True)
    return children.exists()


def finish(database: StoresOn, batch_id: int) -> bool:
    """Finish the batch if it is closed and nothing is left, storing its callback in the same
    transaction; True if this call did. Then its parent, if it has one, is looked at."""
    alias = database.alias
    if anything_left(alias, batch_id):
        return False
    now = timezone.now()
    with transaction.atomic(using=alias):
        finishing = JobBatch.objects.using(alias).filter(
            id=batch_id, closed_at__isnull=False, finished_at__isnull=True
        )
        if not finishing.update(finished_at=now):
            return False  # open, or finished by another checker
        batch = JobBatch.objects.using(alias).only("callback", "parent_id").get(id=batch_id)
        if batch.callback is not None:
            [job] = database.inserter().insert([callback_job(batch.callback, batch.parent_id, now)])
            JobBatch.objects.using(alias).filter(id=batch_id).update(callback_job_id=job.pk)
    if batch.callback is not None:
        database.wake(batch.callback["queue"])
    if batch.parent_id is not None:
        finish(database, batch.parent_id)
    return True


def callback_job(spec: dict[str, Any], parent_id: int | None, now: datetime) -> NewJob:
    """The batch's callback as a job to store now (it joins the batch's parent, if any)."""
    return NewJob(
        name=spec["name"],
        queue=spec["queue"],
        args=list(spec["args"]),
        kwargs=dict(spec["kwargs"]),
        priority=spec["priority"],
        max_attempts=spec["max_attempts"],
        run_at=now + timedelta(seconds=spec.get("delay_seconds", 0)),
        created_at=now,
        backend=spec.get("backend", ""),
        concurrency_key=spec.get("concurrency_key"),
        batch_id=parent_id,
    )


def finish_all(database: StoresOn, batch_ids: Iterable[int]) -> list[int]:
    """`finish` each batch; those this call finished."""
    return [batch_id for batch_id in sorted(set(batch_ids)) if finish(database, batch_id)]


def note(alias: str, batch_ids: Iterable[int]) -> None:
    """Members of these batches finished (or will, once the current transaction commits):
    look at the batches at the next `check_noted` of this process."""
    ids = set(batch_ids)

    def add() -> None:
        with _noted_lock:
            _noted[alias].update(ids)

    transaction.on_commit(add, using=alias)


def check_noted(database: StoresOn) -> list[int]:
    """Finish the batches noted since the last call; those it finished. An error is logged,
    not raised: the supervisors' sweep finishes the batch later."""
    with _noted_lock:
        ids = _noted.pop(database.alias, set())
    if not ids:
        return []
    try:
        return finish_all(database, ids)
    except DatabaseError as exc:
        logger.warning(
            "Could not look whether batches %s have finished (%s); the supervisors' sweep will.",
            ", ".join(f"#{batch_id}" for batch_id in sorted(ids)),
            exc,
        )
        return []


class BatchSweeper:
    """Finishes, a slice per call, the closed batches their members' workers did not: one
    killed between a member's end and its look, a batch closed after its last member ended,
    one whose members were all cancelled. Reads at most `limit` batches per call, going on
    from where the last call stopped."""

    def __init__(self, database: StoresOn, limit: int = BATCH) -> None:
        self.database = database
        self.limit = limit
        self.cursor = 0

    def sweep(self) -> list[int]:
        ids = list(
            JobBatch.objects.using(self.database.alias)
            .filter(finished_at__isnull=True, closed_at__isnull=False, id__gt=self.cursor)
            .order_by("id")
            .values_list("id", flat=True)[: self.limit]
        )
        self.cursor = ids[-1] if len(ids) == self.limit else 0
        return finish_all(self.database, ids)
