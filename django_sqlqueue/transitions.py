"""Every change a worker's life makes to a job's state: complete, fail, release, renew,
recover. (What staff do to jobs is in `operations`.)

Each transition is one conditional UPDATE: it names the statuses it may leave, so it is safe
against a worker claiming or finishing the same job at that moment. Transitions out of
`running` also name the lease owner and attempt they belong to (fencing): a worker that lost
its lease cannot overwrite what the job's new owner did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from . import outcomes
from .attempts import WORKER_LOST, AttemptEntry, AttemptOutcome, clean_text, entry_for
from .backoff import MAX_DELAY, BackoffSpec, compute_delay
from .conf import get_settings
from .models import Job
from .queries import jobs
from .rows import ClaimedJob
from .states import Status, status_after_failure

logger = logging.getLogger("django_sqlqueue")

#: How recovery finds a job's own backoff (a `@job`'s or a `@task`'s), if it has one.
BackoffFor = Callable[[ClaimedJob], BackoffSpec | None]


def _owned(job: ClaimedJob, alias: str | None) -> QuerySet[Job]:
    """The job's row, only while `job`'s worker still holds this attempt's lease."""
    return jobs(alias).filter(
        id=job.id, status=Status.RUNNING, lease_owner=job.lease_owner, attempts=job.attempts
    )


def _leave_running(
    job: ClaimedJob,
    status: Status,
    record: AttemptEntry,
    now: datetime,
    alias: str | None,
    **changes: Any,
) -> bool:
    """The fenced UPDATE every transition out of `running` is: the new status, the lease
    cleared, the attempt's history entry appended, and the transition's own `changes`."""
    updated = _owned(job, alias).update(
        status=status,
        updated_at=now,
        lease_owner="",
        lease_expires_at=None,
        history=[*job.history, record],
        **changes,
    )
    return bool(updated)


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
    record = entry_for(job, AttemptOutcome.COMPLETED, started_at, now)
    return _leave_running(job, Status.COMPLETED, record, now, alias, result=result, finished_at=now)


def fail(
    job: ClaimedJob,
    error: str,
    traceback: str = "",
    *,
    started_at: datetime | None,
    backoff: BackoffSpec | None = None,
    retry_delay: float | None = None,
    discard: bool = False,
    outcome: AttemptOutcome = AttemptOutcome.ERROR,
    exception: str = "",
    now: datetime | None = None,
    alias: str | None = None,
) -> Status | None:
    """running → failed (retry at a backoff) or dead. None if the lease was lost.

    `retry_delay` replaces the backoff (a handler's `Retry`); `discard` goes straight to dead.
    `exception` is the dotted path of the exception class that ended the attempt.
    """
    conf = get_settings()
    now = now or timezone.now()
    status = status_after_failure(job.attempts, job.max_attempts, gives_up=discard)
    run_at: datetime | None = None
    if status == Status.FAILED:
        delay = (
            min(retry_delay, MAX_DELAY)
            if retry_delay is not None
            else compute_delay(backoff, job.attempts, conf.backoff)
        )
        run_at = now + timedelta(seconds=delay)
    record = entry_for(job, outcome, started_at, now, error, traceback, exception)
    when = {"finished_at": now} if status == Status.DEAD else {"run_at": run_at}
    updated = _leave_running(job, status, record, now, alias, last_error=clean_text(error), **when)
    return status if updated else None


def release(job: ClaimedJob, reason: str, *, alias: str | None = None) -> bool:
    """running → pending at once, the attempt not spent: a shutdown handing work back."""
    now = timezone.now()
    record = entry_for(job, AttemptOutcome.RELEASED, None, now, reason)
    return _leave_running(
        job, Status.PENDING, record, now, alias, attempts=job.attempts - 1, run_at=now
    )


def stop(
    job: ClaimedJob,
    reason: str,
    *,
    started_at: datetime | None,
    exception: str = "",
    alias: str | None = None,
) -> bool:
    """running → cancelled: the attempt stopped because someone cancelled the job. Not retried.
    False if the lease was lost and nothing was written."""
    now = timezone.now()
    record = entry_for(job, AttemptOutcome.CANCELLED, started_at, now, reason, "", exception)
    return _leave_running(
        job, Status.CANCELLED, record, now, alias, last_error=clean_text(reason), finished_at=now
    )


