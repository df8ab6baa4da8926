"""Keyed enqueue: a job with an idempotency key (or an active unique key, see flow/) is stored
once, whoever races to store it."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import IntegrityError, OperationalError, transaction

from ..databases import QueueDatabase
from ..models import Job
from ..rows import NewJob

DEADLOCK_RETRIES = 5
#: A unique job's holder may finish between our failed insert and our read of it: try again.
#: Each retry means another job of the key finished meanwhile (progress, not a spin); under
#: completions racing enqueues, 5 was seen exhausted (2 in 1,200 enqueues on PostgreSQL).
VANISHED_RETRIES = 100


def store_keyed(database: QueueDatabase, new_job: NewJob) -> Job:
    """Insert, or return the job that already has this key (marked `deduplicated`)."""
    key = new_job.idempotency_key
    assert key is not None
    return store_once(database, new_job, key, {"idempotency_key": key})


def store_once(
    database: QueueDatabase,
    new_job: NewJob,
    lock_name: str,
    holder: Mapping[str, object],
    *,
    retry_vanished: bool = False,
) -> Job:
    """Insert `new_job`, whose insert a unique index refuses while another job holds its key;
    then return that job (found by the `holder` lookup), marked `deduplicated`.
    `retry_vanished`: the holder may stop holding the key (a unique job that finished) before
    we read it: insert again."""
    alias = database.alias
    with database.key_lock(lock_name):
        if database.reads_key_before_insert:
            existing = Job.objects.using(alias).filter(**holder).first()
            if existing is not None:
                existing.deduplicated = True
                return existing
        vanished = deadlocks = 0
        while True:
            try:
                with transaction.atomic(using=alias):
                    [job] = database.inserter().insert([new_job])
                return job
            except IntegrityError:
                existing = database.key_holder(**holder)
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
                deadlocks += 1
                if not retry or deadlocks == DEADLOCK_RETRIES:
                    raise
