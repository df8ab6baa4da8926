"""Job names to handlers: the `@job` decorator and the registry it fills."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from .arguments import CallShape, call_shape
from .enqueueing.options import EnqueueOptions
from .exceptions import InvalidJobError, JobAlreadyRegistered, UnknownJobError
from .flow.spec import GATED, FlowSpec, build_spec
from .options import JobOptions

if TYPE_CHECKING:
    from .models import Job

P = ParamSpec("P")
R = TypeVar("R")

#: A plain `enqueue()`'s options (frozen, so one instance serves every call).
NO_OPTIONS = EnqueueOptions()


def _where(func: Callable[..., Any]) -> str:
    """`module.qualname (file:line)`, to name both places in a duplicate-name error."""
    code = getattr(func, "__code__", None)
    location = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
    return f"{func.__module__}.{func.__qualname__}{location}"


class JobHandler(Generic[P, R]):
    """A registered job: call it to run the function now, `.enqueue()` to run it in a worker.

    `options` is what `@job(...)` declared (`JobOptions`); `flow` its flow control bound to
    the function's signature (None when it uses none)."""

    def __init__(self, func: Callable[P, R], options: JobOptions) -> None:
        self.func = func
        self.options = options
        self.name = options.name
        self.flow: FlowSpec | None = build_spec(options, func)
        self.is_async = inspect.iscoroutinefunction(func)
        functools.update_wrapper(self, func)
        # Read on the first enqueue, not here: most processes import every handler and
        # enqueue few of them.
        self._call_shape: CallShape | None = None
        self._call_shape_read = False

    def check_call(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Raise InvalidJobError unless the handler can be called with these arguments."""
        if not self._call_shape_read:
            self._call_shape = call_shape(
                self.func, self.name, takes_context=self.options.takes_context
            )
            self._call_shape_read = True
        if self._call_shape is not None:
            self._call_shape.check(args, kwargs)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<JobHandler {self.name!r} -> {_where(self.func)}>"

    @property
    def where(self) -> str:
        """Where the function is defined, as error messages name it."""
        return _where(self.func)

    def using(self, **options: Any) -> BoundJob[P, R]:
        """Override queue, priority, run_at, delay, max_attempts or idempotency_key per call,
        or wait for other jobs (`after=[...]`, `on_dependency_failure=`: docs/workflows.md)."""
        return BoundJob(self, EnqueueOptions()).using(**options)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Store one job in the caller's transaction and return it."""
        from .enqueueing.store import enqueue_job

        return enqueue_job(self, args, kwargs, NO_OPTIONS)

    def enqueue_many(self, kwargs_list: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Store one job per dict of keyword arguments, in one batch of INSERTs."""
        return BoundJob(self, EnqueueOptions()).enqueue_many(kwargs_list)

    def prepare(self, *args: P.args, **kwargs: P.kwargs) -> PreparedJob:
        """This job with its arguments, not stored yet: a step of `django_sqlqueue.chain`."""
        return BoundJob(self, EnqueueOptions()).prepare(*args, **kwargs)


class PreparedJob:
    """A job with its arguments and options, stored by `enqueue()` (or by a chain)."""

    def __init__(
        self, bound: BoundJob[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> None:
        self.bound = bound
        self.args = tuple(args)
        self.kwargs = dict(kwargs)

    def __repr__(self) -> str:
        return f"<PreparedJob {self.bound.handler.name!r}>"

    def enqueue(self, *, after: Sequence[Job | int] = ()) -> Job:
        """Store it; `after` adds jobs it waits for to those its options name."""
        bound = self.bound
        if after:
            waits_for = bound.options.after
            if waits_for is None:
                earlier: list[Any] = []
            elif isinstance(waits_for, int) or hasattr(waits_for, "pk"):
                earlier = [waits_for]
            else:
                earlier = list(waits_for)
            bound = bound.using(after=[*earlier, *after])
        return bound.enqueue(*self.args, **self.kwargs)


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
        from .enqueueing.store import enqueue_job

        return enqueue_job(self.handler, args, kwargs, self.options)

    def enqueue_many(self, kwargs_list: Iterable[Mapping[str, Any]]) -> list[Job]:
        from .enqueueing.store import enqueue_jobs

        return enqueue_jobs(self.handler, kwargs_list, self.options)

    def prepare(self, *args: P.args, **kwargs: P.kwargs) -> PreparedJob:
        return PreparedJob(self, args, kwargs)


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
        GATED.set(handler.name, handler.options)

    def unregister(self, name: str) -> None:
        self._handlers.pop(name, None)
        GATED.set(name, None)

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


class job(JobOptions):
    """`@job("send_email", queue="mail", max_attempts=5)`: register the decorated function as
    the handler of job `name`, with these options (`JobOptions` has them all, each checked
    here). Options left out fall back to the `SQLQUEUE` settings when the job is enqueued.

    `batch_completion=True` lets a worker record this job's successes in batches (see
    docs/guarantees.md: a crashed worker then re-runs the ones not yet recorded).
    `atomic=True` runs the handler in a transaction on the queue database that also records
    its completion: its writes to that database commit exactly once.
    `cron="0 3 * * *"` makes it a recurring job, enqueued by the supervisors at each tick with
    `cron_kwargs`, in `timezone` (default: TIME_ZONE); `missed` says what happens to ticks
    missed while no supervisor ran ("latest", "skip" or "all"; see docs/schedules.md).
    `unique`, `unique_for`, `unique_by`, `concurrency`, `concurrency_key` and `rate_limit`
    are flow control (docs/flow-control.md).
    """

    def __call__(self, func: Callable[P, R]) -> JobHandler[P, R]:
        handler = JobHandler(func, self)
        registry.register(handler)
        return handler
