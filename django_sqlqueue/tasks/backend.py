"""A backend for Django's Tasks framework that stores tasks as django-sqlqueue jobs.

    TASKS = {"default": {"BACKEND": "django_sqlqueue.backend.SQLQueueBackend"}}

`Task.enqueue()` inserts one Job row in the caller's transaction; `runworkers` runs it next
to `@job` handlers, with our retries, leases and timeouts. Results are read back from the
row (`results` maps it). Task functions run in the worker through `runner`, which the app
registers with the workers when it starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from ..backoff import BackoffSpec, validate_backoff
from ..conf import get_settings
from ..validation import (
    MAX_NAME_LENGTH,
    MAX_QUEUE_LENGTH,
    check_max_attempts,
    check_timeout,
    resolve_run_at,
)
from .arguments import check_task_call, storable_arguments
from .compat import (
    DEFAULT_BACKEND,
    DEFAULT_QUEUE,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    signals,
)
from .results import ResultFields, result_fields, run_after

if TYPE_CHECKING:
    from ..models import Job

#: Backend OPTIONS: defaults for every task of the backend, overridable per task.
OPTION_FIELDS = {"MAX_ATTEMPTS": "max_attempts", "TIMEOUT": "timeout", "BACKOFF": "backoff"}
APP_MISSING_FIX = "Add 'django_sqlqueue' to INSTALLED_APPS and run migrate."


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SQLQueueTask(Task):
    """A Task with the retry options the framework lacks (None: the backend's default).

    `@task(max_attempts=3, timeout=30, backoff=10)` on Django 6.1+ and the backport.
    """

    max_attempts: int | None = None
    timeout: float | timedelta | None = None
    backoff: BackoffSpec | None = None


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


def load_task(path: str) -> Task:
    """The Task object a job's name points to.

    Raises what importing it raised (ModuleNotFoundError for a missing dependency, whatever
    the module raises at import), or ImportError if the name is not bound to a Task.
    """
    found = import_string(path)
    if not isinstance(found, Task):
        raise ImportError(
            f"{path!r} is a {type(found).__name__}, not a Task: is the function decorated "
            "with @task, and bound at module level under its own name?"
        )
    return found


def import_task(path: str) -> Task:
    """load_task(), with an ImportError that names the task."""
    try:
        return load_task(path)
    except ImportError as exc:
        raise ImportError(f"Task {path!r} cannot be imported: {exc}") from exc


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
    result: TaskResult = TaskResult(
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


def send_enqueued(sender: type, result: TaskResult) -> None:
    """task_enqueued, on both frameworks where the backport is loaded beside django.tasks."""
    for signal in signals("task_enqueued"):
        signal.send(sender, task_result=result)


#: The shared instance of each backend class and alias, with the TASKS entry it was made from.
_shared: dict[tuple[type, str], tuple[dict[str, Any], SQLQueueBackend]] = {}


class SQLQueueBackend(BaseTaskBackend):
    task_class = SQLQueueTask

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __new__(cls, alias: str, params: dict[str, Any]) -> SQLQueueBackend:
        """One instance per alias and TASKS entry, whichever framework's handler asks: on
        Django 6.x a library built on the backport loads the backend through
        `django_tasks.task_backends` while tasks run through `django.tasks.task_backends`.
        Both handlers pass the same dict from settings.TASKS; a new dict (override_settings)
        makes a new instance."""
        shared = _shared.get((cls, alias))
        if shared is not None and shared[0] is params:
            return shared[1]
        backend = super().__new__(cls)
        _shared[(cls, alias)] = (params, backend)
        return backend

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        if getattr(self, "_entry", None) is params:
            return  # the shared instance, configured already
        super().__init__(alias, params)
        self._entry = params
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

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return list(self._check_messages())

    def _check_messages(self) -> Iterator[checks.CheckMessage]:
        where = f"TASKS[{self.alias!r}]"
        for problem in self.option_problems:
            yield checks.Error(f"{where}: {problem}", id="django_sqlqueue.E101")
        if not apps.is_installed("django_sqlqueue"):
            yield checks.Error(self.app_missing(), hint=APP_MISSING_FIX, id="django_sqlqueue.E102")
        for queue in sorted(self.queues, key=str):
            if not isinstance(queue, str) or not queue or len(queue) > MAX_QUEUE_LENGTH:
                yield checks.Error(
                    f"{where}: queue name {queue!r} is not a non-empty string of at most "
                    f"{MAX_QUEUE_LENGTH} characters.",
                    id="django_sqlqueue.E103",
                )
        if self.alias == DEFAULT_BACKEND and self.queues and DEFAULT_QUEUE not in self.queues:
            yield checks.Warning(
                f"{where}['QUEUES'] does not include {DEFAULT_QUEUE!r}: a task that names no "
                "queue is refused when it is defined, so a library that defines its tasks on "
                "the default queue fails when it is imported.",
                hint=(
                    f'Add {DEFAULT_QUEUE!r} to QUEUES, or write "QUEUES": [] to accept any '
                    f"queue (left out, QUEUES accepts only {DEFAULT_QUEUE!r})."
                ),
                id="django_sqlqueue.W104",
            )

    # Enqueue and results -----------------------------------------------------------------

    def option_for(self, task: Task, field: str) -> Any:
        """A retry option of `task`: its own, else the backend's OPTIONS, else None.

        Read through the option's check, which validate_task passed: a timedelta timeout
        comes back as seconds.
        """
        own = _check_option(field, getattr(task, field, None))
        return own if own is not None else getattr(self.defaults, field)

    def app_missing(self) -> str:
        return (
            f"TASKS[{self.alias!r}] uses SQLQueueBackend, but django_sqlqueue is not in "
            "INSTALLED_APPS."
        )

    def require_app(self) -> None:
        """ImproperlyConfigured naming the fix, before the models are imported: without the
        app, Django would fail on the Job model with a RuntimeError about its app_label."""
        if not apps.is_installed("django_sqlqueue"):
            raise ImproperlyConfigured(f"{self.app_missing()} {APP_MISSING_FIX}")

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> TaskResult:
        """Store one Job in the caller's transaction; task_enqueued is sent once it commits."""
        self.require_app()
        from ..enqueueing.store import save_job
        from ..models import Job

        self.validate_task(task)
        if self.option_problems:
            raise ImproperlyConfigured(f"TASKS[{self.alias!r}]: {self.option_problems[0]}")
        stored_args, stored_kwargs = storable_arguments(args, kwargs)
        # Django's Task.enqueue passes any arguments on; a worker would fail on every attempt.
        check_task_call(task.func, task.module_path, task.takes_context, stored_args, stored_kwargs)
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
        transaction.on_commit(partial(send_enqueued, type(self), result), using=conf.database)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        self.require_app()
        from ..models import Job

        # The result id is the job's reference (references.py): ASCII decimal, a dash, the
        # nonce in lowercase hex; the id alone for a job stored before nonces. Any other
        # spelling ("007", fullwidth digits, which `int()` would read) names no result.
        text = str(result_id)
        queryset = Job.objects.using(get_settings().database)
        job = queryset.referenced(text).filter(backend=self.alias).first()
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
        return make_task_result(task, job.reference, job.args, job.kwargs, self.alias, fields)
