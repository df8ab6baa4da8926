"""The schedules admin: the list, the switches and the cron edit, and links to the jobs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from django_sqlqueue.models import Job, Schedule
from django_sqlqueue.scheduling.declarations import declared_schedules
from django_sqlqueue.scheduling.store import sync
from tests.test_admin.helpers import staff_client

pytestmark = pytest.mark.django_db

LIST = "admin:django_sqlqueue_schedule_changelist"
Entries = Callable[[dict[str, Any]], None]


@pytest.fixture
def schedules(alias: str, settings_schedules: Entries) -> dict[str, Schedule]:
    settings_schedules(
        {
            "nightly": {"job": "tests.record", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
            "nightly-extra": {"job": "tests.noop", "cron": "*/5 * * * *"},
        }
    )
    sync(declared_schedules(), alias)
    return {s.key: s for s in Schedule.objects.using(alias)}


@pytest.fixture
def staff() -> Client:
    return staff_client("scheduler", "view_schedule", "change_schedule", "view_job")


def change_url(schedule: Schedule) -> str:
    return reverse("admin:django_sqlqueue_schedule_change", args=[schedule.pk])


def act(client: Client, action: str, *schedules: Schedule) -> Any:
    return client.post(
        reverse(LIST),
        {"action": action, "_selected_action": [s.pk for s in schedules]},
        follow=True,
    )


def test_the_list_shows_each_schedule(
    staff: Client, schedules: dict[str, Schedule], alias: str
) -> None:
    nightly = schedules["nightly"]
    job = Job.objects.using(alias).create(
        name="tests.record", status="dead", idempotency_key="schedule:nightly:x"
    )
    Schedule.objects.using(alias).filter(pk=nightly.pk).update(
        last_job=job, last_run_at=timezone.now() - timedelta(hours=1)
    )
    with translation.override("en"):
        page = staff.get(reverse(LIST)).content.decode()
    assert "<code>0 3 * * *</code>" in page
    assert "every day at 03:00, Europe/Paris" in page
    assert "every 5 minutes" in page
    assert 'data-status="dead"' in page  # the last run's status
    assert reverse("admin:django_sqlqueue_job_change", args=[job.pk]) in page
    assert "idempotency_key__startswith=schedule%3Anightly%3A" in page  # its jobs


def test_a_next_run_long_past_says_no_supervisor_enqueued_it(
    staff: Client, schedules: dict[str, Schedule], alias: str
) -> None:
    """A supervisor enqueues each tick within about a second: a next run minutes in the past
    with no hint looked like a schedule that works."""
    now = timezone.now()
    Schedule.objects.using(alias).filter(key="nightly").update(
        next_run_at=now - timedelta(minutes=5)
    )
    Schedule.objects.using(alias).filter(key="nightly-extra").update(
        next_run_at=now - timedelta(seconds=5)  # a tick being enqueued: not late
    )
    content = staff.get(reverse(LIST)).content.decode()
    assert content.count('class="sq-sub sq-overdue"') == 1
    assert "late: no supervisor has enqueued it" in content
    assert "manage.py runworkers (without --no-scheduler)" in content


def test_the_jobs_link_lists_the_schedules_jobs_only(
    staff: Client, schedules: dict[str, Schedule], alias: str
) -> None:
    ours = Job.objects.using(alias).create(
        name="tests.record", idempotency_key="schedule:nightly:2025-01-01T02:00:00Z"
    )
    others = [
        Job.objects.using(alias).create(
            name="tests.noop", idempotency_key="schedule:nightly-extra:2025-01-01T02:00:00Z"
        ),
        Job.objects.using(alias).create(name="tests.record"),
    ]
    page = staff.get(reverse(LIST)).content.decode()
    start = page.index("idempotency_key__startswith=schedule%3Anightly%3A")
    link = page[page.rindex('href="', 0, start) + 6 : page.index('"', start)]
    jobs_page = staff.get(link.replace("&amp;", "&"))
    assert jobs_page.status_code == 200
    listed = [job.pk for job in jobs_page.context["cl"].result_list]
    assert listed == [ours.pk], (listed, [o.pk for o in others])


def test_disable_and_enable(staff: Client, schedules: dict[str, Schedule], alias: str) -> None:
    nightly = schedules["nightly"]
    act(staff, "disable_schedules", nightly)
    assert not Schedule.objects.using(alias).get(pk=nightly.pk).enabled
    page = staff.get(reverse(LIST)).content.decode()
    assert "disabled" in page
    response = act(staff, "enable_schedules", nightly)
    assert "1 schedule enabled." in response.content.decode()
    assert Schedule.objects.using(alias).get(pk=nightly.pk).enabled


def test_a_schedule_removed_from_code_is_not_enabled(
    staff: Client, schedules: dict[str, Schedule], alias: str
) -> None:
    nightly = schedules["nightly"]
    Schedule.objects.using(alias).filter(pk=nightly.pk).update(
        enabled=False, removed_at=timezone.now()
    )
    response = act(staff, "enable_schedules", nightly)
    assert "no longer declared in code or settings; not enabled" in response.content.decode()
    assert not Schedule.objects.using(alias).get(pk=nightly.pk).enabled
    form = staff.get(change_url(nightly)).content.decode()
    assert 'name="enabled"' not in form


def test_run_now_enqueues_one_job_at_once(
    staff: Client, schedules: dict[str, Schedule], alias: str
) -> None:
    nightly = schedules["nightly"]
    before = timezone.now()
    response = act(staff, "run_schedules_now", nightly)
    [job] = Job.objects.using(alias).filter(idempotency_key__startswith="schedule:nightly:")
    assert job.name == "tests.record" and before <= job.run_at <= timezone.now()
    assert job.idempotency_key.startswith("schedule:nightly:manual:")
    assert f"job #{job.pk}" in response.content.decode()
    row = Schedule.objects.using(alias).get(pk=nightly.pk)
    assert row.last_job_id == job.pk
    assert row.next_run_at == nightly.next_run_at  # the ticks are unchanged


def test_editing_the_cron_moves_the_next_run(
    staff: Client, schedules: dict[str, Schedule], alias: str
) -> None:
    nightly = schedules["nightly"]
    response = staff.post(change_url(nightly), {"cron": "0 4 * * *", "enabled": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    row = Schedule.objects.using(alias).get(pk=nightly.pk)
    assert (row.cron, row.declared_cron) == ("0 4 * * *", "0 3 * * *")
    assert row.next_run_at is not None
    assert row.next_run_at.astimezone(row_zone(row)).hour == 4


def row_zone(row: Schedule) -> Any:
    from zoneinfo import ZoneInfo

    return ZoneInfo(row.timezone)


def test_an_invalid_cron_is_refused(staff: Client, schedules: dict[str, Schedule]) -> None:
    response = staff.post(change_url(schedules["nightly"]), {"cron": "0 4 * *", "enabled": "on"})
    assert response.status_code == 200
    assert "has 4 fields" in response.content.decode()


def test_no_adding_and_no_actions_without_the_change_permission(
    schedules: dict[str, Schedule], alias: str
) -> None:
    viewer = staff_client("viewer", "view_schedule")
    page = viewer.get(reverse(LIST))
    assert page.status_code == 200
    assert reverse("admin:django_sqlqueue_schedule_add") not in page.content.decode()
    act(viewer, "disable_schedules", schedules["nightly"])
    assert Schedule.objects.using(alias).get(pk=schedules["nightly"].pk).enabled


def test_a_deleted_last_job_shows_as_deleted(
    staff: Client, schedules: dict[str, Schedule], alias: str
) -> None:
    Schedule.objects.using(alias).filter(pk=schedules["nightly"].pk).update(
        last_job_id=123456, last_run_at=datetime(2025, 1, 1, tzinfo=timezone.get_current_timezone())
    )
    with translation.override("en"):
        assert "deleted" in staff.get(reverse(LIST)).content.decode()
