"""Every change of a job's state, in one place, used by workers, the admin and commands.

Each transition is one conditional UPDATE: it names the statuses it may leave, so it is safe
against a worker claiming or finishing the same job at that moment. Transitions out of
`running` also name the lease owner and attempt they belong to (fencing): a worker that lost
its lease cannot overwrite what the job's new owner did.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from .backoff import MAX_DELAY, BackoffSpec, compute_delay
from .claimed import ClaimedJob
from .conf import get_settings
from .models import Job
from .states import CANCELLABLE, CLAIMABLE, FINISHED, REQUEUEABLE, Status, summarize

logger = logging.getLogger("django_sqlqueue")


def jobs(alias: str | None = None) -> QuerySet[Job]:
    return Job.objects.using(alias or get_settings().database)


def clean_text(text: str) -> str:
    """Error text as every database stores it: no NUL characters, no lone surrogates."""
    text = text.replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def attempt_record(
    job: ClaimedJob,
    outcome: str,
    started_at: datetime | None,
    finished_at: datetime,
    error: str = "",
    traceback: str = "",
) -> dict[str, Any]:
    """One entry of a job's history: who ran which attempt, when, and how it ended."""
    return {
        "attempt": job.attempts,
        "worker": job.lease_owner,
        "started_at": started_at.isoformat() if started_at else None,
        "finished_at": finished_at.isoformat(),
        "outcome": outcome,
        "error": clean_text(error),
        "traceback": clean_text(traceback),
    }


def _owned(job: ClaimedJob, alias: str | None) -> QuerySet[Job]:
    """The job's row, only while `job`'s worker still holds this attempt's lease."""
    return jobs(alias).filter(
        id=job.id, status=Status.RUNNING, lease_owner=job.lease_owner, attempts=job.attempts
    )


def complete(
    job: ClaimedJob,
    result: Any,
    started_at: datetime,
    *,
    now: datetime | None = None,
    alias: str | None = None,
) -> bool:
    """running → completed. False if the lease was lost and nothing was written."""
    now = now or timezone.now()
    record = attempt_record(job, "completed", started_at, now)
    updated = _owned(job, alias).update(
        status=Status.COMPLETED,
        result=result,
        finished_at=now,
        updated_at=now,
        lease_owner="",
        lease_expires_at=None,
        history=[*job.history, record],
    )
    return bool(updated)


def fail(
    job: ClaimedJob,
    error: str,
    traceback: str = "",
    *,
    started_at: datetime | None,
    backoff: BackoffSpec | None = None,
    retry_delay: float | None = None,
    discard: bool = False,
    outcome: str = "error",
    now: datetime | None = None,
    alias: str | None = None,
) -> Status | None:
    """running → failed (retry at a backoff) or dead. None if the lease was lost.

    `retry_delay` replaces the backoff (a handler's `Retry`); `discard` goes straight to dead.
    """
    conf = get_settings()
    now = now or timezone.now()
    if discard or job.attempts >= job.max_attempts:
        status = Status.DEAD
        run_at: datetime | None = None
    else:
        status = Status.FAILED
        delay = (
            min(retry_delay, MAX_DELAY)
            if retry_delay is not None
            else compute_delay(backoff, job.attempts, conf.backoff)
        )
        run_at = now + timedelta(seconds=delay)
    record = attempt_record(job, outcome, started_at, now, error, traceback)
    changes: dict[str, Any] = {
        "status": status,
        "last_error": clean_text(error),
        "updated_at": now,
        "lease_owner": "",
        "lease_expires_at": None,
        "history": [*job.history, record],
    }
    if status == Status.DEAD:
        changes["finished_at"] = now
    else:
        changes["run_at"] = run_at
    updated = _owned(job, alias).update(**changes)
    return status if updated else None


def release(job: ClaimedJob, reason: str, *, alias: str | None = None) -> bool:
    """running → pending at once, the attempt not spent: a shutdown handing work back."""
    now = timezone.now()
    record = attempt_record(job, "released", None, now, reason)
    updated = _owned(job, alias).update(
        status=Status.PENDING,
        attempts=job.attempts - 1,
        run_at=now,
        updated_at=now,
        lease_owner="",
        lease_expires_at=None,
        history=[*job.history, record],
    )
    return bool(updated)


