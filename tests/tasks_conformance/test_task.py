"""`Task` and the `@task` decorator, in the enqueueing process: no worker involved."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.test.utils import override_settings
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.references import id_in
from tests.tasksapp.tasks_settings import TASKS

from . import tasks
from .conftest import compat


def takes_no_context(value: int) -> int:
    """Module level, so that only its missing `context` argument is wrong."""
    return value


def plain(value: int) -> int:
    return value


class TestDefinition:
    def test_the_decorator_makes_a_task_with_the_framework_defaults(self) -> None:
        assert isinstance(tasks.add, compat.Task)
        assert tasks.add.priority == 0
        assert tasks.add.queue_name == "default"
        assert tasks.add.backend == "default"
        assert tasks.add.run_after is None
        assert tasks.add.takes_context is False

    def test_name_and_module_path_come_from_the_function(self) -> None:
        assert tasks.add.name == "add"
        assert tasks.add.module_path == "tests.tasks_conformance.tasks.add"

    def test_decorator_arguments_are_kept(self) -> None:
        assert tasks.on_reports_queue.queue_name == "reports"
        assert tasks.inspect_context.takes_context is True

    def test_the_task_is_the_backends_task_class(self, backend: object) -> None:
        assert type(tasks.add) is backend.task_class  # type: ignore[attr-defined]

    def test_a_task_cannot_be_modified(self) -> None:
        with pytest.raises(dataclasses.FrozenInstanceError):
            tasks.add.priority = 5  # type: ignore[misc]

    def test_takes_context_needs_a_first_argument_named_context(self) -> None:
        with pytest.raises(compat.InvalidTask):
            compat.task(takes_context=True)(takes_no_context)

    def test_nested_functions_are_not_tasks(self) -> None:
        def nested() -> None:
            pass

        with pytest.raises(compat.InvalidTask):
            compat.task(nested)

    def test_an_unknown_backend_alias_is_a_configuration_error(self) -> None:
        with pytest.raises(ImproperlyConfigured):
            compat.task(backend="no-such-backend")(plain)


class TestUsing:
    def test_using_makes_a_new_task_and_leaves_the_original_alone(self) -> None:
        changed = tasks.add.using(priority=10)
        assert changed is not tasks.add
        assert changed.priority == 10
        assert tasks.add.priority == 0
        assert changed.func is tasks.add.func

    def test_using_changes_each_of_its_attributes(self) -> None:
        later = timezone.now() + timedelta(minutes=5)
        changed = tasks.add.using(priority=-3, queue_name="reports", run_after=later)
        assert (changed.priority, changed.queue_name, changed.run_after) == (-3, "reports", later)
        assert tasks.add.using(backend="strict").backend == "strict"

    @pytest.mark.parametrize("priority", [-100, 0, 100])
    def test_priority_bounds_are_accepted(self, priority: int) -> None:
        assert tasks.add.using(priority=priority).priority == priority

    @pytest.mark.parametrize("priority", [-101, 101, 1.5])
    def test_priority_outside_the_range_is_invalid(self, priority: float) -> None:
        with pytest.raises(compat.InvalidTask):
            tasks.add.using(priority=priority)  # type: ignore[arg-type]

    def test_a_queue_the_backend_does_not_list_is_invalid(self) -> None:
        with pytest.raises(compat.InvalidTask):
            tasks.add.using(queue_name="not-listed")
        with pytest.raises(compat.InvalidTask):  # "strict" lists only "default"
            tasks.on_reports_queue.using(backend="strict")

    def test_a_naive_run_after_is_invalid(self) -> None:
        with pytest.raises(compat.InvalidTask):
            tasks.add.using(run_after=datetime(2030, 1, 1))

    @pytest.mark.django_db
    def test_an_empty_queues_list_accepts_any_queue(self, alias: str) -> None:
        anything = {**TASKS, "default": {**TASKS["default"], "QUEUES": []}}
        with override_settings(TASKS=anything):
            result = tasks.add.using(queue_name="any-queue-at-all").enqueue(1, 2)
            assert result.task.queue_name == "any-queue-at-all"
        assert Job.objects.using(alias).get(pk=id_in(result.id)).queue == "any-queue-at-all"


@pytest.mark.django_db
class TestCall:
    def test_call_runs_the_function_here_and_stores_nothing(self, alias: str) -> None:
        assert tasks.add.call(2, 3) == 5
        assert tasks.async_add.call(2, 3) == 5
        assert not Job.objects.using(alias).exists()

    def test_acall_runs_sync_and_async_functions(self, alias: str) -> None:
        assert async_to_sync(tasks.add.acall)(2, 3) == 5
        assert async_to_sync(tasks.async_add.acall)(2, 3) == 5
        assert not Job.objects.using(alias).exists()


@pytest.mark.django_db
class TestEnqueue:
    def test_enqueue_returns_a_ready_result(self) -> None:
        before = timezone.now()
        result = tasks.echo.enqueue(1, "two", three=3)
        after = timezone.now()
        assert isinstance(result, compat.TaskResult)
        assert result.status == compat.TaskResultStatus.READY
        assert isinstance(result.id, str) and result.id
        assert result.task == tasks.echo
        assert result.backend == "default"
        assert (result.args, result.kwargs) == ([1, "two"], {"three": 3})
        assert result.enqueued_at is not None and timezone.is_aware(result.enqueued_at)
        assert before <= result.enqueued_at <= after
        assert result.started_at is None
        assert result.last_attempted_at is None
        assert result.finished_at is None
        assert (result.errors, result.worker_ids, result.attempts) == ([], [], 0)
        assert result.is_finished is False

    def test_return_value_of_an_unfinished_task_raises_value_error(self) -> None:
        result = tasks.add.enqueue(1, 2)
        with pytest.raises(ValueError):
            result.return_value  # noqa: B018

    def test_arguments_are_normalised_as_json(self) -> None:
        result = tasks.echo.enqueue((1, 2), nested={"t": (3,)})
        assert result.args == [[1, 2]]
        assert result.kwargs == {"nested": {"t": [3]}}

    def test_arguments_json_cannot_hold_are_a_type_error(self, alias: str) -> None:
        with pytest.raises(TypeError):
            tasks.echo.enqueue(object())
        assert not Job.objects.using(alias).exists()

    def test_enqueue_through_using_keeps_the_changes(self) -> None:
        later = timezone.now() + timedelta(hours=1)
        result = tasks.add.using(priority=7, queue_name="reports", run_after=later).enqueue(1, 1)
        assert (result.task.priority, result.task.queue_name) == (7, "reports")
        assert result.task.run_after == later
        again = tasks.add.get_result(result.id)
        assert (again.task.priority, again.task.queue_name) == (7, "reports")
        assert again.task.run_after == later

    def test_get_result_reads_the_result_back(self) -> None:
        result = tasks.echo.enqueue(1, k="v")
        again = tasks.echo.get_result(result.id)
        assert again.id == result.id
        assert again.status == compat.TaskResultStatus.READY
        assert (again.args, again.kwargs) == ([1], {"k": "v"})
        assert again.task.func is tasks.echo.func
        assert again.enqueued_at == result.enqueued_at

    def test_get_result_of_another_tasks_result_is_a_mismatch(self) -> None:
        result = tasks.add.enqueue(1, 2)
        with pytest.raises(compat.TaskResultMismatch):
            tasks.echo.get_result(result.id)

    def test_a_backend_other_than_default(self) -> None:
        result = tasks.add.using(backend="strict").enqueue(1, 2)
        assert result.backend == "strict"
        assert result.task.backend == "strict"
        assert tasks.add.using(backend="strict").get_result(result.id).id == result.id
