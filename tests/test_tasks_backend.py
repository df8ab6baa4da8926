"""The django.tasks backend in the caller's process: enqueue, results, validation, checks.

What workers do with the stored tasks is in test_tasks_backend_workers.py.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test.utils import override_settings
from django.utils import timezone

from tests.tasksapp.tasks_settings import TASKS

if not TASKS:
    pytest.skip(
        "No Tasks framework installed: Django 5.2 needs the backport (django-tasks).",
        allow_module_level=True,
    )

from django_sqlqueue import InvalidJobError, operations
from django_sqlqueue.backend import (
    InvalidTaskArguments,
    SQLQueueBackend,
    SQLQueueTask,
)
from django_sqlqueue.models import Job
from django_sqlqueue.references import id_in
from django_sqlqueue.runtime import transitions
from django_sqlqueue.tasks.compat import (
    DECORATOR_PASSES_OPTIONS,
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    task,
    task_backends,
    task_enqueued,
)
from tests.tasksapp import tasks
from tests.testapp.jobs import add as add_job
from tests.testapp.models import Order


@pytest.fixture(autouse=True)
def tasks_configured() -> None:
    """Fail, not skip, when the test settings lost the backend: CI must run these tests."""
    assert settings.TASKS == TASKS, (
        "tests/settings.py must import TASKS from tests.tasksapp.tasks_settings"
    )


@pytest.fixture
def enqueued_signals() -> Iterator[list[Any]]:
    """The task results task_enqueued was sent with, in this process."""
    received: list[Any] = []

    def receive(sender: Any, task_result: Any, **kwargs: Any) -> None:
        received.append((sender, task_result))

    task_enqueued.connect(receive)
    yield received
    task_enqueued.disconnect(receive)


SUPERSCRIPT_DIGITS = str.maketrans(
    "0123456789", "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
)
ARABIC_INDIC_DIGITS = str.maketrans("0123456789", "".join(chr(0x660 + d) for d in range(10)))
FULLWIDTH_DIGITS = str.maketrans("0123456789", "".join(chr(0xFF10 + d) for d in range(10)))


def row(result: Any, alias: str) -> Job:
    return Job.objects.using(alias).get(pk=id_in(result.id))


@pytest.mark.django_db
class TestEnqueue:
    def test_stores_a_job_row_for_the_task(self, alias: str) -> None:
        before = timezone.now()
        result = tasks.add.enqueue(2, b=3)
        job = row(result, alias)
        assert job.name == "tests.tasksapp.tasks.add" == tasks.add.module_path
        assert (job.args, job.kwargs) == ([2], {"b": 3})
        assert (job.queue, job.priority, job.backend) == ("default", 0, "default")
        assert job.status == Job.Status.PENDING
        assert job.max_attempts == 5  # SQLQUEUE's MAX_ATTEMPTS: neither task nor OPTIONS set it
        assert before <= job.run_at == job.created_at <= timezone.now()

    def test_returns_a_ready_result(self, alias: str) -> None:
        result = tasks.add.enqueue(2, 3)
        assert result.status == TaskResultStatus.READY
        assert result.id == row(result, alias).reference
        assert result.backend == "default"
        assert result.task.func is tasks.add.func
        assert result.enqueued_at == row(result, alias).created_at
        assert (result.started_at, result.finished_at, result.last_attempted_at) == (None,) * 3
        assert (result.errors, result.worker_ids, result.attempts) == ([], [], 0)
        assert not result.is_finished
        with pytest.raises(ValueError, match="not finished"):
            result.return_value  # noqa: B018

    def test_priority_queue_and_run_after_are_stored(self, alias: str) -> None:
        later = timezone.now() + timedelta(hours=3)
        result = tasks.report.using(priority=-100, run_after=later).enqueue("q3")
        job = row(result, alias)
        assert (job.queue, job.priority, job.run_at) == ("reports", -100, later)
        assert result.task.run_after == later
        assert tasks.add.using(priority=100).enqueue(1, 1).task.priority == 100

    @pytest.mark.parametrize(
        "offset",
        [timedelta(days=-400), timedelta(minutes=-5), timedelta(microseconds=-1), None],
    )
    def test_run_after_reads_back_as_enqueued(self, alias: str, offset: Any) -> None:
        """Past, future or none: the result read back equals the one enqueue() returned,
        the framework's idiom `task.enqueue() == backend.get_result(id)`."""
        when = None if offset is None else timezone.now() + offset
        result = tasks.add.using(run_after=when).enqueue(1, 2)
        read = task_backends["default"].get_result(result.id)
        assert read.task.run_after == when
        assert read == result

    def test_retry_options_come_from_the_task_then_the_backend_options(self, alias: str) -> None:
        assert row(tasks.always_fails.enqueue(), alias).max_attempts == 3
        strict = tasks.plain_failure.using(backend="strict").enqueue()
        assert (strict.backend, row(strict, alias).backend) == ("strict", "strict")
        assert row(strict, alias).max_attempts == 2

    def test_arguments_are_normalised_as_the_framework_does(self, alias: str) -> None:
        result = tasks.add.enqueue((1, 2), b={"k": (3,)})
        assert (row(result, alias).args, row(result, alias).kwargs) == ([[1, 2]], {"b": {"k": [3]}})
        assert result.args == [[1, 2]]

    @pytest.mark.parametrize(
        ("args", "kwargs", "where"),
        [
            ((datetime(2026, 1, 1),), {}, "args[0]"),
            ((), {"b": {1, 2}}, "b"),
            ((float("nan"),), {}, "args[0]"),
            ((), {"b": {"x": [2**70]}}, "b['x'][0]"),
            ((), {"b": {1: "int key"}}, "b"),
        ],
    )
    def test_arguments_that_json_would_change_store_nothing(
        self, alias: str, args: tuple[Any, ...], kwargs: dict[str, Any], where: str
    ) -> None:
        with pytest.raises(
            InvalidTaskArguments, match=rf"Task argument {re.escape(where)} cannot be"
        ):
            tasks.add.enqueue(*args, **kwargs)
        assert not Job.objects.using(alias).exists()

    def test_argument_errors_are_type_errors_and_our_invalid_job_error(self) -> None:
        with pytest.raises(TypeError) as caught:
            tasks.add.enqueue(object())
        assert isinstance(caught.value, InvalidJobError)

    def test_task_enqueued_waits_for_the_commit(
        self,
        alias: str,
        enqueued_signals: list[Any],
        django_capture_on_commit_callbacks: Any,
    ) -> None:
        with django_capture_on_commit_callbacks(using=alias, execute=True):
            result = tasks.add.enqueue(1, 2)
            assert enqueued_signals == []
        [(sender, sent)] = enqueued_signals
        assert sender is SQLQueueBackend
        assert sent.id == result.id and sent.status == TaskResultStatus.READY

    def test_aenqueue(self, alias: str) -> None:
        result = async_to_sync(tasks.add.aenqueue)(4, 5)
        assert row(result, alias).args == [4, 5]


