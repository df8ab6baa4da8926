"""Running a stored `@task` in a worker: the JobRunner the worker uses for backend jobs.

The worker asks every registered factory for a runner; `task_runner_factory` answers for
jobs a SQLQueueBackend stored (their `backend` column names its TASKS alias). The runner
sends the framework's `task_started` before the function runs and `task_finished` once the
outcome is recorded (once per attempt, so the two always pair up).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ..attempts import entry_for
from ..context import AttemptControl
from ..rows import ClaimedJob
from ..runtime.runner import AttemptResult, CannotRun
from .compat import TaskContext, TaskResult, normalize_json, signals, task_backends
from .results import result_fields, run_after, status_after

if TYPE_CHECKING:
    from datetime import datetime

    from ..backoff import BackoffSpec
    from .backend import SQLQueueBackend
    from .compat import Task

logger = logging.getLogger("django_sqlqueue")


def _send(name: str, sender: type, result: TaskResult) -> None:
    """Send a framework signal (on both frameworks where the backport is loaded beside
    django.tasks); a failing receiver is logged and never fails the task."""
    for signal in signals(name):
        for receiver, response in signal.send_robust(sender, task_result=result):
            if isinstance(response, Exception):
                logger.error(
                    "Receiver %r of a tasks signal raised for task result %s: %r",
                    receiver,
                    result.id,
                    response,
                    exc_info=response,
                )


class UnrunnableTask:
    """A backend job this worker cannot run: each attempt goes to dead at once, recorded as
    the exception that loading its task or backend raised (`cause`), and saying why."""

    timeout: float | None = None
    backoff: BackoffSpec | None = None
    batch_completion: bool | None = None
    atomic = False

    def __init__(self, cause: BaseException, problem: str) -> None:
        self.cause = cause
        self.problem = problem

    def call(self, job: ClaimedJob, worker_id: str, control: AttemptControl) -> Any:
        raise CannotRun(self.problem) from self.cause

    def finished(self, job: ClaimedJob, attempt: AttemptResult) -> None:
        return None


class TaskRunner:
    """Runs one attempt of one stored task."""

    def __init__(self, backend: SQLQueueBackend, task: Task) -> None:
        self.backend = backend
        self.task = task
        self.timeout: float | None = backend.option_for(task, "timeout")
        self.backoff = backend.option_for(task, "backoff")
        self.batch_completion: bool | None = None
        self.atomic = False
        self.started_at: datetime | None = None

    def result(
        self, job: ClaimedJob, status: str, history: list[Any], value: Any = None
    ) -> TaskResult:
        """The TaskResult of `job` in `status`, seen from this attempt."""
        from .backend import make_task_result, rebuilt_task

        task = rebuilt_task(
            self.task,
            backend=job.backend,
            queue_name=job.queue,
            priority=job.priority,
            run_after=run_after(job.run_at, job.created_at),
        )
        fields = result_fields(
            status=status,
            attempts=job.attempts,
            history=history,
            enqueued_at=job.created_at,
            last_started_at=self.started_at,
            finished_at=timezone.now(),
            result=value,
            running_worker=job.lease_owner,
        )
        return make_task_result(task, job.reference, job.args, job.kwargs, job.backend, fields)

    def call(self, job: ClaimedJob, worker_id: str, control: AttemptControl) -> Any:
        # The claim's time, as the row has it: get_result() later shows the same start.
        self.started_at = job.started_at or timezone.now()
        running = self.result(job, "running", job.history)
        _send("task_started", type(self.backend), running)
        args = list(job.args)
        if self.task.takes_context:
            args.insert(0, TaskContext(task_result=running))
        value = self.invoke(args, job.kwargs)
        try:
            return normalize_json(value)
        except (TypeError, ValueError):
            return value  # the worker records it as a return value that cannot be stored

    def invoke(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call the function; a coroutine function runs as the framework runs it
        (async_to_sync, so its ORM calls share the worker's connection), and is cancelled
        if the attempt is interrupted (timeout, shutdown)."""
        func = self.task.func
        if not inspect.iscoroutinefunction(func):
            return func(*args, **kwargs)
        from asgiref.sync import async_to_sync

        running: dict[str, Any] = {}

        async def main() -> Any:
            running["loop"] = asyncio.get_running_loop()
            running["task"] = asyncio.current_task()
            return await func(*args, **kwargs)

        try:
            return async_to_sync(main)()
        except BaseException:
            coroutine_task = running.get("task")
            if coroutine_task is not None and not coroutine_task.done():
                with contextlib.suppress(RuntimeError):  # its loop already closed
                    running["loop"].call_soon_threadsafe(coroutine_task.cancel)
            raise

    def finished(self, job: ClaimedJob, attempt: AttemptResult) -> None:
        try:
            status = status_after(attempt.outcome, job.attempts, job.max_attempts)
            entry = entry_for(
                job,
                attempt.outcome,
                self.started_at,
                timezone.now(),
                attempt.error,
                attempt.traceback,
                attempt.exception,
            )
            result = self.result(job, status, [*job.history, entry], attempt.result)
        except Exception:
            logger.exception("Could not describe task result %s for task_finished", job.id)
            return
        exception = attempt.raised
        if exception is None:
            _send("task_finished", type(self.backend), result)
            return
        # Django sends task_finished inside the `except` block, and its own receiver logs a
        # failure with sys.exc_info(): raised again here, the error and its traceback reach
        # that ERROR line (and Sentry, log alerts) instead of an ERROR without them.
        traceback = exception.__traceback__
        try:
            raise exception
        except BaseException:
            _send("task_finished", type(self.backend), result)
        finally:
            exception.__traceback__ = traceback


def task_runner_factory(job: ClaimedJob) -> TaskRunner | UnrunnableTask | None:
    """The runner of a job a SQLQueueBackend stored; None for every other job."""
    if not job.backend:
        return None
    from .backend import SQLQueueBackend, load_task

    try:
        backend = task_backends[job.backend]
    except Exception as exc:
        return UnrunnableTask(
            exc,
            f"Task {job.name!r} was enqueued through TASKS[{job.backend!r}], which this "
            f"worker cannot load: {exc}",
        )
    if not isinstance(backend, SQLQueueBackend):
        return None
    try:
        return TaskRunner(backend, load_task(job.name))
    except Exception as exc:  # the worker must go on: this job fails, saying why
        return UnrunnableTask(
            exc, f"Task {job.name!r} cannot be imported: {exc} (in worker {job.lease_owner})"
        )
