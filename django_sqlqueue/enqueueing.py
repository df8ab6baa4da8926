"""The enqueue path: validate, then one INSERT in the caller's transaction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from .conf import get_settings
from .exceptions import InvalidJobError
from .models import Job
from .notify import notify_enqueued
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
    backend: str = "",
) -> Job:
    """A validated, unsaved Job; raises InvalidJobError on any bad input."""
    conf = get_settings()
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
    now = timezone.now()
    return Job(
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
        updated_at=now,
        idempotency_key=key,
        backend=backend,
    )


def save_job(job: Job, alias: str) -> Job:
    """INSERT one job; with an idempotency key, return the existing job instead of a second."""
    if job.idempotency_key is None:
        job.save(using=alias, force_insert=True)
    else:
        try:
            with transaction.atomic(using=alias):
                job.save(using=alias, force_insert=True)
        except IntegrityError:
            existing = _job_with_key(job.idempotency_key, alias)
            if existing is None:
                raise
            existing.deduplicated = True
            return existing
    notify_enqueued(alias, {job.queue})
    return job


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
    return save_job(build_job(handler, args, kwargs, options), get_settings().database)


def enqueue_jobs(
    handler: JobHandler[Any, Any],
    kwargs_list: Iterable[Mapping[str, Any]],
    options: EnqueueOptions,
    batch_size: int = 1000,
) -> list[Job]:
    """Validate every job first, then insert them all: one bad item stores nothing."""
    if options.idempotency_key is not None:
        raise InvalidJobError("enqueue_many does not take an idempotency_key; enqueue one by one.")
    jobs = []
    for index, kwargs in enumerate(kwargs_list):
        if not isinstance(kwargs, Mapping):
            raise InvalidJobError(
                f"enqueue_many takes one dict of keyword arguments per job; item {index} "
                f"is a {type(kwargs).__qualname__}."
            )
        try:
            jobs.append(build_job(handler, (), kwargs, options))
        except InvalidJobError as exc:
            raise InvalidJobError(f"enqueue_many item {index}: {exc}") from exc
    if not jobs:
        return []
    alias = get_settings().database
    with transaction.atomic(using=alias):
        created = Job.objects.using(alias).bulk_create(jobs, batch_size=batch_size)
    notify_enqueued(alias, {job.queue for job in jobs})
    return created


def enqueue(name: str, /, *args: Any, **kwargs: Any) -> Job:
    """Enqueue the job registered as `name`, for code that cannot import its handler."""
    from .registry import registry

    return registry.get(name).enqueue(*args, **kwargs)
