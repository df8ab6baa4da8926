"""Every change a worker's life makes to a job's state: complete, fail, release, stop, renew,
recover. (What staff do to jobs is in `operations`.)

This module keeps the names and the rules (which status a failure leads to, when its retry is
due, what recovery does with a dead worker's jobs). The writing is the vendor's one door out
of `running` (`QueueDatabase.leave_running`, databases/exits.py): one fenced UPDATE, for one
job or a batch, that names the lease owner and attempt it belongs to, so a worker that lost
its lease cannot overwrite what the job's new owner did.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from ..attempts import WORKER_LOST, AttemptOutcome, clean_text
from ..backoff import MAX_DELAY, BackoffSpec, compute_delay
from ..conf import get_settings
from ..databases import QueueDatabase, queue_database
from ..databases.exits import result_text
from ..databases.holdings import HOLDINGS
from ..exits import Exit, completed, shape_of
from ..queries import jobs
from ..rows import ClaimedJob
from ..states import FAIL, RELEASE, STOP, Status, status_after_failure
from ..words import counted
from .reporting import tell

logger = logging.getLogger("django_sqlqueue")

#: How recovery finds a job's own backoff (a `@job`'s or a `@task`'s), if it has one.
BackoffFor = Callable[[ClaimedJob], BackoffSpec | None]

RELEASED = shape_of(RELEASE, Status.PENDING)
STOPPED = shape_of(STOP, Status.CANCELLED)
RETRY = shape_of(FAIL, Status.FAILED)
DEAD = shape_of(FAIL, Status.DEAD)


def door(alias: str | None) -> QueueDatabase:
    """The queue database whose door the jobs leave through."""
    return queue_database(alias or get_settings().database)


def complete(
    job: ClaimedJob,
    result: Any,
    *,
    now: datetime | None = None,
    alias: str | None = None,
    in_transaction: bool = False,
) -> bool:
    """running → completed. False if the lease was lost and nothing was written.

    `in_transaction`: inside the job's own transaction (`atomic=True`), which commits it."""
    exit = completed(now or timezone.now(), result_text(result))
    return bool(door(alias).leave_running((job,), exit, in_transaction=in_transaction))


def complete_many(
    results: Sequence[tuple[ClaimedJob, Any]],
    *,
    now: datetime | None = None,
    alias: str | None = None,
) -> set[int]:
    """running → completed for a batch of one worker's jobs: one statement per distinct
    result (None, the common case, is one). The ids actually recorded."""
    now = now or timezone.now()
    by_result: dict[str | None, list[ClaimedJob]] = defaultdict(list)
    for job, result in results:
        by_result[result_text(result)].append(job)
    database = door(alias)
    recorded: set[int] = set()
    for text, batch in by_result.items():
        recorded |= database.leave_running(batch, completed(now, text))
    return recorded


def fail(
    job: ClaimedJob,
    error: str,
    traceback: str = "",
    *,
    backoff: BackoffSpec | None = None,
    retry_delay: float | None = None,
    discard: bool = False,
    outcome: AttemptOutcome = AttemptOutcome.ERROR,
    exception: str = "",
    now: datetime | None = None,
    alias: str | None = None,
) -> Status | None:
    """running → failed (a retry at a backoff while attempts are left) or dead. None if the
    lease was lost and nothing was written.

    `retry_delay` replaces the backoff (a handler's `Retry`); `discard` goes straight to dead.
    `exception` is the dotted path of the exception class that ended the attempt.
    """
    now = now or timezone.now()
    status = status_after_failure(job.attempts, job.max_attempts, gives_up=discard)
    if status == Status.DEAD:
        exit = Exit(DEAD, now, outcome, error, traceback, exception)
    else:
        delay = (
            min(retry_delay, MAX_DELAY)
            if retry_delay is not None
            else compute_delay(backoff, job.attempts, get_settings().backoff)
        )
        run_at = now + timedelta(seconds=delay)
        exit = Exit(RETRY, now, outcome, error, traceback, exception, run_at=run_at)
    return status if door(alias).leave_running((job,), exit) else None


def release(job: ClaimedJob, reason: str, *, alias: str | None = None) -> bool:
    """running → pending at once, the attempt not spent: a shutdown handing work back."""
    now = timezone.now()
    exit = Exit(RELEASED, now, AttemptOutcome.RELEASED, reason, run_at=now)
    return bool(door(alias).leave_running((job,), exit))


