"""The backend itself: its feature flags, and that validation honours them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test.utils import override_settings
from django.utils import timezone

from tests.tasksapp.tasks_settings import TASKS

from . import tasks
from .conftest import compat

LIMITED = {
    **TASKS,
    "limited": {
        "BACKEND": "tests.tasks_conformance.backends.WithoutOptionalFeatures",
        "QUEUES": [],
    },
}


def test_every_optional_feature_is_supported(backend: Any) -> None:
    assert isinstance(backend, compat.BaseTaskBackend)
    assert backend.supports_defer is True
    assert backend.supports_async_task is True
    assert backend.supports_get_result is True
    assert backend.supports_priority is True


def test_the_backend_knows_its_alias_queues_and_options(backend: Any) -> None:
    assert backend.alias == "default"
    assert backend.queues == set(TASKS["default"]["QUEUES"])  # type: ignore[arg-type]
    assert backend.options == TASKS["default"]["OPTIONS"]


def test_the_configured_backends_pass_their_checks() -> None:
    found = {backend.alias: list(backend.check()) for backend in compat.task_backends.all()}
    assert found == {alias: [] for alias in TASKS}


class TestFlagsAreHonoured:
    """A subclass that turns the flags off must refuse what they no longer promise: our
    `validate_task` adds checks, it must not drop the framework's."""

    def test_the_limited_backend_still_takes_plain_tasks(self) -> None:
        with override_settings(TASKS=LIMITED):
            assert tasks.add.using(backend="limited").backend == "limited"

    def test_priority_is_refused_without_supports_priority(self) -> None:
        with override_settings(TASKS=LIMITED), pytest.raises(compat.InvalidTask):
            tasks.add.using(backend="limited", priority=1)

    def test_run_after_is_refused_without_supports_defer(self) -> None:
        later = timezone.now() + timedelta(minutes=1)
        with override_settings(TASKS=LIMITED), pytest.raises(compat.InvalidTask):
            tasks.add.using(backend="limited", run_after=later)

    def test_async_tasks_are_refused_without_supports_async_task(self) -> None:
        with override_settings(TASKS=LIMITED), pytest.raises(compat.InvalidTask):
            tasks.async_add.using(backend="limited")


@pytest.mark.django_db(transaction=True)
def test_results_can_be_read_from_another_thread(
    backend: Any, in_other_thread: Any, alias: str
) -> None:
    """supports_get_result: readable from any thread (and process: see test_lifecycle)."""
    result = tasks.echo.enqueue("shared")
    seen = in_other_thread(lambda: backend.get_result(result.id))
    assert seen == result