def report_attempt(
    job: ClaimedJob,
    progress: tuple[int, str] | None = None,
    *,
    alias: str | None = None,
) -> bool | None:
    """Store the running attempt's progress (if given) and say whether a cancel was requested.

    None if the job is no longer this attempt's (its lease was lost).
    """
    owned = _owned(job, alias)
    if progress is not None:
        percent, message = progress
        owned.update(progress=percent, progress_message=clean_text(message)[:255])
    row = owned.values_list("cancel_requested_at", flat=True).first()
    if row is None and not owned.exists():
        return None
    return row is not None


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


def recover(
    lost: Q,
    reason: str,
    *,
    alias: str | None = None,
    limit: int = 500,
    backoff_for: BackoffFor | None = None,
) -> dict[str, int]:
    """Fail the running jobs matching `lost` whose worker is gone, as a spent attempt.

    Each job is finished with the same fenced update a worker uses, so a worker that is in
    fact alive and finishes first wins, and two supervisors recovering at once do not both
    act on one job. `backoff_for` names a job's own backoff (the worker runtime knows the
    handlers); without it the settings' backoff applies.
    """
    counts = {Status.FAILED.value: 0, Status.DEAD.value: 0, Status.CANCELLED.value: 0}
    candidates = list(jobs(alias).filter(lost, status=Status.RUNNING).order_by("id")[:limit])
    for candidate in candidates:
        claimed = ClaimedJob.from_model(candidate)
        if candidate.cancel_requested_at is not None:
            # It was being cancelled: the worker is gone, the job stays stopped.
            why = reason.format(worker=candidate.lease_owner)
            if stop(claimed, f"Cancelled while running; {why}", started_at=None, alias=alias):
                counts[Status.CANCELLED.value] += 1
                outcomes.attempt_ended(claimed, outcomes.CANCELLED, None, why)
            continue
        status = fail(
            claimed,
            reason.format(worker=candidate.lease_owner),
            started_at=candidate.started_at,
            backoff=backoff_for(claimed) if backoff_for else None,
            outcome=AttemptOutcome.LOST,
            exception=WORKER_LOST,
            alias=alias,
        )
        if status is not None:
            counts[status.value] += 1
            why = reason.format(worker=claimed.lease_owner)
            outcomes.attempt_ended(claimed, outcomes.LOST, None, why)
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


def recover_expired_leases(
    *,
    alias: str | None = None,
    now: datetime | None = None,
    backoff_for: BackoffFor | None = None,
) -> dict[str, int]:
    now = now or timezone.now()
    return recover(
        Q(lease_expires_at__lt=now),
        "Worker {worker} stopped renewing its lease (it crashed, was killed or hung); "
        "the attempt is counted as failed.",
        alias=alias,
        backoff_for=backoff_for,
    )


def recover_worker(
    worker_id: str,
    why: str,
    *,
    running: int | None = None,
    alias: str | None = None,
    backoff_for: BackoffFor | None = None,
) -> dict[str, int]:
    """The worker process is known to be dead: act on its jobs without waiting for leases.

    `running` is the job it was running when it died, if known: that attempt is spent (the
    job may well have caused the crash). Jobs it had claimed but not started go back to the
    queue unspent. When `running` is unknown, every job it held counts as lost.
    """
    held = Q(lease_owner=worker_id)
    if running is None:
        return recover(
            held, f"Worker {{worker}} was lost: {why}.", alias=alias, backoff_for=backoff_for
        )
    counts = recover(
        held & Q(id=running),
        f"Worker {{worker}} was lost: {why}.",
        alias=alias,
        backoff_for=backoff_for,
    )
    released = 0
    for job in jobs(alias).filter(held, status=Status.RUNNING).exclude(id=running):
        released += release(
            ClaimedJob.from_model(job),
            f"Worker {worker_id} was lost ({why}) before starting it.",
            alias=alias,
        )
    counts["released"] = released
    return counts