def release_many(jobs: Sequence[ClaimedJob], reason: str, *, alias: str | None = None) -> int:
    """`release` for a batch of one worker's jobs, in one statement."""
    now = timezone.now()
    exit = Exit(RELEASED, now, AttemptOutcome.RELEASED, reason, run_at=now)
    return len(door(alias).leave_running(jobs, exit))


def stop(
    job: ClaimedJob,
    reason: str,
    *,
    exception: str = "",
    alias: str | None = None,
) -> bool:
    """running → cancelled: the attempt stopped because someone cancelled the job. Not retried.
    False if the lease was lost and nothing was written."""
    exit = Exit(STOPPED, timezone.now(), AttemptOutcome.CANCELLED, reason, "", exception)
    return bool(door(alias).leave_running((job,), exit))


def report_attempt(
    job: ClaimedJob,
    progress: tuple[int, str] | None = None,
    *,
    alias: str | None = None,
) -> bool | None:
    """Store the running attempt's progress (if given) and say whether a cancel was requested.

    None if the job is no longer this attempt's (its lease was lost). Not an exit: the job
    stays running.
    """
    owned = jobs(alias).filter(
        id=job.id, status=Status.RUNNING, lease_owner=job.lease_owner, attempts=job.attempts
    )
    if progress is not None:
        percent, message = progress
        owned.update(progress=percent, progress_message=clean_text(message)[:255])
    row = owned.values_list("cancel_requested_at", flat=True).first()
    if row is None and not owned.exists():
        return None
    return row is not None


def renew_leases(
    worker_id: str,
    job_ids: Iterable[int],
    lease_seconds: float,
    *,
    alias: str | None = None,
    now: datetime | None = None,
) -> int:
    """Push forward the leases of the jobs the worker knows it holds: it is alive.

    Only the ids it names: a claim whose reply was lost with the connection leaves rows the
    worker never saw, and those must expire and be recovered, not be renewed forever.
    """
    held = [(job_id, worker_id) for job_id in job_ids]
    return door(alias).renew_leases(held, lease_seconds, now or timezone.now()) if held else 0


def recover(
    lost: Q,
    reason: str,
    *,
    alias: str | None = None,
    limit: int = 500,
    backoff_for: BackoffFor | None = None,
) -> dict[str, int]:
    """Fail the running jobs matching `lost` whose worker is gone, as a spent attempt.

    Each job leaves through the same fenced door a worker uses, as its lease owner, so a
    worker that is in fact alive and finishes first wins, and two supervisors recovering at
    once do not both act on one job. `backoff_for` names a job's own backoff (the worker
    runtime knows the handlers); without it the settings' backoff applies. A job whose cancel
    was requested is stopped instead: its worker is gone, the job stays stopped.
    """
    counts = {Status.FAILED.value: 0, Status.DEAD.value: 0, Status.CANCELLED.value: 0}
    candidates = list(jobs(alias).filter(lost, status=Status.RUNNING).order_by("id")[:limit])
    freed: list[str] = []  # the concurrency keys whose slots the recovered jobs held
    for candidate in candidates:
        claimed = ClaimedJob.from_model(candidate)
        why = reason.format(worker=candidate.lease_owner)
        if candidate.cancel_requested_at is not None:
            if stop(claimed, f"Cancelled while running; {why}", alias=alias):
                counts[Status.CANCELLED.value] += 1
                tell(claimed, "lost:cancelled", error=why)
                freed.append(candidate.concurrency_key or "")
            continue
        status = fail(
            claimed,
            why,
            backoff=backoff_for(claimed) if backoff_for else None,
            outcome=AttemptOutcome.LOST,
            exception=WORKER_LOST,
            alias=alias,
        )
        if status is not None:
            counts[status.value] += 1
            tell(claimed, f"lost:{status.value}", error=why)
            freed.append(candidate.concurrency_key or "")
    wake_freed(alias, [key for key in freed if key])
    return counts


def wake_freed(alias: str | None, keys: Sequence[str]) -> None:
    """Wake a job held back by each concurrency slot the recovered jobs freed (their workers
    are gone and will not), instead of leaving it to its due time."""
    if keys:
        claimer = door(alias).claimer()
        for key in keys:
            claimer.wake_key(key)


