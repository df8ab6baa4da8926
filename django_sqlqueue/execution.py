"""Run one claimed job's code and say how it ended; recording the outcome is the worker's job.

Handlers come from `runners`: the `@job` registry by default, and any runner factory a
plug-in registers (the django.tasks backend does) for jobs it stored itself.
"""

from __future__ import annotations

import asyncio
import inspect
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .backoff import BackoffSpec
from .claimed import ClaimedJob
from .context import JobContext
from .exceptions import Discard, JobTimeout, Retry, UnknownJobError, WorkerShutdown
from .registry import JobHandler, registry
from .validation import check_json


class JobRunner(Protocol):
    """What the worker needs to know to run one kind of job."""

    timeout: float | None
    backoff: BackoffSpec | None

    def call(self, job: ClaimedJob, worker_id: str) -> Any:
        """Run the job's code and return its result; raise to fail the attempt."""

    def finished(self, job: ClaimedJob, outcome: Outcome) -> None:
        """Called after the outcome is recorded (signals, bookkeeping)."""


RunnerFactory = Callable[[ClaimedJob], "JobRunner | None"]
_factories: list[RunnerFactory] = []


def register_runner_factory(factory: RunnerFactory) -> None:
    """Let a plug-in run the jobs it recognises (the factory returns None for the others)."""
    if factory not in _factories:
        _factories.append(factory)


class HandlerRunner:
    """Runs a `@job` handler: with a JobContext first if it asked, awaited if it is async."""

    def __init__(self, handler: JobHandler[Any, Any]) -> None:
        self.handler = handler
        self.timeout = handler.timeout
        self.backoff = handler.backoff

    def call(self, job: ClaimedJob, worker_id: str) -> Any:
        args = list(job.args)
        if self.handler.takes_context:
            args.insert(0, make_context(job, worker_id))
        result = self.handler.func(*args, **job.kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        return result

    def finished(self, job: ClaimedJob, outcome: Outcome) -> None:
        return None


async def _await(awaitable: Any) -> Any:
    return await awaitable


def make_context(job: ClaimedJob, worker_id: str) -> JobContext:
    return JobContext(
        job_id=job.id,
        name=job.name,
        attempt=job.attempts,
        max_attempts=job.max_attempts,
        queue=job.queue,
        enqueued_at=job.created_at,
        worker_id=worker_id,
    )


def runner_for(job: ClaimedJob) -> JobRunner:
    for factory in _factories:
        runner = factory(job)
        if runner is not None:
            return runner
    return HandlerRunner(registry.get(job.name))


@dataclass
class Outcome:
    """How one attempt ended. `kind` is one of KINDS."""

    kind: str
    result: Any = None
    error: str = ""
    traceback: str = ""
    retry_delay: float | None = None

    KINDS = (
        "completed",
        "error",
        "retry",
        "discard",
        "timeout",
        "unknown",
        "bad_result",
        "interrupted",
    )

    @property
    def is_success(self) -> bool:
        return self.kind == "completed"

    @property
    def goes_dead(self) -> bool:
        """Outcomes that skip the remaining attempts: retrying would not help."""
        return self.kind in ("discard", "unknown", "bad_result")


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__qualname__}: {text}" if text else type(exc).__qualname__


def execute(
    job: ClaimedJob, runner: JobRunner | None, worker_id: str, timeout: float | None = None
) -> Outcome:
    """Run the attempt, turning every way a handler can end into an Outcome.

    WorkerShutdown propagates: the caller hands the job back instead of recording a failure.
    """
    if runner is None:
        return Outcome(
            "unknown",
            error=f"No handler for job {job.name!r} in this deployment (worker {worker_id}); "
            f"registered: {', '.join(registry.names()) or 'none'}.",
        )
    try:
        result = runner.call(job, worker_id)
    except WorkerShutdown:
        raise
    except JobTimeout:
        return Outcome(
            "timeout",
            error=f"Timed out after {timeout or runner.timeout or 0:g} s.",
            traceback=traceback.format_exc(),
        )
    except Retry as exc:
        return Outcome("retry", error=str(exc), retry_delay=exc.delay)
    except Discard as exc:
        return Outcome("discard", error=f"Discarded: {exc}", traceback=traceback.format_exc())
    except BaseException as exc:
        return Outcome("error", error=_describe(exc), traceback=traceback.format_exc())
    try:
        check_json(result, "return value")
    except ValueError as exc:
        return Outcome("bad_result", error=str(exc).replace("Job argument ", "The handler's "))
    return Outcome("completed", result=result)


def resolve_runner(job: ClaimedJob) -> JobRunner | None:
    try:
        return runner_for(job)
    except UnknownJobError:
        return None