def renew_leases(
    worker_id: str, job_ids: Iterable[int], lease_seconds: float, *, alias: str | None = None
) -> int:
    """Push forward the leases of the jobs the worker knows it holds: it is alive.

    Only the ids it names: a claim whose reply was lost with the connection leaves rows the
    worker never saw, and those must expire and be recovered, not be renewed forever.
    """
    ids = list(job_ids)
    if not ids:
        return 0
    now = timezone.now()
    return (
        jobs(alias)
        .filter(id__in=ids, status=Status.RUNNING, lease_owner=worker_id)
        .update(lease_expires_at=now + timedelta(seconds=lease_seconds), updated_at=now)
    )


def _claimed_from(job: Job) -> ClaimedJob:
    return ClaimedJob(
        id=job.id,
        name=job.name,
        queue=job.queue,
        args=job.args,
        kwargs=job.kwargs,
        attempts=job.attempts,
        max_attempts=job.max_attempts,
        priority=job.priority,
        run_at=job.run_at,
        created_at=job.created_at,
        history=list(job.history or []),
        backend=job.backend,
        lease_owner=job.lease_owner,
    )


def _backoff_for(job: ClaimedJob) -> BackoffSpec | None:
    """The backoff the job's own runner declares (a @job's or a @task's), if any."""
    from .execution import resolve_runner

    runner = resolve_runner(job)
    return runner.backoff if runner is not None else None


def recover(
    lost: Q,
    reason: str,
    *,
    alias: str | None = None,
    limit: int = 500,
) -> dict[str, int]:
    """Fail the running jobs matching `lost` whose worker is gone, as a spent attempt.

    Each job is finished with the same fenced update a worker uses, so a worker that is in
    fact alive and finishes first wins, and two supervisors recovering at once do not both
    act on one job.
    """
    counts = {Status.FAILED.value: 0, Status.DEAD.value: 0}
    candidates = list(jobs(alias).filter(lost, status=Status.RUNNING).order_by("id")[:limit])
    for candidate in candidates:
        claimed = _claimed_from(candidate)
        status = fail(
            claimed,
            reason.format(worker=candidate.lease_owner),
            started_at=candidate.started_at,
            backoff=_backoff_for(claimed),
            outcome="lost",
            alias=alias,
        )
        if status is not None:
            counts[status.value] += 1
            if status == Status.DEAD:
                from . import signals

                signals.send(
                    signals.job_dead, claimed, error=reason.format(worker=claimed.lease_owner)
                )
            logger.warning(
                "Job %s (%s) recovered from worker %s: %s",
                candidate.id,
                candidate.name,
                candidate.lease_owner,
                status.value,
            )
    return counts


