"""`with django_sqlqueue.batch(on_complete=report, **kwargs) as b:`: every job enqueued in the
block joins batch `b`, and `report` is enqueued once, exactly once, when every member has
finished (completed, dead or cancelled). docs/workflows.md has the recipes."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, ExitStack
from types import TracebackType
from typing import Any

from django.db import transaction
from django.utils import timezone

from .conf import get_settings
from .databases import queue_database
from .databases.batches import BatchProgress, finish, progress
from .enqueueing.batch_scope import current_batch_id, joining
from .enqueueing.options import EnqueueOptions, build_job
from .exceptions import InvalidJobError
from .models import Job, JobBatch
from .operations import cancel_many
from .registry import BoundJob, JobHandler, PreparedJob
from .states import FINISHED

#: The most characters of a batch's label.
LABEL_LENGTH = 200
#: Members cancelled per statement (SQLite takes a bounded number of parameters).
CANCEL_CHUNK = 1000


class Batch:
    """A batch as its code holds it: its id, and what can be done to it."""

    def __init__(self, batch_id: int, alias: str | None = None) -> None:
        self.id = batch_id
        self.alias = alias or get_settings().database

    def __repr__(self) -> str:
        return f"<Batch #{self.id}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Batch) and (other.id, other.alias) == (self.id, self.alias)

    def __hash__(self) -> int:
        return hash((self.id, self.alias))

    def progress(self) -> BatchProgress:
        """Its members counted by outcome, and whether it is open, closed or finished."""
        found = progress(self.alias, self.id)
        if found is None:
            raise InvalidJobError(f"Batch #{self.id} does not exist.")
        return found

    def jobs(self) -> Any:
        """Its members, a QuerySet of Job."""
        return Job.objects.using(self.alias).filter(batch_id=self.id)

    def close(self) -> bool:
        """No member may join any more; the callback is enqueued once every member has
        finished (at once if all have). True if this call closed it (False: closed already).
        In the caller's transaction, if it has one."""
        closed = _close(self.alias, self.id)
        if not closed and not JobBatch.objects.using(self.alias).filter(id=self.id).exists():
            raise InvalidJobError(f"Batch #{self.id} does not exist.")
        return closed

    def cancel(self) -> int:
        """Close it and cancel its members that have not finished (those running are asked
        to stop, as `cancel` does). Its callback is still enqueued once every member has
        finished, and sees the cancelled ones in `context.batch.cancelled`. The number of
        members cancelled at once."""
        alias = self.alias
        with transaction.atomic(using=alias):
            self.close()
            # A batch that has finished is past cancelling: it keeps no cancelled mark.
            JobBatch.objects.using(alias).filter(
                id=self.id, cancelled_at__isnull=True, finished_at__isnull=True
            ).update(cancelled_at=timezone.now())
            unfinished = self.jobs().exclude(status__in=[s.value for s in FINISHED])
            ids = list(unfinished.order_by("id").values_list("id", flat=True))
            changed = 0
            for start in range(0, len(ids), CANCEL_CHUNK):
                changed += cancel_many(ids[start : start + CANCEL_CHUNK], alias=alias).changed
        return changed


def _close(alias: str, batch_id: int) -> bool:
    closed = bool(
        JobBatch.objects.using(alias)
        .filter(id=batch_id, closed_at__isnull=True)
        .update(closed_at=timezone.now())
    )
    if closed:
        transaction.on_commit(lambda: finish(queue_database(alias), batch_id), using=alias)
    return closed


class BatchBlock(AbstractContextManager[Batch]):
    """The `with` block of `batch(...)` or `batch.open(id)`: one transaction on the queue
    database (a savepoint inside the caller's) in which every job enqueued joins the batch.
    An exception rolls back the batch (if the block created it) and every job of the block."""

    def __init__(
        self,
        *,
        callback: dict[str, Any] | None = None,
        label: str = "",
        keep_open: bool = False,
        existing: int | None = None,
    ) -> None:
        self.callback = callback
        self.label = label
        self.keep_open = keep_open
        self.existing = existing
        self.alias = get_settings().database
        self.stack = ExitStack()
        self.batch: Batch | None = None

    def __enter__(self) -> Batch:
        with ExitStack() as stack:
            stack.enter_context(transaction.atomic(using=self.alias))
            batch_id = self._existing() if self.existing is not None else self._create()
            stack.enter_context(joining(batch_id))
            self.stack = stack.pop_all()
        self.batch = Batch(batch_id, self.alias)
        return self.batch

    def _create(self) -> int:
        row = JobBatch.objects.using(self.alias).create(
            label=self.label, callback=self.callback, parent_id=current_batch_id()
        )
        return row.pk

    def _existing(self) -> int:
        """Lock the batch's row until the block's transaction ends, so that nobody closes it
        while jobs join it (a close waits; a finish, which needs it closed, too)."""
        assert self.existing is not None
        closed = list(
            JobBatch.objects.using(self.alias)
            .select_for_update()
            .filter(id=self.existing)
            .values_list("closed_at", flat=True)
        )
        if not closed:
            raise InvalidJobError(f"Batch #{self.existing} does not exist.")
        if closed[0] is not None:
            raise InvalidJobError(
                f"Batch #{self.existing} is closed: no job may join it any more. Open a new "
                "batch, or keep this one open (batch(..., keep_open=True)) until every job "
                "has joined."
            )
        return self.existing

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        if exc_type is None and not self.keep_open and self.existing is None:
            assert self.batch is not None
            try:
                _close(self.alias, self.batch.id)
            except BaseException:
                if not self.stack.__exit__(*sys.exc_info()):
                    raise
                return None
        return self.stack.__exit__(exc_type, exc, traceback)


