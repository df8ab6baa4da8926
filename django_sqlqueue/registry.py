"""Job names to handlers: the `@job` decorator and the registry it fills."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from .backoff import BackoffSpec, validate_backoff
from .exceptions import InvalidJobError, JobAlreadyRegistered, UnknownJobError
from .validation import (
    check_max_attempts,
    check_name,
    check_priority,
    check_queue,
    check_timeout,
)

if TYPE_CHECKING:
    from .models import Job

P = ParamSpec("P")
R = TypeVar("R")


def _where(func: Callable[..., Any]) -> str:
    """`module.qualname (file:line)`, to name both places in a duplicate-name error."""
    code = getattr(func, "__code__", None)
    location = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
    return f"{func.__module__}.{func.__qualname__}{location}"


@dataclass(frozen=True)
class EnqueueOptions:
    """Per-call overrides of a job's defaults, as given to `.using(...)`."""

    queue: str | None = None
    priority: int | None = None
    run_at: datetime | None = None
    delay: timedelta | float | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None


class JobHandler(Generic[P, R]):
    """A registered job: call it to run the function now, `.enqueue()` to run it in a worker."""

    def __init__(
        self,
        func: Callable[P, R],
        name: str,
        *,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        timeout: float | timedelta | None = None,
        backoff: BackoffSpec | None = None,
        takes_context: bool = False,
    ) -> None:
        self.func = func
        self.name = check_name(name)
        self.queue = check_queue(queue) if queue is not None else None
        self.priority = check_priority(priority) if priority is not None else None
        self.max_attempts = check_max_attempts(max_attempts) if max_attempts is not None else None
        self.timeout = check_timeout(timeout)
        try:
            validate_backoff(backoff)
        except ValueError as exc:
            raise InvalidJobError(str(exc)) from exc
        self.backoff = backoff
        self.takes_context = takes_context
        self.is_async = inspect.iscoroutinefunction(func)
        functools.update_wrapper(self, func)  # type: ignore[arg-type]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<JobHandler {self.name!r} -> {_where(self.func)}>"

    def using(self, **options: Any) -> BoundJob[P, R]:
        """Override queue, priority, run_at, delay, max_attempts or idempotency_key per call."""
        return BoundJob(self, EnqueueOptions()).using(**options)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Store one job in the caller's transaction and return it."""
        return BoundJob(self, EnqueueOptions()).enqueue(*args, **kwargs)

    def enqueue_many(self, kwargs_list: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Store one job per dict of keyword arguments, in one batch of INSERTs."""
        return BoundJob(self, EnqueueOptions()).enqueue_many(kwargs_list)


class BoundJob(Generic[P, R]):
    """A handler with per-call options fixed; made by `JobHandler.using()`."""

    def __init__(self, handler: JobHandler[P, R], options: EnqueueOptions) -> None:
        self.handler = handler
        self.options = options

    def using(self, **options: Any) -> BoundJob[P, R]:
        known = set(EnqueueOptions.__dataclass_fields__)
        unknown = sorted(set(options) - known)
        if unknown:
            raise InvalidJobError(
                f"Unknown enqueue option(s) {', '.join(unknown)}; "
                f"expected some of {', '.join(sorted(known))}."
            )
        return BoundJob(self.handler, replace(self.options, **options))

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        from .enqueueing import enqueue_job

        return enqueue_job(self.handler, args, kwargs, self.options)

    def enqueue_many(self, kwargs_list: Iterable[Mapping[str, Any]]) -> list[Job]:
        from .enqueueing import enqueue_jobs

        return enqueue_jobs(self.handler, kwargs_list, self.options)


class Registry:
    """Every `@job` of this process, by name."""

    def __init__(self) -> None:
        self._handlers: dict[str, JobHandler[Any, Any]] = {}

    def register(self, handler: JobHandler[Any, Any]) -> None:
        existing = self._handlers.get(handler.name)
        if existing is not None and _where(existing.func) != _where(handler.func):
            raise JobAlreadyRegistered(
                f"Job name {handler.name!r} is registered twice: by {_where(existing.func)} "
                f"and by {_where(handler.func)}. Give one of them another name."
            )
        self._handlers[handler.name] = handler

    def unregister(self, name: str) -> None:
        self._handlers.pop(name, None)

    def get(self, name: str) -> JobHandler[Any, Any]:
        try:
            return self._handlers[name]
        except KeyError:
            raise UnknownJobError(
                f"No job is registered under the name {name!r}. Registered: "
                f"{', '.join(sorted(self._handlers)) or 'none'}. Is the module that defines "
                f"it a `jobs.py` of an installed app, or imported at start-up?"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def names(self) -> list[str]:
        return sorted(self._handlers)


registry = Registry()


def job(
    name: str,
    *,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    timeout: float | timedelta | None = None,
    backoff: BackoffSpec | None = None,
    takes_context: bool = False,
) -> Callable[[Callable[P, R]], JobHandler[P, R]]:
    """Register the decorated function as the handler of job `name`.

    Options left out fall back to the `SQLQUEUE` settings when the job is enqueued.
    """
    if callable(name):
        raise InvalidJobError('@job needs a name: write @job("send_email"), not @job.')

    def decorate(func: Callable[P, R]) -> JobHandler[P, R]:
        handler = JobHandler(
            func,
            name,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            timeout=timeout,
            backoff=backoff,
            takes_context=takes_context,
        )
        registry.register(handler)
        return handler

    return decorate
