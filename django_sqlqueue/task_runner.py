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

from .claimed import ClaimedJob
from .exceptions import Discard
from .execution import Outcome
from .services import attempt_record
from .task_results import result_fields, run_after, status_after
from .tasks_compat import TaskContext, TaskResult, normalize_json, task_backends
from .tasks_compat import task_finished as task_finished_signal
from .tasks_compat import task_started as task_started_signal

if TYPE_CHECKING:
    from datetime import datetime

    from django.dispatch import Signal

    from .backend import SQLQueueBackend
    from .tasks_compat import Task

logger = logging.getLogger("django_sqlqueue")


def _send(signal: Signal, sender: type, result: TaskResult) -> None:
    """Send a framework signal; a failing receiver is logged and never fails the task."""
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
    """A backend job this worker cannot run: each attempt goes to dead at once, saying why."""

    timeout: float | None = None
    backoff = None

    def __init__(self, problem: str) -> None:
        self.problem = problem

    def call(self, job: ClaimedJob, worker_id: str) -> Any:
        raise Discard(self.problem)

    def finished(self, job: ClaimedJob, outcome: Outcome) -> None:
        return None


class TaskRunner:
    """Runs one attempt of one stored task."""

    def __init__(self, backend: SQLQueueBackend, task: Task) -> None:
        self.backend = backend
        self.task = task
        self.timeout: float | None = backend.option_for(task, "timeout")
        self.backoff = backend.option_for(task, "backoff")
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
        return make_task_result(task, str(job.id), job.args, job.kwargs, job.backend, fields)

    def call(self, job: ClaimedJob, worker_id: str) -> Any:
        self.started_at = timezone.now()
        running = self.result(job, "running", job.history)
        _send(task_started_signal, type(self.backend), running)
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

    def finished(self, job: ClaimedJob, outcome: Outcome) -> None:
        try:
            status = status_after(outcome.kind, outcome.goes_dead, job.attempts, job.max_attempts)
            entry = attempt_record(
                job,
                outcome.kind,
                self.started_at,
                timezone.now(),
                outcome.error,
                outcome.traceback,
            )
            result = self.result(job, status, [*job.history, entry], outcome.result)
        except Exception:
            logger.exception("Could not describe task result %s for task_finished", job.id)
            return
        _send(task_finished_signal, type(self.backend), result)


def task_runner_factory(job: ClaimedJob) -> TaskRunner | UnrunnableTask | None:
    """The runner of a job a SQLQueueBackend stored; None for every other job."""
    if not job.backend:
        return None
    from .backend import SQLQueueBackend, import_task

    try:
        backend = task_backends[job.backend]
    except Exception as exc:
        return UnrunnableTask(
            f"Task {job.name!r} was enqueued through TASKS[{job.backend!r}], which this "
            f"worker cannot load: {exc}"
        )
    if not isinstance(backend, SQLQueueBackend):
        return None
    try:
        return TaskRunner(backend, import_task(job.name))
    except Exception as exc:  # the worker must go on: this job fails, saying why
        return UnrunnableTask(f"{exc} (in worker {job.lease_owner})")
