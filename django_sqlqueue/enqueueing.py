"""The enqueue path: validate, then one INSERT in the caller's transaction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from .conf import QueueSettings, get_settings
from .exceptions import InvalidJobError
from .insertion import NewJob, inserter_for
from .models import Job
from .validation import (
    MAX_KEY_LENGTH,
    check_arguments,
    check_max_attempts,
    check_name,
    check_priority,
    resolve_run_at,
)

if TYPE_CHECKING:
    from .registry import EnqueueOptions, JobHandler


def build_job(
    handler: JobHandler[Any, Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: EnqueueOptions,
    *,
    conf: QueueSettings | None = None,
    now: datetime | None = None,
) -> NewJob:
    """A validated job, not yet stored; raises InvalidJobError on any bad input."""
    conf = conf or get_settings()
    check_arguments(args, kwargs)
    queue = options.queue or handler.queue or conf.default_queue
    check_name(queue, "queue", 100)
    priority = options.priority if options.priority is not None else handler.priority
    max_attempts = (
        options.max_attempts if options.max_attempts is not None else handler.max_attempts
    )
    key = options.idempotency_key
    if key is not None:
        check_name(key, "idempotency_key", MAX_KEY_LENGTH)
    now = now or timezone.now()
    return NewJob(
        name=handler.name,
        queue=queue,
        args=list(args),
        kwargs=dict(kwargs),
        priority=check_priority(priority if priority is not None else conf.default_priority),
        max_attempts=check_max_attempts(
            max_attempts if max_attempts is not None else conf.max_attempts
        ),
        run_at=resolve_run_at(options.run_at, options.delay, now),
        created_at=now,
        idempotency_key=key,
    )


def store(new_job: NewJob, alias: str) -> Job:
    """INSERT one job; with an idempotency key, return the existing job instead of a second."""
    inserter = inserter_for(alias)
    if new_job.idempotency_key is None:
        [job] = inserter.insert([new_job])
    else:
        try:
            with transaction.atomic(using=alias):
                [job] = inserter.insert([new_job])
        except IntegrityError:
            existing = _job_with_key(new_job.idempotency_key, alias)
            if existing is None:
                raise
            existing.deduplicated = True
            return existing
    return job


def save_job(job: Job, alias: str) -> Job:
    """Store an unsaved Job instance built by a caller (the django.tasks backend)."""
    stored = store(NewJob.from_model(job), alias)
    if not stored.deduplicated:
        job.pk = stored.pk
        job._state.adding = False
        job._state.db = alias
    return stored


def _job_with_key(key: str, alias: str) -> Job | None:
    # A locking read sees the row another transaction just committed, even under
    # MySQL's REPEATABLE READ where a plain read would keep an older snapshot.
    with transaction.atomic(using=alias):
        return Job.objects.using(alias).select_for_update().filter(idempotency_key=key).first()


def enqueue_job(
    handler: JobHandler[Any, Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: EnqueueOptions,
) -> Job:
    conf = get_settings()
    return store(build_job(handler, args, kwargs, options, conf=conf), conf.database)


def enqueue_jobs(
    handler: JobHandler[Any, Any],
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
    alias = conf.database
    with transaction.atomic(using=alias):
        created = inserter_for(alias).insert(new_jobs)
    return created


def enqueue(name: str, /, *args: Any, **kwargs: Any) -> Job:
    """Enqueue the job registered as `name`, for code that cannot import its handler."""
    from .registry import registry

    return registry.get(name).enqueue(*args, **kwargs)
