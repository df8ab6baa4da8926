"""`manage.py schedules [--json] [--sync]`."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import translation

from django_sqlqueue.models import Job, Schedule

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    with translation.override("en"):
        call_command("schedules", *args, stdout=out)
    return out.getvalue()


def test_nothing_to_list() -> None:
    assert run() == "No schedules.\n"
    assert json.loads(run("--json")) == {"schedules": []}


def test_sync_then_list(settings_schedules: Callable[[dict[str, Any]], None], alias: str) -> None:
    settings_schedules(
        {
            "nightly": {
                "job": "tests.record",
                "cron": "0 3 * * *",
                "timezone": "Europe/Paris",
                "kwargs": {"label": "n"},
            }
        }
    )
    assert run("--sync").startswith("Sync: created nightly\n")
    job = Job.objects.using(alias).create(name="tests.record", status="completed")
    Schedule.objects.using(alias).update(last_job=job, last_run_at=job.created_at)
    line = run().strip()
    assert line.startswith(
        "nightly: tests.record at '0 3 * * *' (every day at 03:00) Europe/Paris;"
    )
    assert "; next " in line and ":00:00 CE" in line  # 03:00 CET or CEST, the schedule's clock
    assert f"job {job.pk} (completed)" in line
    [row] = json.loads(run("--json"))["schedules"]
    assert row["key"] == "nightly" and row["kwargs"] == {"label": "n"}
    assert row["cron_in_words"] == "every day at 03:00"
    assert (row["enabled"], row["last_job_id"], row["last_job_status"]) == (
        True,
        job.pk,
        "completed",
    )
    Schedule.objects.using(alias).update(enabled=False)
    assert "; disabled; " in run()


def test_sync_names_the_declarations_it_cannot_sync(
    settings_schedules: Callable[[dict[str, Any]], None], alias: str
) -> None:
    settings_schedules(
        {
            "good": {"job": "tests.noop", "cron": "0 3 * * *"},
            "typo": {"job": "tests.noop", "cron": "0 3 * *"},
        }
    )
    out, err = io.StringIO(), io.StringIO()
    call_command("schedules", "--sync", stdout=out, stderr=err)
    assert "Schedule 'typo' (SQLQUEUE['SCHEDULES']): '0 3 * *' has 4 fields" in err.getvalue()
    assert "(django_sqlqueue.E021) Not synced." in err.getvalue()
    assert list(Schedule.objects.using(alias).values_list("key", flat=True)) == ["good"]


def test_declared_schedules_are_listed_before_any_supervisor_synced_them(
    settings_schedules: Callable[[dict[str, Any]], None], alias: str
) -> None:
    """`schedules` said "No schedules." for a declared `cron=` until a supervisor had run."""
    settings_schedules({"nightly": {"job": "tests.record", "cron": "0 3 * * *"}})
    line = run().strip()
    assert line.startswith("nightly: tests.record at '0 3 * * *' (every day at 03:00)")
    assert "not synced yet" in line and "schedules --sync" in line
    [row] = json.loads(run("--json"))["schedules"]
    assert (row["key"], row["synced"]) == ("nightly", False)
    run("--sync")
    assert "not synced" not in run()
    assert [row["synced"] for row in json.loads(run("--json"))["schedules"]] == [True]