def recover_expired_leases(
    *,
    alias: str | None = None,
    now: datetime | None = None,
    backoff_for: BackoffFor | None = None,
    sparing: Mapping[str, datetime | None] | None = None,
) -> dict[str, int]:
    """Recover the running jobs whose lease expired, except those of the workers in
    `sparing` (known alive, id → its last heartbeat: they could not renew, they did not die).

    A live worker's job is spared only while that worker has not beaten since the lease
    expired: a heartbeat renews every lease the worker holds before it writes `last_seen_at`,
    so a lease older than the worker's last beat is one it no longer holds (a claim whose
    reply a cut connection lost, a batch it dropped) and nobody else would ever hand back."""
    now = now or timezone.now()
    expired = Q(lease_expires_at__lt=now)
    for worker_id, last_seen in sorted((sparing or {}).items()):
        held = Q(lease_owner=worker_id)
        if last_seen is not None:
            held &= Q(lease_expires_at__gte=last_seen)
        expired &= ~held
    return recover(
        expired,
        "Worker {worker} stopped renewing its lease (it crashed, was killed or hung); "
        "the attempt is counted as failed.",
        alias=alias,
        backoff_for=backoff_for,
    )


def recover_worker(
    worker_id: str,
    why: str,
    *,
    running: int | Sequence[int] | None = None,
    alias: str | None = None,
    backoff_for: BackoffFor | None = None,
) -> dict[str, int]:
    """The worker process is known to be dead: act on its jobs without waiting for leases.

    `running` is the job, or the jobs (one per slot), it was running when it died, if known:
    those attempts are spent (a job may well have caused the crash). Jobs it had claimed but
    not started go back to the queue unspent, in one statement. When `running` is unknown,
    every job it held counts as lost.
    """
    held = Q(lease_owner=worker_id)
    if running is None:
        return recover(
            held, f"Worker {{worker}} was lost: {why}.", alias=alias, backoff_for=backoff_for
        )
    running = [running] if isinstance(running, int) else list(running)
    counts = recover(
        held & Q(id__in=running),
        f"Worker {{worker}} was lost: {why}.",
        alias=alias,
        backoff_for=backoff_for,
    )
    unstarted = [
        ClaimedJob.from_model(job)
        for job in jobs(alias).filter(held, status=Status.RUNNING).exclude(id__in=running)
    ]
    reason = f"Worker {worker_id} was lost ({why}) before starting it."
    counts["released"] = release_many(unstarted, reason, alias=alias) if unstarted else 0
    return counts


def release_stranded(
    worker_id: str, *, alias: str | None = None, now: datetime | None = None
) -> int:
    """Hand back at once the jobs the table says the live worker `worker_id` (of this
    process) runs, which it does not hold: a claim whose reply a cut connection lost, or an
    attempt whose end a failed-over primary lost (databases/holdings.py). Their attempts are
    not spent: the database cannot tell whether they ran. The number handed back.

    Two reads: the (id, attempts) of the worker's running jobs that started before the
    ledger's cutoff (a handful, through the running-lease index), then the rows of the
    stranded ones, if any; one fenced RELEASE."""
    cutoff, held = HOLDINGS.snapshot(worker_id, now or timezone.now())
    mine = jobs(alias).filter(status=Status.RUNNING, lease_owner=worker_id, started_at__lt=cutoff)
    stranded_ids = {pair for pair in mine.values_list("id", "attempts") if pair not in held}
    if not stranded_ids:
        return 0
    stranded = [
        ClaimedJob.from_model(job)
        for job in mine.filter(id__in=[job_id for job_id, _ in stranded_ids])
        if (job.id, job.attempts) in stranded_ids
    ]
    reason = (
        f"Worker {worker_id} was not running it: the database had lost the claim's reply or "
        "the attempt's end (a dropped connection, a failover); handed back unspent."
    )
    released = release_many(stranded, reason, alias=alias) if stranded else 0
    if released:
        logger.warning(
            "Worker %s: handed back %s the database says it runs but it does not hold: %s",
            worker_id,
            counted(released, "job"),
            ", ".join(job.reference for job in stranded),
        )
    return released
