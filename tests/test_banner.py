"""What the `runworkers` banner says it will run: the `@job` handlers it counts, and the TASKS
entries whose tasks it runs (the framework keeps no list of its tasks)."""

from __future__ import annotations

import logging

import django
import pytest

from django_sqlqueue.runtime.supervisor import jobs_summary
from django_sqlqueue.tasks import tasks_summary

FRAMEWORK = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
OURS = "django_sqlqueue.backend.SQLQueueBackend"


class NotABackend:
    """A class of another kind: TASKS naming it is no use of this backend."""


def test_no_jobs() -> None:
    assert jobs_summary([]) == "none registered"


def test_a_few_jobs_are_counted_and_named() -> None:
    assert jobs_summary(["a", "b", "c"]) == "3 registered (a, b, c)"


def test_many_jobs_are_counted_and_the_first_ten_named() -> None:
    names = [f"job{n:02}" for n in range(25)]
    summary = jobs_summary(names)
    assert summary.startswith("25 registered (job00, job01, ")
    assert summary.endswith("job09, and 15 more)")


def test_the_aliases_that_use_the_backend_are_named() -> None:
    tasks = {
        "default": {"BACKEND": OURS},
        "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
        "other": {"BACKEND": "django_sqlqueue.tasks.backend.SQLQueueBackend"},
    }
    assert tasks_summary(tasks) == (
        f"{FRAMEWORK}: every task enqueued through TASKS['default'], TASKS['other']"
    )


def test_a_subclass_of_the_backend_counts() -> None:
    # Imported only here: on Django 5.2 without the backport the backend cannot be.
    from tests.tasksapp.tasks_settings import TASKS

    if not TASKS:
        return
    path = "tests.tasksapp.subclassed_backend.Backend"
    assert tasks_summary({"sub": {"BACKEND": path}}) == (
        f"{FRAMEWORK}: every task enqueued through TASKS['sub']"
    )


def test_no_alias_uses_the_backend() -> None:
    none = f"{FRAMEWORK}: none (TASKS names no SQLQueueBackend)"
    assert tasks_summary(None) == none
    assert tasks_summary({}) == none
    assert tasks_summary({"default": {"BACKEND": "no.such.Backend"}}) == none
    assert tasks_summary({"default": {"BACKEND": f"{__name__}.SubclassedBackend"}}) == none
    assert tasks_summary({"default": "not a dict"}) == none


def test_the_frameworks_own_backends_are_not_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Django 6's default TASKS names its immediate backend: importing it to look for ours
    would add to every worker's start-up."""
    imported: list[str] = []
    monkeypatch.setattr(
        "django.utils.module_loading.import_string", lambda path: imported.append(path)
    )
    framework_own = {
        "default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
        "backport": {"BACKEND": "django_tasks.backends.database.DatabaseBackend"},
    }
    assert tasks_summary(framework_own) == f"{FRAMEWORK}: none (TASKS names no SQLQueueBackend)"
    assert imported == []
    tasks_summary({"other": {"BACKEND": "another.package.Backend"}})
    assert imported == ["another.package.Backend"]  # any other path is still looked at


# The connections a supervisor with slots may need (runworkers --concurrency) ------------


def test_workers_hold_four_connections_each_and_with_slots_one_per_slot_and_a_writer() -> None:
    from django_sqlqueue.runtime.supervisor import worst_case_connections
    from django_sqlqueue.runtime.worker import WorkerOptions
    from django_sqlqueue.runtime.worker_plans import plan_workers

    assert worst_case_connections(plan_workers(4, WorkerOptions())) == 4 * 4 + 1
    assert worst_case_connections(plan_workers(2, WorkerOptions(concurrency=50))) == 2 * 55 + 1
    plans = plan_workers(2, WorkerOptions(concurrency=3), {"webhooks": 50, "reports": 1})
    assert worst_case_connections(plans) == 2 * 55 + 2 * 4 + 2 * 8 + 1


@pytest.mark.django_db
def test_a_supervisor_needing_more_connections_than_the_server_accepts_warns(caplog) -> None:
    from django.db import connection

    from django_sqlqueue.databases import queue_database
    from django_sqlqueue.runtime.supervisor import Supervisor
    from django_sqlqueue.runtime.worker import WorkerOptions

    limit = queue_database(connection.alias).max_connections()
    if connection.vendor == "sqlite":
        assert limit is None
    else:
        assert limit is not None and limit > 0
    supervisor = Supervisor(2, WorkerOptions(concurrency=1000), scheduler=False)
    with caplog.at_level(logging.INFO, logger="django_sqlqueue"):
        supervisor.check_connections()
    messages = [record.getMessage() for record in caplog.records]
    assert any("up to 2011 database connections" in message for message in messages)
    warned = [message for message in messages if "max_connections" in message]
    assert bool(warned) == (limit is not None), messages
