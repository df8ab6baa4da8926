"""What a job will be stored as: per-call options over the handler's defaults over the
settings, every value validated before anything reaches the database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.utils import timezone

from ..conf import QueueSettings, get_settings
from ..exceptions import InvalidJobError
from ..flow.spec import FlowSpec
from ..options import JobOptions
from ..rows import NewJob
from ..validation import (
    MAX_KEY_LENGTH,
    check_after,
    check_dependency_failure,
    check_max_attempts,
    check_name,
    check_priority,
    check_queue,
    encode_arguments,
    resolve_run_at,
)


@dataclass(frozen=True)
class EnqueueOptions:
    """Per-call overrides of a job's defaults, as given to `.using(...)`."""

    queue: str | None = None
    priority: int | None = None
    run_at: datetime | None = None
    delay: timedelta | float | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None
    #: Workflows: the jobs (or their ids) this one waits for, and what it does if one of them
    #: ends dead or cancelled ("cancel", the default, or "run").
    after: Any = None
    on_dependency_failure: str | None = None


class JobDefaults(Protocol):
    """What the enqueue path reads from a handler (a `JobHandler`): its options, and its flow
    control bound to its signature."""

    options: JobOptions
    flow: FlowSpec | None

    def check_call(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Raise InvalidJobError unless the handler can be called with these arguments."""


def build_job(
    handler: JobDefaults,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: EnqueueOptions,
    *,
    conf: QueueSettings | None = None,
    now: datetime | None = None,
) -> NewJob:
    """A validated job, not yet stored; raises InvalidJobError on any bad input, naming the
    job (a project enqueues many: the message must say which)."""
    try:
        return _build_job(handler, args, kwargs, options, conf=conf, now=now)
    except InvalidJobError as exc:
        name, message = handler.options.name, str(exc)
        if repr(name) in message:
            raise
        message = message.removeprefix("Job ")  # "Job argument x …": "Job 'name': argument x …"
        raise InvalidJobError(f"Job {name!r}: {message[:1].lower()}{message[1:]}") from None


def _build_job(
    handler: JobDefaults,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: EnqueueOptions,
    *,
    conf: QueueSettings | None,
    now: datetime | None,
) -> NewJob:
    conf = conf or get_settings()
    declared = handler.options
    args_json, kwargs_json = encode_arguments(args, kwargs, conf.max_arguments_bytes)
    handler.check_call(args, kwargs)
    queue = check_queue(options.queue or declared.queue or conf.default_queue)
    priority = options.priority if options.priority is not None else declared.priority
    max_attempts = (
        options.max_attempts if options.max_attempts is not None else declared.max_attempts
    )
    key = options.idempotency_key
    if key is not None:
        check_name(key, "idempotency_key", MAX_KEY_LENGTH)
    now = now or timezone.now()
    flow = handler.flow
    unique_key = unique_window = concurrency_key = None
    if flow is not None:
        if declared.is_unique:
            if key is not None:
                raise InvalidJobError(
                    f"Job {declared.name!r} is declared unique, which already keeps "
                    "duplicates out; enqueue it without idempotency_key, or drop "
                    "unique/unique_for from its @job."
                )
            digest = flow.unique_key(args, kwargs)
            if declared.unique:
                unique_key = digest
            window = declared.unique_window
            if window is not None:
                unique_window = (f"unique:{digest}", window.total_seconds())
        concurrency_key = flow.key_for_concurrency(args, kwargs)
    after = check_after(options.after)
    run_on_failure = check_dependency_failure(options.on_dependency_failure, after)
    if after and (key is not None or unique_key is not None or unique_window is not None):
        raise InvalidJobError(
            f"Job {declared.name!r}: a job enqueued with after= cannot have an "
            "idempotency_key or be declared unique (not supported yet)."
        )
    return NewJob(
        name=declared.name,
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
        unique_key=unique_key,
        unique_window=unique_window,
        concurrency_key=concurrency_key,
        after=after,
        run_on_dependency_failure=run_on_failure,
        args_json=args_json,
        kwargs_json=kwargs_json,
    )
