"""The enqueue path: validate, then one INSERT in the caller's transaction."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, OperationalError, connections, transaction
from django.utils import timezone

from .conf import QueueSettings, get_settings
from .exceptions import InvalidJobError
from .insertion import Inserter, NewJob, inserter_for
from .models import Job
from .validation import (
    MAX_KEY_LENGTH,
    check_arguments,
    check_max_attempts,
    check_name,
    check_priority,
    check_queue,
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
    queue = check_queue(options.queue or handler.queue or conf.default_queue)
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
        with one_inserter_per_key(alias, new_job.idempotency_key):
            job = _store_keyed(inserter, new_job, alias)
    return job


def _store_keyed(inserter: Inserter, new_job: NewJob, alias: str) -> Job:
    """Insert, or return the job that already has this key (marked `deduplicated`)."""
    key = new_job.idempotency_key
    assert key is not None
    for attempt in range(1, DEADLOCK_RETRIES + 1):
        try:
            with transaction.atomic(using=alias):
                [job] = inserter.insert([new_job])
            return job
        except IntegrityError:
            existing = _job_with_key(key, alias)
            if existing is None:
                raise
            existing.deduplicated = True
            return existing
        except OperationalError as exc:
            # A deadlock victim in autocommit lost only its own statement: try again. Inside
            # the caller's transaction InnoDB rolled all of it back: the caller must retry.
            retry = _is_deadlock(exc, alias) and not in_callers_transaction(alias)
            if not retry or attempt == DEADLOCK_RETRIES:
                raise
    raise AssertionError("unreachable")


DEADLOCK_RETRIES = 5
#: Seconds to wait for another enqueue of the same key on MySQL before going on without.
KEY_LOCK_TIMEOUT = 2


@contextmanager
def one_inserter_per_key(alias: str, key: str) -> Iterator[None]:
    """MySQL/MariaDB: let one session at a time try to insert a given idempotency key.

    InnoDB checks a duplicate key with a shared lock that it must then upgrade; when several
    sessions wait on a key held by a transaction that rolls back, they all hold the shared
    lock and deadlock on the upgrade. A named lock around the insert makes them queue one by
    one instead. Other databases need nothing: they wait on the row and never deadlock here.
    """
    connection = connections[alias]
    if connection.vendor != "mysql":
        yield
        return
    name = "sqlqueue:" + hashlib.sha1(key.encode()).hexdigest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT GET_LOCK(%s, %s)", [name, KEY_LOCK_TIMEOUT])
        locked = cursor.fetchone()[0] == 1
    if not locked:
        # The holder may be waiting on a row this very transaction inserted (it enqueued the
        # key before): a cycle InnoDB cannot see. Go on without the named lock; the insert
        # then meets our own row at once, or waits on the row lock as it would anyway.
        yield
        return
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT RELEASE_LOCK(%s)", [name])


def _is_deadlock(exc: OperationalError, alias: str) -> bool:
    return connections[alias].vendor == "mysql" and bool(exc.args) and exc.args[0] == 1213


def in_callers_transaction(alias: str) -> bool:
    return connections[alias].in_atomic_block


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
