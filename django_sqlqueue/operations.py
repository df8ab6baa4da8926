"""What staff do to jobs and queues, from the admin, commands or code: cancel, requeue, run now,
purge; pause and resume a queue.

The public `django_sqlqueue.cancel/requeue/run_now` (and their `_many` forms) and
`pause_queue/resume_queue` are these.

Each is one conditional UPDATE or DELETE naming the statuses it may change, so a worker
claiming or finishing the same job at that moment wins and the job is left alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from .conf import get_settings
from .databases import QueueDatabase, queue_database
from .databases.batches import finish_all
from .databases.dependencies import release_dependents, rewait_abandoned
from .databases.paused import PAUSED_TTL
from .models import Job, JobBatch, JobDependency, QueueState, Worker
from .models.flow import PAUSED_BY_LENGTH, REASON_LENGTH
from .queries import jobs
from .references import id_in, parse_reference
from .states import (
    CANCEL,
    FINISHED_VALUES,
    REQUEUE,
    RUN_NOW,
    STOP,
    UNFINISHED_VALUES,
    Status,
)
from .validation import check_note, check_queue


@dataclass(frozen=True)
class BulkResult:
    """What a bulk operation did: jobs it changed, and (cancel only) running jobs it asked to
    stop, which end `cancelled` once their handler stops."""

    changed: int
    stopping: int = 0


@dataclass(frozen=True)
class OperationResult:
    """What an operation did to one job. `applied` is False for a no-op (the job is in a status
    the operation does not apply to, or does not exist); `message` says which."""

    job_id: int
    applied: bool
    status: str | None
    message: str


def cancel_many(ids: Iterable[int], *, alias: str | None = None) -> BulkResult:
    """waiting/pending/failed → cancelled at once; running jobs are asked to stop (their
    handler sees `context.cancel_requested`, and is interrupted after CANCEL_GRACE_SECONDS).
    Jobs that wait for a cancelled job are cancelled too, unless enqueued with
    `on_dependency_failure="run"` (docs/workflows.md)."""
    ids = list(ids)
    now = timezone.now()
    cancelled = (
        jobs(alias)
        .filter(id__in=ids, status__in=CANCEL.sources)
        # lease_owner: a job parked by flow control carries the parked mark; a finished
        # job has no owner.
        .update(status=Status.CANCELLED, finished_at=now, updated_at=now, lease_owner="")
    )
    stopping = (
        jobs(alias)
        .filter(id__in=ids, status__in=STOP.sources, cancel_requested_at__isnull=True)
        .update(cancel_requested_at=now, updated_at=now)
    )
    if cancelled:
        database = _database(alias)
        # In the same transaction, if the caller has one: the jobs waiting for these.
        release_dependents(database, ids)
        # Once it commits: the batches whose last members these were.
        in_batches = set(
            jobs(alias).filter(id__in=ids, batch__isnull=False).values_list("batch_id", flat=True)
        )
        if in_batches:
            transaction.on_commit(lambda: finish_all(database, in_batches), using=database.alias)
    return BulkResult(cancelled, stopping)


def requeue_many(ids: Iterable[int], *, alias: str | None = None) -> BulkResult:
    """dead/cancelled/failed/completed → pending now, with attempts reset. Jobs cancelled
    because one of these failed (workflows) wait for it again."""
    ids = list(ids)
    now = timezone.now()
    changed = (
        jobs(alias)
        .filter(id__in=ids, status__in=REQUEUE.sources)
        .update(
            status=Status.PENDING,
            attempts=0,
            run_at=now,
            finished_at=None,
            result=None,
            updated_at=now,
            lease_owner="",
            lease_expires_at=None,
            progress=None,
            progress_message="",
            cancel_requested_at=None,
        )
    )
    if changed:
        # The jobs they abandoned by failing wait for them again, and nothing waits on an
        # edge that says they finished.
        rewait_abandoned(alias or get_settings().database, ids)
    return BulkResult(changed)


def run_now_many(ids: Iterable[int], *, alias: str | None = None) -> BulkResult:
    """Move run_at of waiting (pending/failed) jobs to now; attempts are kept."""
    now = timezone.now()
    changed = (
        jobs(alias)
        .filter(id__in=list(ids), status__in=RUN_NOW.sources)
        .update(run_at=now, updated_at=now)
    )
    return BulkResult(changed)


#: A job, its id, or its reference (references.py): a reference kept from before a failover
#: that lost its job names no job, where its id may name the job that took the id.
JobOrId = Job | int | str


def _database(alias: str | None) -> QueueDatabase:
    return queue_database(alias or get_settings().database)


def cancel(job: JobOrId, *, alias: str | None = None) -> OperationResult:
    """Cancel one job: at once if it waits, by asking its worker if it runs."""
    job_id = _id_of(job, alias)
    if job_id is None:
        return _lost(job)
    done = cancel_many([job_id], alias=alias)
    if done.changed:
        return _result(job_id, True, "Cancelled.", alias)
    if done.stopping:
        return _result(
            job_id, True, "Asked its worker to stop it; it ends cancelled when it stops.", alias
        )
    return _not_applied(job_id, "cancel", CANCEL.sources + STOP.sources, alias)


def requeue(job: JobOrId, *, alias: str | None = None) -> OperationResult:
    """Run one finished or waiting job again from scratch (attempts reset to 0)."""
    job_id = _id_of(job, alias)
    if job_id is None:
        return _lost(job)
    if requeue_many([job_id], alias=alias).changed:
        return _result(job_id, True, "Requeued: pending, due now.", alias)
    return _not_applied(job_id, "requeue", REQUEUE.sources, alias)


def run_now(job: JobOrId, *, alias: str | None = None) -> OperationResult:
    """Make one waiting job due now (its attempts are kept)."""
    job_id = _id_of(job, alias)
    if job_id is None:
        return _lost(job)
    if run_now_many([job_id], alias=alias).changed:
        return _result(job_id, True, "Due now.", alias)
    return _not_applied(job_id, "run now", RUN_NOW.sources, alias)


def _id_of(job: JobOrId, alias: str | None) -> int | None:
    """The id of the job `job` names; None for a reference that names no job."""
    if isinstance(job, Job):
        return int(job.pk)
    if isinstance(job, str):
        if parse_reference(job) is None:
            raise ValueError(f"{job!r} is not a job reference (Job.reference, e.g. '4711-3f9a…').")
        return jobs(alias).referenced(job).values_list("id", flat=True).first()
    if isinstance(job, bool) or not isinstance(job, int):
        raise TypeError(
            f"Pass a Job, a job reference (str) or a job id (int), not {type(job).__name__}."
        )
    return job


def _lost(reference: JobOrId) -> OperationResult:
    """The result for a reference that names no job (it never existed, was purged, or was
    lost with a failed-over primary)."""
    return OperationResult(id_in(reference), False, None, f"No job {reference}.")


def _status(job_id: int, alias: str | None) -> str | None:
    return jobs(alias).filter(id=job_id).values_list("status", flat=True).first()


def _result(job_id: int, applied: bool, message: str, alias: str | None) -> OperationResult:
    return OperationResult(job_id, applied, _status(job_id, alias), message)


def _not_applied(
    job_id: int, what: str, accepted: Sequence[Status], alias: str | None
) -> OperationResult:
    status = _status(job_id, alias)
    if status is None:
        return OperationResult(job_id, False, None, f"No job {job_id}.")
    if status == Status.RUNNING and what == "cancel":
        message = "Already asked to stop; it ends cancelled when its handler stops."
    else:
        allowed = ", ".join(dict.fromkeys(s.value for s in accepted))
        message = f"Nothing to do: the job is {status}; {what} applies to {allowed} jobs."
    return OperationResult(job_id, False, status, message)


def purgeable(
    older_than: datetime | None = None,
    statuses: Sequence[str] = FINISHED_VALUES,
    queue: str | None = None,
    alias: str | None = None,
) -> QuerySet[Job]:
    """Finished jobs that may be deleted: never waiting, pending, failed or running ones, nor
    a finished one that such a job waits for, nor a member of a batch that has not finished
    (workflows)."""
    unknown = set(statuses) - set(FINISHED_VALUES)
    if unknown:
        raise ValueError(
            f"Only finished jobs can be purged ({', '.join(FINISHED_VALUES)}); "
            f"got {', '.join(sorted(unknown))}."
        )
    still_needed = JobDependency.objects.filter(
        depends_on=OuterRef("pk"), job__status__in=UNFINISHED_VALUES
    )
    # A member of a batch that has not finished: its callback will count it.
    unfinished_batch = JobBatch.objects.filter(pk=OuterRef("batch_id"), finished_at__isnull=True)
    queryset = (
        jobs(alias)
        .filter(status__in=list(statuses))
        .exclude(Exists(still_needed))
        .exclude(Exists(unfinished_batch))
    )
    if older_than is not None:
        queryset = queryset.filter(finished_at__lt=older_than)
    if queue:
        queryset = queryset.filter(queue=queue)
    return queryset


def purge(queryset: QuerySet[Job], batch_size: int = 1000, max_batches: int | None = None) -> int:
    """Delete in batches by primary key, each its own short transaction."""
    alias = queryset.db
    deleted = 0
    batches = 0
    while max_batches is None or batches < max_batches:
        batches += 1
        ids = list(queryset.order_by("id").values_list("id", flat=True)[:batch_size])
        if not ids:
            return deleted
        with transaction.atomic(using=alias):
            # Filtered again: a job requeued since the read must not be deleted.
            # Their JobDependency rows go with them; only the jobs are counted.
            _, per_model = queryset.filter(id__in=ids).delete()
        deleted += per_model.get(Job._meta.label, 0)
    return deleted


def purge_batches(older_than: datetime, *, alias: str | None = None) -> int:
    """Delete the batches that finished before `older_than` and have no member left (their
    jobs purged); a batch with a member left stays, so its page still counts it."""
    members = Job.objects.filter(batch_id=OuterRef("pk"))
    children = JobBatch.objects.filter(parent_id=OuterRef("pk"))
    done = (
        JobBatch.objects.using(alias or get_settings().database)
        .filter(finished_at__lt=older_than)
        .exclude(Exists(members))
        .exclude(Exists(children))
    )
    deleted, _ = done.delete()
    return deleted


def prune_completed(days: float, *, alias: str | None = None, batch_size: int = 1000) -> int:
    """One batch of the built-in pruning: completed jobs finished more than `days` ago."""
    cutoff = timezone.now() - timedelta(days=days)
    queryset = purgeable(cutoff, statuses=[Status.COMPLETED.value], alias=alias)
    return purge(queryset, batch_size=batch_size, max_batches=1)


# Queues ------------------------------------------------------------------------------------
# A paused queue keeps its jobs and accepts new ones; once `pause_queue` returns (or, called
# inside a transaction, once that commits) no worker starts a job of it, and jobs already
# running finish normally.


def pause_queue(
    name: str, *, by: str = "", reason: str = "", wait: bool = True, using: str | None = None
) -> bool:
    """Stop workers starting jobs of queue `name`; True if it was not paused already.

    With `wait` (the default) it returns only once no worker can start a job of the queue
    any more: a worker reads the paused queues again when its reading is `PAUSED_TTL` (one
    second) old, and looks at its reading before it starts each job, so this waits until
    every reading from before the pause is that old. Inside a transaction the wait comes
    when it commits (the pause is not visible before)."""
    alias = using or get_settings().database
    queue = check_queue(name)
    by = check_note(by, "by", PAUSED_BY_LENGTH)
    reason = check_note(reason, "reason", REASON_LENGTH)
    now = timezone.now()
    with transaction.atomic(using=alias):
        state, created = (
            QueueState.objects.using(alias)
            .select_for_update()
            .get_or_create(
                queue=queue, defaults={"paused_at": now, "paused_by": by, "reason": reason}
            )
        )
        changed = created or state.paused_at is None
        if not created and state.paused_at is None:
            state.paused_at, state.paused_by, state.reason, state.updated_at = now, by, reason, now
            state.save(using=alias)
        # Paused now, or already a moment ago: readings from before that may be fresh yet.
        since = (now - (state.paused_at or now)).total_seconds()
    if wait and since < PAUSED_TTL:
        transaction.on_commit(lambda: outlast_paused_readings(alias, since), using=alias)
    return changed


def outlast_paused_readings(alias: str, since: float) -> None:
    """Wait until every worker's reading of the paused queues from before a pause `since`
    seconds old is too old to be used. Without a worker registered there is nothing to wait
    for: a worker that registers later reads the paused queues before its first claim."""
    if Worker.objects.using(alias).exists():
        time.sleep(PAUSED_TTL - since)


def resume_queue(name: str, *, using: str | None = None) -> bool:
    """Let workers claim from queue `name` again; True if it was paused."""
    alias = using or get_settings().database
    queue = check_queue(name)
    changed = (
        QueueState.objects.using(alias)
        .filter(queue=queue, paused_at__isnull=False)
        .update(paused_at=None, paused_by="", reason="", updated_at=timezone.now())
    )
    if changed:
        queue_database(alias).wake(queue)
    return bool(changed)
