"""Store validated jobs: one INSERT in the caller's transaction, or one batch of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from .. import tracing
from ..conf import get_settings
from ..databases import queue_database
from ..exceptions import InvalidJobError
from ..models import Job
from ..rows import NewJob
from .batch_scope import current_batch_id
from .dependencies import store_waiting
from .keys import store_keyed
from .options import EnqueueOptions, JobDefaults, build_job
from .unique import store_unique


def store(new_job: NewJob, alias: str) -> Job:
    """INSERT one job; with an idempotency key, return the existing job instead of a second.
    Inside a `with batch(...)` block the job joins that batch (one that comes back
    deduplicated stays where it was)."""
    batch_id = current_batch_id()
    if batch_id is not None:
        new_job.batch_id = batch_id
    if tracing.recording():
        with tracing.enqueue_span([new_job]):
            return _store(new_job, alias)
    return _store(new_job, alias)


def _store(new_job: NewJob, alias: str) -> Job:
    if new_job.after:
        return store_waiting(new_job, alias)
    database = queue_database(alias)
    if new_job.idempotency_key is not None:
        return store_keyed(database, new_job)
    if new_job.unique_key is not None or new_job.unique_window is not None:
        return store_unique(database, new_job)
    [job] = database.inserter().insert([new_job])
    return job


def save_job(job: Job, alias: str) -> Job:
    """Store an unsaved Job instance built by a caller (the django.tasks backend)."""
    stored = store(NewJob.from_model(job), alias)
    if not stored.deduplicated:
        job.pk = stored.pk
        job.ref_nonce = stored.ref_nonce
        job._state.adding = False
        job._state.db = alias
    return stored


def enqueue_job(
    handler: JobDefaults,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: EnqueueOptions,
) -> Job:
    conf = get_settings()
    return store(build_job(handler, args, kwargs, options, conf=conf), conf.database)


def enqueue_jobs(
    handler: JobDefaults,
    kwargs_list: Iterable[Mapping[str, Any]],
    options: EnqueueOptions,
) -> list[Job]:
    """Validate every job first, then insert them all: one bad item stores nothing."""
    if options.idempotency_key is not None:
        raise InvalidJobError("enqueue_many does not take an idempotency_key; enqueue one by one.")
    conf = get_settings()
    now = timezone.now()
    new_jobs = []
    for index, kwargs in enumerate(kwargs_list):
        if not isinstance(kwargs, Mapping):
            raise InvalidJobError(
                f"enqueue_many takes one dict of keyword arguments per job; item {index} "
                f"is a {type(kwargs).__qualname__}."
            )
        try:
            new_jobs.append(build_job(handler, (), kwargs, options, conf=conf, now=now))
        except InvalidJobError as exc:
            raise InvalidJobError(f"enqueue_many item {index}: {exc}") from exc
    if not new_jobs:
        return []
    batch_id = current_batch_id()
    if batch_id is not None:
        for new_job in new_jobs:
            new_job.batch_id = batch_id
    alias = conf.database
    database = queue_database(alias)
    with tracing.enqueue_span(new_jobs), transaction.atomic(using=alias):
        if options.after is not None:
            # Each waits for the same jobs, with rows of its own.
            return [store_waiting(new_job, alias) for new_job in new_jobs]
        flow = handler.flow
        if flow is not None and flow.options.is_unique:
            # Unique jobs one by one, in order: a later item that repeats an earlier one (or
            # a job already queued) comes back as that job, marked `deduplicated`.
            return [store_unique(database, new_job) for new_job in new_jobs]
        extra = flow is not None or batch_id is not None
        created = database.inserter().insert(new_jobs, extra=extra)
    return created