@pytest.mark.django_db(transaction=True)
class TestTransactionalEnqueue:
    def test_rollback_leaves_no_task_and_no_signal(
        self, alias: str, enqueued_signals: list[Any]
    ) -> None:
        with pytest.raises(RuntimeError), transaction.atomic(using=alias):
            Order.objects.using(alias).create(reference="A-1")
            tasks.add.enqueue(1, 2)
            raise RuntimeError("the view failed")
        assert not Job.objects.using(alias).exists()
        assert not Order.objects.using(alias).exists()
        assert enqueued_signals == []

    def test_commit_publishes_the_task_with_the_callers_writes(
        self, alias: str, enqueued_signals: list[Any], in_other_thread: Callable[..., Any]
    ) -> None:
        with transaction.atomic(using=alias):
            Order.objects.using(alias).create(reference="A-2")
            result = tasks.add.enqueue(1, 2)
            assert in_other_thread(lambda: Job.objects.using(alias).count()) == 0
            assert enqueued_signals == []
        assert in_other_thread(lambda: Job.objects.using(alias).count()) == 1
        assert [sent.id for _, sent in enqueued_signals] == [result.id]


@pytest.mark.django_db
class TestGetResult:
    def test_reads_the_row_back(self, alias: str) -> None:
        result = tasks.add.enqueue(2, 3)
        again = tasks.add.get_result(result.id)
        assert again.id == result.id
        assert again.args == [2, 3]
        assert again.status == TaskResultStatus.READY
        assert async_to_sync(tasks.add.aget_result)(result.id).id == result.id

    def test_state_changes_show_after_refresh(self, alias: str, claim: Any) -> None:
        result = tasks.add.enqueue(2, 3)
        [claimed] = claim("worker-a")
        result.refresh()
        assert result.status == TaskResultStatus.RUNNING
        assert result.worker_ids == ["worker-a"]
        assert result.last_attempted_at is not None
        transitions.complete(claimed, 5, alias=alias)
        async_to_sync(result.arefresh)()
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.return_value == 5
        assert result.finished_at is not None

    def test_failed_attempt_awaiting_retry_is_ready_with_its_error(
        self, alias: str, claim: Any
    ) -> None:
        result = tasks.always_fails.enqueue()
        [claimed] = claim("worker-a")
        transitions.fail(
            claimed,
            "TaskBroke: boom",
            "Traceback ...\ntests.tasksapp.tasks.TaskBroke: boom\n",
            backoff=60,
            exception="tests.tasksapp.tasks.TaskBroke",
            alias=alias,
        )
        result.refresh()
        assert result.status == TaskResultStatus.READY
        [error] = result.errors
        assert error.exception_class is tasks.TaskBroke
        assert result.worker_ids == ["worker-a"]
        assert result.finished_at is None
        retry_at = tasks.always_fails.get_result(result.id).task.run_after
        assert retry_at == row(result, alias).run_at > timezone.now()

    def test_cancelled_is_failed(self, alias: str) -> None:
        result = tasks.add.enqueue(2, 3)
        operations.cancel_many([id_in(result.id)], alias=alias)
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        assert result.errors == []
        with pytest.raises(ValueError, match="failed"):
            result.return_value  # noqa: B018

    @pytest.mark.parametrize("result_id", ["999999", "abc", "-1", "1.0", "", str(2**64)])
    def test_unknown_ids(self, result_id: str) -> None:
        tasks.add.enqueue(1, 1)
        with pytest.raises(TaskResultDoesNotExist):
            task_backends["default"].get_result(result_id)

    @pytest.mark.parametrize(
        "spell",
        [
            pytest.param(lambda i: "0" + i, id="leading-zero"),
            pytest.param(lambda i: i.translate(SUPERSCRIPT_DIGITS), id="superscript"),
            pytest.param(lambda i: i.translate(ARABIC_INDIC_DIGITS), id="arabic-indic"),
            pytest.param(lambda i: i.translate(FULLWIDTH_DIGITS), id="fullwidth"),
            pytest.param(lambda i: "9" * 5000, id="beyond-int-str-digits"),
        ],
    )
    def test_only_the_issued_spelling_of_an_id_exists(self, spell: Callable[[str], str]) -> None:
        """`int()` reads "007", Arabic-Indic and fullwidth digits as 7, and refuses
        superscripts and 5,000 digits with ValueError: none of them is an id we issued."""
        result = tasks.add.enqueue(1, 1)
        backend = task_backends["default"]
        assert backend.get_result(result.id) == result
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(spell(result.id))

    def test_jobs_of_other_backends_are_not_results(self, alias: str) -> None:
        job = add_job.enqueue(1, 2)
        with pytest.raises(TaskResultDoesNotExist):
            task_backends["default"].get_result(job.reference)
        strict = tasks.add.using(backend="strict").enqueue(1, 2)
        with pytest.raises(TaskResultDoesNotExist):
            task_backends["default"].get_result(strict.id)
        assert task_backends["strict"].get_result(strict.id).backend == "strict"

    def test_another_tasks_result_is_a_mismatch(self) -> None:
        result = tasks.add.enqueue(1, 2)
        with pytest.raises(TaskResultMismatch):
            tasks.record.get_result(result.id)

    def test_a_task_that_no_longer_imports_says_so(self, alias: str) -> None:
        job = Job.objects.using(alias).create(name="tests.tasksapp.tasks.gone", backend="default")
        with pytest.raises(InvalidTask, match=r"'tests\.tasksapp\.tasks\.gone' cannot be imported"):
            task_backends["default"].get_result(str(job.pk))

    def test_results_stay_readable_when_their_queue_is_dropped(self, alias: str) -> None:
        result = tasks.report.enqueue("r")
        narrowed = {**TASKS, "default": {**TASKS["default"], "QUEUES": ["default"]}}
        with override_settings(TASKS=narrowed):
            assert task_backends["default"].get_result(result.id).task.queue_name == "reports"
            with pytest.raises(InvalidTask, match="Queue 'reports' is not valid"):
                tasks.report.enqueue("r")