def recover_expired_leases(*, alias: str | None = None, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    return recover(
        Q(lease_expires_at__lt=now),
        "Worker {worker} stopped renewing its lease (it crashed, was killed or hung); "
        "the attempt is counted as failed.",
        alias=alias,
    )


def recover_worker(
    worker_id: str, why: str, *, running: int | None = None, alias: str | None = None
) -> dict:
    """The worker process is known to be dead: act on its jobs without waiting for leases.

    `running` is the job it was running when it died, if known: that attempt is spent (the
    job may well have caused the crash). Jobs it had claimed but not started go back to the
    queue unspent. When `running` is unknown, every job it held counts as lost.
    """
    held = Q(lease_owner=worker_id)
    if running is None:
        return recover(held, f"Worker {{worker}} was lost: {why}.", alias=alias)
    counts = recover(held & Q(id=running), f"Worker {{worker}} was lost: {why}.", alias=alias)
    released = 0
    for job in jobs(alias).filter(held, status=Status.RUNNING).exclude(id=running):
        released += release(
            _claimed_from(job),
            f"Worker {worker_id} was lost ({why}) before starting it.",
            alias=alias,
        )
    counts["released"] = released
    return counts


def cancel(ids: Iterable[int], *, alias: str | None = None) -> int:
    """pending/failed → cancelled. Running jobs are left alone (they belong to a worker)."""
    now = timezone.now()
    return (
        jobs(alias)
        .filter(id__in=list(ids), status__in=CANCELLABLE)
        .update(status=Status.CANCELLED, finished_at=now, updated_at=now)
    )


def requeue(ids: Iterable[int], *, alias: str | None = None) -> int:
    """dead/cancelled/failed/completed → pending now, with attempts reset."""
    now = timezone.now()
    return (
        jobs(alias)
        .filter(id__in=list(ids), status__in=REQUEUEABLE)
        .update(
            status=Status.PENDING,
            attempts=0,
            run_at=now,
            finished_at=None,
            result=None,
            updated_at=now,
            lease_owner="",
            lease_expires_at=None,
        )
    )


def run_now(ids: Iterable[int], *, alias: str | None = None) -> int:
    """Move run_at of waiting (pending/failed) jobs to now; attempts are kept."""
    now = timezone.now()
    return (
        jobs(alias)
        .filter(id__in=list(ids), status__in=CLAIMABLE)
        .update(run_at=now, updated_at=now)
    )


def purgeable(
    older_than: datetime | None = None,
    statuses: Sequence[str] = tuple(s.value for s in FINISHED),
    queue: str | None = None,
    alias: str | None = None,
) -> QuerySet[Job]:
    """Finished jobs that may be deleted: never pending, failed or running ones."""
    unknown = set(statuses) - {s.value for s in FINISHED}
    if unknown:
        raise ValueError(
            f"Only finished jobs can be purged ({', '.join(s.value for s in FINISHED)}); "
            f"got {', '.join(sorted(unknown))}."
        )
    queryset = jobs(alias).filter(status__in=list(statuses))
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
            count, _ = queryset.filter(id__in=ids).delete()
        deleted += count
    return deleted


def prune_completed(days: float, *, alias: str | None = None, batch_size: int = 1000) -> int:
    """One batch of the built-in pruning: completed jobs finished more than `days` ago."""
    cutoff = timezone.now() - timedelta(days=days)
    queryset = purgeable(cutoff, statuses=[Status.COMPLETED.value], alias=alias)
    return purge(queryset, batch_size=batch_size, max_batches=1)


def status_summary(queue: str | None = None, *, alias: str | None = None) -> dict[str, int]:
    queryset = jobs(alias)
    if queue:
        queryset = queryset.filter(queue=queue)
    rows = queryset.order_by().values_list("status").annotate(n=Count("id"))
    return summarize(rows)


def status_summary_by_queue(*, alias: str | None = None) -> dict[str, dict[str, int]]:
    rows = jobs(alias).order_by().values_list("queue", "status").annotate(n=Count("id"))
    grouped: dict[str, list[tuple[str, int]]] = {}
    for queue, status, count in rows:
        grouped.setdefault(queue, []).append((status, count))
    return {queue: summarize(grouped[queue]) for queue in sorted(grouped)}


#: A worker is stale once it has missed this many heartbeats.
STALE_HEARTBEATS = 3


def stale_before(now: datetime | None = None) -> datetime:
    """Heartbeats older than this mean the worker is stale (gone, hung or cut off)."""
    interval = get_settings().heartbeat_seconds * STALE_HEARTBEATS
    return (now or timezone.now()) - timedelta(seconds=interval)


def worker_rows(*, alias: str | None = None) -> list[dict[str, Any]]:
    """Worker heartbeat rows, each marked stale when it missed three heartbeats."""
    from .models import Worker

    conf = get_settings()
    cutoff = stale_before()
    rows = Worker.objects.using(alias or conf.database).values(
        "id",
        "hostname",
        "pid",
        "queues",
        "started_at",
        "last_seen_at",
        "current_job_id",
        "jobs_done",
    )
    return [{**row, "stale": row["last_seen_at"] < cutoff} for row in rows]
