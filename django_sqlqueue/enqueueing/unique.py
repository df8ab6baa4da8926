"""Unique jobs: an enqueue that matches an active job (unique=True) or one enqueued within
the window (unique_for) stores nothing and returns that job, marked `deduplicated`.

unique=True rides on the idempotency key's mechanics (enqueueing/keys.py): a unique index on
`unique_active`, the digest while the job is pending, failed or running, refuses a second
active job; the loser reads the winner. unique_for locks the digest's `FlowKey` row for the
rest of the transaction, which remembers the job and when its window ends.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from ..databases import QueueDatabase
from ..databases.flow_keys import lock_key, save_key
from ..models import Job
from ..rows import NewJob
from .keys import store_once


def store_unique(database: QueueDatabase, new_job: NewJob) -> Job:
    if new_job.unique_window is None:
        return _store_active_unique(database, new_job)
    key, seconds = new_job.unique_window
    alias = database.alias
    with transaction.atomic(using=alias):
        row = lock_key(database, key)
        now = timezone.now()
        if row.job_id is not None and row.until is not None and row.until > now:
            existing = Job.objects.using(alias).filter(pk=row.job_id).first()
            if existing is not None:
                existing.deduplicated = True
                return existing
        if new_job.unique_key is not None:
            job = _store_active_unique(database, new_job)
            if job.deduplicated:
                return job
        else:
            [job] = database.inserter().insert([new_job])
        row.job_id = job.pk
        row.until = now + timedelta(seconds=seconds)
        save_key(database, row, "job_id", "until")
        return job


def _store_active_unique(database: QueueDatabase, new_job: NewJob) -> Job:
    key = new_job.unique_key
    assert key is not None
    return store_once(
        database,
        new_job,
        f"unique:{key}",
        # Through the unique index, which holds only the active jobs.
        {"unique_active": key},
        retry_vanished=True,
    )
