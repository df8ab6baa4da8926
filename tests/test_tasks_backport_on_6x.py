"""Django 6.x with the django-tasks backport installed beside `django.tasks`, as in a project
with a library built on the backport (Wagtail imports `django_tasks` on every Django).

Both frameworks read the same TASKS: whichever loads the backend gets the same instance, a
task the backport's decorator defines is one of ours, and our signals reach the receivers
connected on either framework's signals, in the enqueueing process and in real workers.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import pytest
from django.db import transaction
from django.test.utils import override_settings

if django.VERSION < (6, 0) or importlib.util.find_spec("django_tasks") is None:
    pytest.skip(
        "Needs Django 6.x with the django-tasks backport installed (the 6.1 test stack has it).",
        allow_module_level=True,
    )

import django.tasks
import django_tasks
from django.tasks.signals import task_enqueued as core_enqueued

from django_sqlqueue.backend import SQLQueueBackend, SQLQueueTask
from django_sqlqueue.models import Job
from django_sqlqueue.references import id_in
from django_sqlqueue.tasks.compat import TaskResultStatus
from tests.tasksapp import backport_client
from tests.tasksapp.backport_client import BACKPORT_PREFIX
from tests.tasksapp.recorders import SIGNAL_PREFIX
from tests.tasksapp.tasks_settings import TASKS
from tests.testapp.models import Execution

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh_tasks() -> Iterator[dict[str, Any]]:
    """A TASKS equal to the test settings' but a new dict: both frameworks' handlers start
    empty, so a test chooses which one loads the backend first."""
    fresh = {alias: dict(entry) for alias, entry in TASKS.items()}
    with override_settings(TASKS=fresh):
        yield fresh


@pytest.mark.parametrize("first", ["django.tasks", "django_tasks"])
def test_one_backend_instance_whichever_framework_loads_it(
    fresh_tasks: dict[str, Any], first: str
) -> None:
    frameworks = [django.tasks, django_tasks]
    if first == "django_tasks":
        frameworks.reverse()
    loaded = [framework.task_backends["default"] for framework in frameworks]
    assert isinstance(loaded[0], SQLQueueBackend)
    assert loaded[0] is loaded[1]
    assert django_tasks.default_task_backend.alias == "default"


def test_a_new_tasks_setting_makes_a_new_instance(fresh_tasks: dict[str, Any]) -> None:
    before = django.tasks.task_backends["default"]
    with override_settings(TASKS={alias: dict(entry) for alias, entry in fresh_tasks.items()}):
        after = django_tasks.task_backends["default"]
        assert after is django.tasks.task_backends["default"]
    assert after is not before


def test_a_task_the_backports_decorator_defines_is_one_of_ours() -> None:
    assert isinstance(backport_client.shout, SQLQueueTask)
    assert backport_client.shout.get_backend() is django_tasks.task_backends["default"]


@pytest.mark.django_db(transaction=True)
def test_signals_reach_the_receivers_of_both_frameworks(child_env: dict[str, str]) -> None:
    heard: list[str] = []

    def on_core_enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
        heard.append(task_result.id)

    core_enqueued.connect(on_core_enqueued)
    try:
        with transaction.atomic():
            result = backport_client.shout.enqueue("hello")
            assert not Execution.objects.filter(job_id=id_in(result.id)).exists(), (
                "task_enqueued before the commit"
            )
    finally:
        core_enqueued.disconnect(on_core_enqueued)
    assert heard == [result.id]

    done = subprocess.run(
        [sys.executable, "-m", "django", "runworkers", "--burst"],
        cwd=REPO_ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr

    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, "HELLO")
    assert Job.objects.get(pk=id_in(result.id)).status == Job.Status.COMPLETED
    rows = Execution.objects.filter(job_id=id_in(result.id)).order_by("id")
    labels = [row.label for row in rows]
    assert [label for label in labels if label.startswith(BACKPORT_PREFIX)] == [
        f"{BACKPORT_PREFIX}task_enqueued:READY",
        f"{BACKPORT_PREFIX}task_started:RUNNING",
        f"{BACKPORT_PREFIX}task_finished:SUCCESSFUL",
    ]
    assert [label for label in labels if label.startswith(SIGNAL_PREFIX)] == [
        f"{SIGNAL_PREFIX}task_started:RUNNING",
        f"{SIGNAL_PREFIX}task_finished:SUCCESSFUL",
    ]
