"""A backend for Django's Tasks framework that stores tasks as django-sqlqueue jobs.

    TASKS = {"default": {"BACKEND": "django_sqlqueue.backend.SQLQueueBackend"}}

`Task.enqueue()` inserts one Job row in the caller's transaction; `runworkers` runs it next
to `@job` handlers, with our retries, leases and timeouts. Results are read back from the
row (`task_results` maps it). Task functions run in the worker through `task_runner`,
registered with the worker at import time of this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from .backoff import BackoffSpec, validate_backoff
from .conf import get_settings
from .exceptions import InvalidJobError
from .execution import register_runner_factory
from .task_results import ResultFields, result_fields, run_after
from .tasks_compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)
from .validation import (
    MAX_NAME_LENGTH,
    MAX_QUEUE_LENGTH,
    check_arguments,
    check_max_attempts,
    check_timeout,
    resolve_run_at,
)

if TYPE_CHECKING:
    from .models import Job

#: Backend OPTIONS: defaults for every task of the backend, overridable per task.
OPTION_FIELDS = {"MAX_ATTEMPTS": "max_attempts", "TIMEOUT": "timeout", "BACKOFF": "backoff"}
_LARGEST_ID = 2**63 - 1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SQLQueueTask(Task):
    """A Task with the retry options the framework lacks (None: the backend's default).

    `@task(max_attempts=3, timeout=30, backoff=10)` on Django 6.1+ and the backport.
    """

    max_attempts: int | None = None
    timeout: float | timedelta | None = None
    backoff: BackoffSpec | None = None


class InvalidTaskArguments(InvalidJobError, TypeError):
    """Task arguments that do not survive a JSON round trip; nothing was stored.

    A TypeError, as the framework raises for arguments it cannot serialise.
    """


@dataclasses.dataclass(frozen=True)
class TaskDefaults:
    max_attempts: int | None = None
    timeout: float | None = None
    backoff: BackoffSpec | None = None


def _check_option(field: str, value: Any) -> Any:
    """The value of a retry option, or ValueError saying what is wrong with it."""
    if field == "max_attempts":
        return None if value is None else check_max_attempts(value)
    if field == "timeout":
        return check_timeout(value)
    validate_backoff(value)
    return value


def parse_options(options: Any) -> tuple[TaskDefaults, list[str]]:
    """Backend OPTIONS as task defaults, and a message per problem (check() reports them)."""
    if not isinstance(options, Mapping):
        return TaskDefaults(), [f"OPTIONS must be a dict, not {type(options).__name__}."]
    problems = [
        f"Unknown OPTIONS key {key!r}; known keys: {', '.join(OPTION_FIELDS)}."
        for key in options
        if key not in OPTION_FIELDS
    ]
    values: dict[str, Any] = {}
    for key, field in OPTION_FIELDS.items():
        if key in options:
            try:
                values[field] = _check_option(field, options[key])
            except ValueError as exc:
                problems.append(f"OPTIONS[{key!r}]: {exc}")
    return TaskDefaults(**values), problems


def rebuilt_task(task: Task, **changes: Any) -> Task:
    """A copy of `task` with `changes`, not validated again.

    A stored job was validated when it was enqueued; its result must stay readable after,
    say, its queue is removed from QUEUES, which `Task.using()` would refuse.
    """
    clone = object.__new__(type(task))
    for field in dataclasses.fields(task):
        value = changes.get(field.name, getattr(task, field.name))
        object.__setattr__(clone, field.name, value)
    return clone


def import_task(path: str) -> Task:
    """The Task object a job's name points to; ImportError saying why if there is none."""
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImportError(f"Task {path!r} cannot be imported: {exc}") from exc
    if not isinstance(found, Task):
        raise ImportError(
            f"{path!r} is a {type(found).__name__}, not a Task: is the function decorated "
            "with @task, and bound at module level under its own name?"
        )
    return found


def stored_task(path: str, backend: str, queue: str, priority: int, when: Any) -> Task:
    """The task of a stored job, as it was enqueued."""
    return rebuilt_task(
        import_task(path), backend=backend, queue_name=queue, priority=priority, run_after=when
    )


def make_task_result(
    task: Task,
    result_id: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    backend: str,
    fields: ResultFields,
) -> TaskResult:
    result = TaskResult(
        task=task,
        id=result_id,
        status=TaskResultStatus(fields.status),
        enqueued_at=fields.enqueued_at,
        started_at=fields.started_at,
        finished_at=fields.finished_at,
        last_attempted_at=fields.last_attempted_at,
        args=list(args),
        kwargs=dict(kwargs),
        backend=backend,
        errors=[
            TaskError(exception_class_path=e.exception_class_path, traceback=e.traceback)
            for e in fields.errors
        ],
        worker_ids=fields.worker_ids,
    )
    object.__setattr__(result, "_return_value", fields.return_value)
    return result


def _normalized(value: Any, where: str) -> Any:
    try:
        return normalize_json(value)
    except (TypeError, ValueError) as exc:
        raise InvalidTaskArguments(f"Task argument {where} cannot be stored: {exc}.") from exc


def storable_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments as the framework normalises them (tuples become lists), checked to come
    back from the database unchanged; InvalidTaskArguments naming the first bad one."""
    stored_args = [_normalized(value, f"args[{i}]") for i, value in enumerate(args)]
    stored_kwargs = {key: _normalized(value, key) for key, value in kwargs.items()}
    try:
        check_arguments(stored_args, stored_kwargs)
    except InvalidJobError as exc:
        raise InvalidTaskArguments(str(exc).replace("Job argument", "Task argument")) from exc
    return stored_args, stored_kwargs


class SQLQueueBackend(BaseTaskBackend):
    task_class = SQLQueueTask

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.defaults, self.option_problems = parse_options(self.options)

    # Validation --------------------------------------------------------------------------

    def validate_task(self, task: Task) -> None:
        # Before the framework's own checks, which would fail on a non-datetime `run_after`
        # with an AttributeError.
        if task.run_after is not None and not isinstance(task.run_after, datetime):
            raise InvalidTask(f"run_after must be a datetime, got {type(task.run_after).__name__}.")
        super().validate_task(task)
        if len(task.module_path) > MAX_NAME_LENGTH:
            raise InvalidTask(
                f"Task path {task.module_path!r} is {len(task.module_path)} characters long; "
                f"django-sqlqueue stores at most {MAX_NAME_LENGTH}."
            )
        queue = task.queue_name
        if not isinstance(queue, str) or not queue or len(queue) > MAX_QUEUE_LENGTH:
            raise InvalidTask(
                f"Queue name must be a non-empty string of at most {MAX_QUEUE_LENGTH} "
                f"characters, got {queue!r}."
            )
        for field in OPTION_FIELDS.values():
            try:
                _check_option(field, getattr(task, field, None))
            except ValueError as exc:
                raise InvalidTask(f"Task {task.module_path}: {exc}") from exc

    def check(self, **kwargs: Any) -> Iterable[checks.CheckMessage]:
        where = f"TASKS[{self.alias!r}]"
        for problem in self.option_problems:
            yield checks.Error(f"{where}: {problem}", id="django_sqlqueue.E101")
        if not apps.is_installed("django_sqlqueue"):
            yield checks.Error(
                f"{where} uses SQLQueueBackend, but django_sqlqueue is not in INSTALLED_APPS.",
                hint="Add 'django_sqlqueue' to INSTALLED_APPS and run migrate.",
                id="django_sqlqueue.E102",
            )
        for queue in sorted(self.queues, key=str):
            if not isinstance(queue, str) or not queue or len(queue) > MAX_QUEUE_LENGTH:
                yield checks.Error(
                    f"{where}: queue name {queue!r} is not a non-empty string of at most "
                    f"{MAX_QUEUE_LENGTH} characters.",
                    id="django_sqlqueue.E103",
                )

    # Enqueue and results -----------------------------------------------------------------

    def option_for(self, task: Task, field: str) -> Any:
        """A retry option of `task`: its own, else the backend's OPTIONS, else None.

        Read through the option's check, which validate_task passed: a timedelta timeout
        comes back as seconds.
        """
        own = _check_option(field, getattr(task, field, None))
        return own if own is not None else getattr(self.defaults, field)

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> TaskResult:
        """Store one Job in the caller's transaction; task_enqueued is sent once it commits."""
        from .enqueueing import save_job
        from .models import Job

        self.validate_task(task)
        if self.option_problems:
            raise ImproperlyConfigured(f"TASKS[{self.alias!r}]: {self.option_problems[0]}")
        stored_args, stored_kwargs = storable_arguments(args, kwargs)
        conf = get_settings()
        now = timezone.now()
        job = Job(
            name=task.module_path,
            queue=task.queue_name,
            args=stored_args,
            kwargs=stored_kwargs,
            priority=int(task.priority),
            max_attempts=self.option_for(task, "max_attempts") or conf.max_attempts,
            run_at=resolve_run_at(task.run_after, None, now),
            created_at=now,
            updated_at=now,
            backend=self.alias,
        )
        save_job(job, conf.database)
        result = self.result_of(task, job)
        transaction.on_commit(
            partial(task_enqueued.send, type(self), task_result=result), using=conf.database
        )
        return result

    def get_result(self, result_id: str) -> TaskResult:
        from .models import Job

        text = str(result_id)
        job = None
        if text.isdigit() and int(text) <= _LARGEST_ID:
            queryset = Job.objects.using(get_settings().database)
            job = queryset.filter(pk=int(text), backend=self.alias).first()
        if job is None:
            raise TaskResultDoesNotExist(f"No task result {text!r} in backend {self.alias!r}.")
        try:
            task = stored_task(
                job.name, self.alias, job.queue, job.priority, run_after(job.run_at, job.created_at)
            )
        except ImportError as exc:
            raise InvalidTask(f"Task result {text!r}: {exc}") from exc
        return self.result_of(task, job)

    def result_of(self, task: Task, job: Job) -> TaskResult:
        fields = result_fields(
            status=job.status,
            attempts=job.attempts,
            history=job.history or [],
            enqueued_at=job.created_at,
            last_started_at=job.started_at,
            finished_at=job.finished_at,
            result=job.result,
            running_worker=job.lease_owner,
        )
        return make_task_result(task, str(job.pk), job.args, job.kwargs, self.alias, fields)


def _register() -> None:
    from .task_runner import task_runner_factory

    register_runner_factory(task_runner_factory)


_register()
