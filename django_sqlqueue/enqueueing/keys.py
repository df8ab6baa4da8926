"""Keyed enqueue: a job with an idempotency key (or an active unique key, see flow/) is stored
once, whoever races to store it."""

from __future__ import annotations

from collections.abc import Callable

from django.db import IntegrityError, OperationalError, transaction

from ..databases import QueueDatabase
from ..models import Job
from ..rows import NewJob

DEADLOCK_RETRIES = 5
#: A unique job's holder may finish between our failed insert and our read of it: try again.
VANISHED_RETRIES = 5


def store_keyed(database: QueueDatabase, new_job: NewJob) -> Job:
    """Insert, or return the job that already has this key (marked `deduplicated`)."""
    key = new_job.idempotency_key
    assert key is not None
    return store_once(database, new_job, key, lambda alias: _job_with_key(key, alias))


def store_once(
    database: QueueDatabase,
    new_job: NewJob,
    lock_name: str,
    find: Callable[[str], Job | None],
    *,
    retry_vanished: bool = False,
) -> Job:
    """Insert `new_job`, whose insert a unique index refuses while another job holds its key;
    then return that job (`find`), marked `deduplicated`. `retry_vanished`: the holder may
    stop holding the key (a unique job that finished) before we read it: insert again."""
    alias = database.alias
    with database.key_lock(lock_name):
        vanished = 0
        for attempt in range(1, DEADLOCK_RETRIES + 1):
            try:
                with transaction.atomic(using=alias):
                    [job] = database.inserter().insert([new_job])
                return job
            except IntegrityError:
                existing = find(alias)
                if existing is None:
                    vanished += 1
                    if retry_vanished and vanished < VANISHED_RETRIES:
                        continue
                    raise
                existing.deduplicated = True
                return existing
            except OperationalError as exc:
                # A deadlock victim in autocommit lost only its own statement: try again.
                # Inside the caller's transaction the whole transaction was rolled back: the
                # caller must retry.
                retry = database.is_deadlock(exc) and not database.connection.in_atomic_block
                if not retry or attempt == DEADLOCK_RETRIES:
                    raise
    raise AssertionError("unreachable")


def _job_with_key(key: str, alias: str) -> Job | None:
    return locked_first(alias, idempotency_key=key)


def locked_first(alias: str, **lookup: object) -> Job | None:
    # A locking read sees the row another transaction just committed, even under
    # MySQL's REPEATABLE READ where a plain read would keep an older snapshot.
    with transaction.atomic(using=alias):
        return Job.objects.using(alias).select_for_update().filter(**lookup).first()