class TestValidateTask:
    def test_backend_declares_what_it_supports(self) -> None:
        backend = task_backends["default"]
        assert isinstance(backend, SQLQueueBackend)
        assert backend.supports_defer and backend.supports_async_task
        assert backend.supports_get_result and backend.supports_priority
        assert type(tasks.add) is SQLQueueTask

    def test_queue_must_be_in_queues(self) -> None:
        with pytest.raises(InvalidTask, match="Queue 'mail' is not valid"):
            tasks.add.using(queue_name="mail")

    def test_priority_range(self) -> None:
        with pytest.raises(InvalidTask, match="priority"):
            tasks.add.using(priority=101)

    def test_run_after_must_be_an_aware_datetime(self) -> None:
        with pytest.raises(InvalidTask, match="aware"):
            tasks.add.using(run_after=datetime(2030, 1, 1))
        with pytest.raises(InvalidTask, match="run_after must be a datetime"):
            dataclasses.replace(tasks.add, run_after="tomorrow")

    @pytest.mark.parametrize(
        ("option", "value", "message"),
        [
            ("max_attempts", 0, "max_attempts must be between 1 and"),
            ("max_attempts", "3", "max_attempts must be an integer"),
            ("timeout", -1, "timeout must be a number of seconds above 0"),
            ("backoff", "soon", "backoff must be"),
        ],
    )
    def test_retry_options_are_checked(self, option: str, value: Any, message: str) -> None:
        with pytest.raises(InvalidTask, match=message):
            dataclasses.replace(tasks.add, **{option: value})

    def test_task_paths_longer_than_the_name_column(self) -> None:
        func = types.FunctionType(tasks.undecorated.__code__, {}, "long")
        func.__qualname__ = "x" * 300
        func.__module__ = "tests.tasksapp.tasks"
        with pytest.raises(InvalidTask, match="at most 255"):
            task(func)

    def test_nested_functions_are_refused(self) -> None:
        def local() -> None:
            pass

        with pytest.raises(InvalidTask, match="module level"):
            task(local)

    @pytest.mark.skipif(not DECORATOR_PASSES_OPTIONS, reason="@task(**options) needs 6.1+")
    @pytest.mark.django_db
    def test_decorator_takes_retry_options(self, alias: str) -> None:
        decorated = task(max_attempts=4, timeout=5, backoff=1.5)(tasks.undecorated)
        assert (decorated.max_attempts, decorated.timeout, decorated.backoff) == (4, 5, 1.5)
        assert row(decorated.enqueue(1), alias).max_attempts == 4
        with pytest.raises(InvalidTask, match="max_attempts must be between 1 and"):
            task(max_attempts=0)(tasks.undecorated)

    @pytest.mark.skipif(DECORATOR_PASSES_OPTIONS, reason="only Django 6.0 refuses them")
    def test_decorator_refuses_options_on_django_6_0(self) -> None:
        with pytest.raises(TypeError):
            task(max_attempts=4)(tasks.undecorated)


