"""Declarations synced to rows at supervisor start: created, updated, removed, restored, and
an admin's cron kept until the code's own cron changes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from django.test import override_settings

from django_sqlqueue.models import Schedule
from django_sqlqueue.scheduling.declarations import declared_schedules
from django_sqlqueue.scheduling.store import sync

pytestmark = pytest.mark.django_db

UTC = timezone.utc
NOW = datetime(2025, 1, 1, 12, tzinfo=UTC)
Entries = Callable[[dict[str, Any]], None]


def run_sync(alias: str, now: datetime = NOW) -> Any:
    return sync(declared_schedules(now), alias, now)


def row(alias: str, key: str) -> Schedule:
    return Schedule.objects.using(alias).get(key=key)


def test_settings_and_decorator_schedules_get_rows(
    alias: str, settings_schedules: Entries, register_job: Any
) -> None:
    register_job("tests.nightly", cron="0 3 * * *", timezone="Europe/Paris", missed="all")
    settings_schedules(
        {
            "mail-digest": {
                "job": "tests.record",
                "cron": "*/10 * * * * *",
                "kwargs": {"label": "digest"},
                "timezone": "UTC",
                "queue": "mail",
                "priority": 5,
                "missed": "skip",
            }
        }
    )
    report = run_sync(alias)
    assert sorted(report.created) == ["mail-digest", "tests.nightly"]
    nightly = row(alias, "tests.nightly")
    assert (nightly.job_name, nightly.cron, nightly.declared_cron) == (
        "tests.nightly",
        "0 3 * * *",
        "0 3 * * *",
    )
    assert (nightly.timezone, nightly.missed, nightly.source) == ("Europe/Paris", "all", "code")
    assert (nightly.queue, nightly.priority, nightly.kwargs) == ("", None, {})
    assert nightly.next_run_at == datetime(2025, 1, 2, 2, tzinfo=UTC)
    digest = row(alias, "mail-digest")
    assert (digest.kwargs, digest.queue, digest.priority, digest.missed, digest.source) == (
        {"label": "digest"},
        "mail",
        5,
        "skip",
        "settings",
    )
    assert digest.enabled and digest.removed_at is None
    assert run_sync(alias).created == []  # idempotent


def test_the_default_time_zone_is_the_projects(alias: str, schedules_setting: Any) -> None:
    with (
        override_settings(TIME_ZONE="Asia/Tokyo"),
        schedules_setting({"x": {"job": "tests.noop", "cron": "0 9 * * *"}}),
    ):
        run_sync(alias)
    assert row(alias, "x").timezone == "Asia/Tokyo"
    assert row(alias, "x").next_run_at == datetime(2025, 1, 2, 0, tzinfo=UTC)  # 09:00 JST


def test_changed_declarations_update_the_row(alias: str, settings_schedules: Entries) -> None:
    settings_schedules({"x": {"job": "tests.noop", "cron": "0 3 * * *"}})
    run_sync(alias)
    settings_schedules({"x": {"job": "tests.add", "cron": "0 4 * * *", "kwargs": {"a": 1, "b": 2}}})
    assert run_sync(alias).updated == ["x"]
    x = row(alias, "x")
    assert (x.job_name, x.cron, x.kwargs) == ("tests.add", "0 4 * * *", {"a": 1, "b": 2})
    assert x.next_run_at == datetime(2025, 1, 2, 4, tzinfo=UTC)


def test_an_admin_edit_survives_restarts_until_the_code_changes_its_cron(
    alias: str, settings_schedules: Entries
) -> None:
    settings_schedules({"x": {"job": "tests.noop", "cron": "0 3 * * *"}})
    run_sync(alias)
    Schedule.objects.using(alias).filter(key="x").update(cron="0 5 * * *", enabled=False)
    # A restart with the same code: the admin's cron and switch stay.
    settings_schedules({"x": {"job": "tests.noop", "cron": "0 3 * * *", "kwargs": {}}})
    run_sync(alias)
    assert (row(alias, "x").cron, row(alias, "x").enabled) == ("0 5 * * *", False)
    # A deploy that changes the cron in code: the later change wins.
    settings_schedules({"x": {"job": "tests.noop", "cron": "0 6 * * *"}})
    run_sync(alias)
    x = row(alias, "x")
    assert (x.cron, x.declared_cron, x.enabled) == ("0 6 * * *", "0 6 * * *", False)
    assert x.next_run_at == datetime(2025, 1, 2, 6, tzinfo=UTC)


def test_a_schedule_removed_from_code_is_disabled_and_marked_then_restored(
    alias: str, settings_schedules: Entries
) -> None:
    settings_schedules(
        {
            "kept": {"job": "tests.noop", "cron": "0 3 * * *"},
            "gone": {"job": "tests.noop", "cron": "0 4 * * *"},
        }
    )
    run_sync(alias)
    settings_schedules({"kept": {"job": "tests.noop", "cron": "0 3 * * *"}})
    assert run_sync(alias).removed == ["gone"]
    gone = row(alias, "gone")
    assert (gone.enabled, gone.removed_at) == (False, NOW)
    assert row(alias, "kept").enabled
    settings_schedules(
        {
            "kept": {"job": "tests.noop", "cron": "0 3 * * *"},
            "gone": {"job": "tests.noop", "cron": "0 4 * * *"},
        }
    )
    assert run_sync(alias).updated == ["gone"]
    gone = row(alias, "gone")
    assert (gone.enabled, gone.removed_at) == (True, None)


def test_a_declaration_with_a_problem_leaves_its_row_alone(
    alias: str, settings_schedules: Entries
) -> None:
    settings_schedules({"x": {"job": "tests.noop", "cron": "0 3 * * *"}})
    run_sync(alias)
    settings_schedules({"x": {"job": "tests.noop", "cron": "0 3 * *"}})  # a typo in a deploy
    report = run_sync(alias)
    assert (report.updated, report.removed) == ([], [])
    assert (row(alias, "x").cron, row(alias, "x").enabled) == ("0 3 * * *", True)


@pytest.mark.django_db(transaction=True)
def test_concurrent_syncs_make_one_row(
    alias: str, settings_schedules: Entries, in_other_thread: Any
) -> None:
    """Three supervisors starting together: each sync creates or finds the one row."""
    import threading

    settings_schedules({"x": {"job": "tests.noop", "cron": "0 3 * * *"}})
    barrier = threading.Barrier(3)
    reports: list[Any] = []

    def start() -> None:
        barrier.wait()
        reports.append(run_sync(alias))

    threads = [threading.Thread(target=in_other_thread, args=(start,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Schedule.objects.using(alias).filter(key="x").count() == 1
    assert sum(len(report.created) for report in reports) == 1


def test_keys_compare_exactly(alias: str, settings_schedules: Entries) -> None:
    """`Nightly` and `nightly` are two schedules on every database (MySQL's default
    collation would make them one)."""
    settings_schedules(
        {
            "nightly": {"job": "tests.noop", "cron": "0 3 * * *"},
            "Nightly": {"job": "tests.noop", "cron": "0 4 * * *"},
            "nightly ": {"job": "tests.noop", "cron": "0 5 * * *"},
        }
    )
    assert sorted(run_sync(alias).created) == ["Nightly", "nightly", "nightly "]
    assert row(alias, "Nightly").cron == "0 4 * * *"
