"""Run one claimed job's code and say how it ended; recording the outcome is the worker's job.

Runners come from factories: a plug-in (the django.tasks backend) registers one for the jobs
it stored itself; every other job runs its `@job` handler from the registry.
"""

from __future__ import annotations

import asyncio
import inspect
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Protocol

from ..attempts import AttemptOutcome, exception_path
from ..backoff import BackoffSpec
from ..conf import get_settings
from ..context import AttemptControl, JobContext
from ..databases.batches import batch_of_job
from ..databases.dependencies import results_of_dependencies
from ..exceptions import Discard, JobTimeout, Retry, UnknownJobError, WorkerShutdown
from ..registry import JobHandler, registry
from ..rows import ClaimedJob
from ..validation import check_json, check_size
from . import event_loop
from .forks import end_if_forked


class CannotRun(Exception):
    """Raised by a runner whose job's code cannot even be loaded in this worker (a task whose
    module fails to import): the attempt goes to dead at once, since retrying in the same
    deployment cannot help, and is recorded as the exception that stopped the code from
    loading, chained as this one's `__cause__`, with its traceback."""


@dataclass
class AttemptResult:
    """How one attempt ended, before it is recorded."""

    outcome: AttemptOutcome
    result: Any = None
    error: str = ""
    traceback: str = ""
    retry_delay: float | None = None
    #: Dotted path of the exception class that ended the attempt, if one did.
    exception: str = ""
    #: That exception itself, for those who report it after the attempt (the django.tasks
    #: runner sends task_finished with it in sys.exc_info(), as Django does).
    raised: BaseException | None = field(default=None, repr=False, compare=False)
    #: An atomic job's completion: True once written in the job's own transaction.
    recorded: bool | None = None

    COMPLETED: ClassVar[AttemptOutcome] = AttemptOutcome.COMPLETED
    BAD_RESULT: ClassVar[AttemptOutcome] = AttemptOutcome.BAD_RESULT

    @property
    def is_success(self) -> bool:
        return self.outcome is AttemptOutcome.COMPLETED

    @property
    def gives_up(self) -> bool:
        return self.outcome.gives_up


class JobRunner(Protocol):
    """What the worker needs to know to run one kind of job."""

    timeout: float | None
    backoff: BackoffSpec | None
    #: True: successes may be recorded in batches; None: as the BATCH_COMPLETION setting says.
    batch_completion: bool | None
    #: True: the code runs in a transaction with the job's completion (`@job(atomic=True)`).
    atomic: bool

    def call(self, job: ClaimedJob, worker_id: str, control: AttemptControl) -> Any:
        """Run the job's code and return its result; raise to fail the attempt."""

    def finished(self, job: ClaimedJob, result: AttemptResult) -> None:
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
        options = handler.options
        self.timeout = options.timeout_seconds
        self.backoff = options.backoff
        self.batch_completion = options.batch_completion
        self.atomic = options.atomic

    def call(self, job: ClaimedJob, worker_id: str, control: AttemptControl) -> Any:
        args = list(job.args)
        if self.handler.options.takes_context:
            args.insert(0, make_context(job, worker_id, control))
        result = self.handler.func(*args, **job.kwargs)
        if inspect.isawaitable(result):
            loop = event_loop.installed()
            result = loop.run(result, control) if loop else asyncio.run(_await(result))
        return result

    def finished(self, job: ClaimedJob, result: AttemptResult) -> None:
        return None


async def _await(awaitable: Any) -> Any:
    return await awaitable


def make_context(job: ClaimedJob, worker_id: str, control: AttemptControl) -> JobContext:
    return JobContext(
        job_id=job.id,
        name=job.name,
        attempt=job.attempts,
        max_attempts=job.max_attempts,
        queue=job.queue,
        enqueued_at=job.created_at,
        worker_id=worker_id,
        reference=job.reference,
        control=control,
        dependency_reader=partial(results_of_dependencies, get_settings().database, job.id),
        batch_reader=partial(batch_of_job, get_settings().database, job.id, job.batch_id),
    )