class BatchFactory:
    """`django_sqlqueue.batch`: call it to open a new batch, `.open(id)` to add to one kept
    open, `.get(id)` for its handle."""

    def __call__(
        self,
        *,
        on_complete: JobHandler[Any, Any] | BoundJob[Any, Any] | PreparedJob | None = None,
        label: str = "",
        keep_open: bool = False,
        **callback_kwargs: Any,
    ) -> BatchBlock:
        """A new batch for the jobs enqueued in the block; `on_complete` (a job, optionally
        `.using(...)` or `.prepare(...)`d, with `callback_kwargs`) is enqueued once every
        member has finished. The block closes the batch at its end unless `keep_open`
        (then `Batch.close()` does, and jobs may join it later through `batch.open(id)`)."""
        if not isinstance(label, str) or len(label) > LABEL_LENGTH:
            raise InvalidJobError(
                f"A batch label is a string of at most {LABEL_LENGTH} characters."
            )
        callback = callback_spec(on_complete, callback_kwargs)
        return BatchBlock(callback=callback, label=label, keep_open=keep_open)

    def open(self, batch: Batch | int) -> BatchBlock:
        """A block whose jobs join batch `batch`, kept open when created; it stays open."""
        batch_id = batch.id if isinstance(batch, Batch) else batch
        if isinstance(batch_id, bool) or not isinstance(batch_id, int):
            raise InvalidJobError(f"batch.open() takes a Batch or its id, not {batch!r}.")
        return BatchBlock(existing=batch_id)

    def get(self, batch_id: int) -> Batch:
        """The handle of batch `batch_id` (to close, cancel or read it)."""
        if not JobBatch.objects.using(get_settings().database).filter(id=batch_id).exists():
            raise InvalidJobError(f"Batch #{batch_id} does not exist.")
        return Batch(batch_id)

    def current(self) -> Batch | None:
        """The batch of the innermost `with batch(...)` block around this code, if any."""
        batch_id = current_batch_id()
        return None if batch_id is None else Batch(batch_id)


batch = BatchFactory()


def callback_spec(on_complete: Any, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The callback job, validated now (a bad argument fails here, not when the batch ends),
    as the batch row keeps it."""
    if on_complete is None:
        if kwargs:
            raise InvalidJobError(
                f"batch() got arguments ({', '.join(sorted(kwargs))}) but no on_complete job."
            )
        return None
    if isinstance(on_complete, PreparedJob):
        if kwargs:
            raise InvalidJobError(
                "batch(on_complete=job.prepare(...)) takes its arguments in prepare(), not "
                "in batch()."
            )
        bound, args, kwargs = on_complete.bound, on_complete.args, on_complete.kwargs
    elif isinstance(on_complete, JobHandler):
        bound, args = BoundJob(on_complete, EnqueueOptions()), ()
    elif isinstance(on_complete, BoundJob):
        bound, args = on_complete, ()
    else:
        raise InvalidJobError(
            "batch(on_complete=...) takes a job (an @job function), job.using(...) or "
            f"job.prepare(...); got {on_complete!r}."
        )
    if bound.options.after is not None or bound.options.idempotency_key is not None:
        raise InvalidJobError(
            "A batch's callback runs once its batch has finished: it takes no after= and no "
            "idempotency_key (it is enqueued exactly once)."
        )
    new_job = build_job(bound.handler, args, kwargs, bound.options)
    return {
        "name": new_job.name,
        "queue": new_job.queue,
        "args": new_job.args,
        "kwargs": new_job.kwargs,
        "priority": new_job.priority,
        "max_attempts": new_job.max_attempts,
        "backend": new_job.backend,
        "concurrency_key": new_job.concurrency_key,
        # .using(delay=...): that long after the batch finishes.
        "delay_seconds": max(0.0, (new_job.run_at - new_job.created_at).total_seconds()),
    }