def backend_errors(options: Any = None, queues: Any = None) -> list[checks.CheckMessage]:
    params: dict[str, Any] = {"BACKEND": "django_sqlqueue.backend.SQLQueueBackend"}
    if options is not None:
        params["OPTIONS"] = options
    if queues is not None:
        params["QUEUES"] = queues
    return list(SQLQueueBackend("checked", params).check())


class TestCheck:
    def test_good_configuration(self) -> None:
        assert backend_errors({"MAX_ATTEMPTS": 3, "TIMEOUT": 10, "BACKOFF": 2}) == []
        assert all(not list(backend.check()) for backend in task_backends.all())

    def test_unknown_option(self) -> None:
        [error] = backend_errors({"RETRIES": 3})
        assert error.id == "django_sqlqueue.E101"
        assert "Unknown OPTIONS key 'RETRIES'" in error.msg
        assert "MAX_ATTEMPTS" in error.msg

    def test_bad_option_values(self) -> None:
        errors = backend_errors({"MAX_ATTEMPTS": 0, "TIMEOUT": "1m", "BACKOFF": -1})
        assert [e.id for e in errors] == ["django_sqlqueue.E101"] * 3
        assert "TASKS['checked']: OPTIONS['MAX_ATTEMPTS']" in errors[0].msg

    def test_options_must_be_a_dict(self) -> None:
        [error] = backend_errors(["MAX_ATTEMPTS"])
        assert "OPTIONS must be a dict" in error.msg

    def test_queue_names_must_fit_the_queue_column(self) -> None:
        [error] = backend_errors(queues=["default", "q" * 101])
        assert error.id == "django_sqlqueue.E103"

    @pytest.mark.parametrize(
        ("alias", "queues", "warned"),
        [
            ("default", ["mail"], True),
            ("default", ["mail", "default"], False),
            ("default", [], False),  # any queue
            ("default", None, False),  # the framework's default: ["default"]
            ("other", ["mail"], False),  # only tasks that name this backend use it
        ],
    )
    def test_queues_without_default_are_a_warning(
        self, alias: str, queues: list[str] | None, warned: bool
    ) -> None:
        params: dict[str, Any] = {"BACKEND": "django_sqlqueue.backend.SQLQueueBackend"}
        if queues is not None:
            params["QUEUES"] = queues
        messages = list(SQLQueueBackend(alias, params).check())
        assert [m.id for m in messages] == (["django_sqlqueue.W104"] if warned else [])
        if warned:
            assert isinstance(messages[0], checks.Warning)
            assert "TASKS['default']['QUEUES'] does not include 'default'" in messages[0].msg
            assert "Add 'default' to QUEUES" in messages[0].hint
            # The advice that works: left out, QUEUES accepts only "default" (Django's rule).
            assert '"QUEUES": [] to accept any queue' in messages[0].hint
            assert SQLQueueBackend(alias, {**params, "QUEUES": []}).queues == set()
            left_out = {"BACKEND": params["BACKEND"]}
            assert SQLQueueBackend(alias, left_out).queues == {"default"}

    def test_app_must_be_installed(self) -> None:
        apps_without = [app for app in settings.INSTALLED_APPS if app != "django_sqlqueue"]
        with override_settings(INSTALLED_APPS=apps_without):
            errors = backend_errors()
        assert [e.id for e in errors] == ["django_sqlqueue.E102"]
        assert errors[0].hint == "Add 'django_sqlqueue' to INSTALLED_APPS and run migrate."

    def test_without_the_app_enqueue_and_get_result_name_the_fix(self) -> None:
        """In a process where the app was never installed, Django would otherwise fail on the
        Job model (test_tasks_checks_project.py shows it in a fresh process)."""
        apps_without = [app for app in settings.INSTALLED_APPS if app != "django_sqlqueue"]
        backend = task_backends["default"]
        fix = "django_sqlqueue is not in INSTALLED_APPS. Add 'django_sqlqueue' to INSTALLED_APPS"
        with override_settings(INSTALLED_APPS=apps_without):
            with pytest.raises(ImproperlyConfigured, match=fix):
                backend.enqueue(tasks.add, (1, 2), {})
            with pytest.raises(ImproperlyConfigured, match=fix):
                backend.get_result("1")

    @pytest.mark.django_db
    def test_system_checks_report_backend_errors(self) -> None:
        bad = {**TASKS, "default": {**TASKS["default"], "OPTIONS": {"MAX_ATTEMPTS": 0}}}
        with override_settings(TASKS=bad):
            ids = [message.id for message in checks.run_checks()]
        assert "django_sqlqueue.E101" in ids

    @pytest.mark.django_db
    def test_enqueue_refuses_a_misconfigured_backend(self, alias: str) -> None:
        bad = {**TASKS, "default": {**TASKS["default"], "OPTIONS": {"MAX_ATTEMPTS": 0}}}
        with override_settings(TASKS=bad), pytest.raises(ImproperlyConfigured, match="MAX_ATT"):
            task_backends["default"].enqueue(tasks.add, (1, 2), {})
        assert not Job.objects.using(alias).exists()


@pytest.mark.django_db(transaction=True)
def test_a_failed_task_is_logged_with_its_exception(caplog: pytest.LogCaptureFixture) -> None:
    """Django sends task_finished inside its `except` block, and its own receiver logs the
    failure with sys.exc_info(): ours does the same, so the log line (and Sentry, log-based
    alerts) carries the exception and its traceback, not an ERROR with nothing attached."""
    import logging

    from django_sqlqueue.testing import run_jobs

    result = dataclasses.replace(tasks.plain_failure, max_attempts=1).enqueue()
    with caplog.at_level(logging.INFO):
        run_jobs()
    # One line per framework whose signals are connected: Django's, and the backport's where
    # it is loaded beside it.
    lines = [
        record
        for record in caplog.records
        if f"id={result.id} " in record.getMessage() and "state=FAILED" in record.getMessage()
    ]
    assert lines
    for finished in lines:
        assert finished.levelno == logging.ERROR
        assert finished.exc_info is not None and finished.exc_info[0] is ValueError
        assert "no retry options of its own" in str(finished.exc_info[1])
    assert sys.exc_info() == (None, None, None)