def runner_for(job: ClaimedJob) -> JobRunner:
    for factory in _factories:
        runner = factory(job)
        if runner is not None:
            return runner
    return HandlerRunner(registry.get(job.name))


def resolve_runner(job: ClaimedJob) -> JobRunner | None:
    try:
        return runner_for(job)
    except UnknownJobError:
        return None


def backoff_for(job: ClaimedJob) -> BackoffSpec | None:
    """The backoff the job's own runner declares (a @job's or a @task's), if any."""
    runner = resolve_runner(job)
    return runner.backoff if runner is not None else None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__qualname__}: {text}" if text else type(exc).__qualname__


def execute(
    job: ClaimedJob,
    runner: JobRunner | None,
    worker_id: str,
    timeout: float | None = None,
    control: AttemptControl | None = None,
) -> AttemptResult:
    """Run the attempt, turning every way a handler can end into an AttemptResult.

    WorkerShutdown propagates: the caller hands the job back instead of recording a failure.
    """
    if runner is None:
        return AttemptResult(
            AttemptOutcome.UNKNOWN,
            error=f"No handler for job {job.name!r} in this deployment (worker {worker_id}); "
            f"registered: {', '.join(registry.names()) or 'none'}. A worker knows the @job "
            "functions of the `jobs.py` modules of INSTALLED_APPS (imported at start-up while "
            "SQLQUEUE['AUTODISCOVER'] is True) and of the modules those import; a job declared "
            "elsewhere needs its module imported by one of them, or by an AppConfig.ready().",
            exception=exception_path(UnknownJobError()),
        )
    try:
        try:
            result = runner.call(job, worker_id, control or AttemptControl())
        finally:
            end_if_forked()  # a child the handler forked goes no further
    except WorkerShutdown:
        raise
    except CannotRun as exc:
        cause = exc.__cause__ or exc
        return AttemptResult(
            AttemptOutcome.UNKNOWN,
            error=str(exc),
            traceback="".join(traceback.format_exception(cause)),
            exception=exception_path(cause),
            raised=cause,
        )
    except JobTimeout as exc:
        return AttemptResult(
            AttemptOutcome.TIMEOUT,
            error=f"Timed out after {timeout or runner.timeout or 0:g} s.",
            traceback=traceback.format_exc(),
            exception=exception_path(exc),
            raised=exc,
        )
    except Retry as exc:
        return AttemptResult(
            AttemptOutcome.RETRY,
            error=str(exc),
            retry_delay=exc.delay,
            exception=exception_path(exc),
        )
    except Discard as exc:
        return AttemptResult(
            AttemptOutcome.DISCARD,
            error=f"Discarded: {exc}",
            traceback=traceback.format_exc(),
            exception=exception_path(exc),
            raised=exc,
        )
    except BaseException as exc:
        return AttemptResult(
            AttemptOutcome.ERROR,
            error=_describe(exc),
            traceback=traceback.format_exc(),
            exception=exception_path(exc),
            raised=exc,
        )
    try:
        check_result(result, get_settings().max_result_bytes)
    except TypeError as exc:
        return AttemptResult(
            AttemptOutcome.BAD_RESULT,
            error=str(exc),
            traceback=traceback.format_exc(),
            exception=exception_path(exc),
            raised=exc,
        )
    return AttemptResult(AttemptOutcome.COMPLETED, result=result)


def check_result(value: Any, max_bytes: int | None = None) -> None:
    """Raise TypeError, as a JSON serialiser would, for a return value the job's row cannot
    hold as it is — or larger than `max_bytes` as JSON (checked here, before the write: some
    databases refuse a statement that large, and would refuse it on every retry); the
    message names the part of the value that is the problem."""
    try:
        check_json(value, "return value")
        if value is not None and not isinstance(value, (bool, int, float)):
            check_size(value, "The handler's return value is", max_bytes, "MAX_RESULT_BYTES")
    except ValueError as exc:
        raise TypeError(str(exc).replace("Job argument ", "The handler's ")) from None
