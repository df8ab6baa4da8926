"""The supervisor's scheduler in-process, with fixed clocks: each tick enqueued once, as a job
that runs at the tick's time; a schedule's state in the row decides, not a supervisor's
memory; a broken schedule does not stop the others. (Real processes: tests/workers.)"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from django_sqlqueue.conf import get_settings
from django_sqlqueue.models import Job, Schedule
from django_sqlqueue.runtime.scheduler import Scheduler

pytestmark = pytest.mark.django_db

UTC = timezone.utc
Entries = Callable[[dict[str, Any]], None]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def scheduler(now: datetime) -> Scheduler:
    """A supervisor's scheduler, synced and with the schedules read at `now`."""
    s = Scheduler(get_settings())
    s.sync(now)
    s.refresh()
    return s


def tick(s: Scheduler, now: datetime) -> None:
    s.next_refresh = 0.0  # read the rows, as the supervisor does every second
    s.run(now)


def jobs(alias: str, key: str = "") -> list[Job]:
    return list(
        Job.objects.using(alias)
        .filter(idempotency_key__startswith=f"schedule:{key}")
        .order_by("run_at")
    )


def row(alias: str, key: str) -> Schedule:
    return Schedule.objects.using(alias).get(key=key)


@pytest.fixture
def every_2s(settings_schedules: Entries) -> None:
    settings_schedules(
        {"every2s": {"job": "tests.record", "cron": "* * * * * */2", "kwargs": {"label": "x"}}}
    )


@pytest.mark.usefixtures("every_2s")
class TestTicks:
    def test_a_due_tick_becomes_one_job_at_the_ticks_time(self, alias: str) -> None:
        s = scheduler(utc(2025, 1, 1, 0, 0, 0, 500_000))
        assert s.seconds_until_due(utc(2025, 1, 1, 0, 0, 1, 900_000)) == pytest.approx(0.1)
        tick(s, utc(2025, 1, 1, 0, 0, 1, 900_000))
        assert jobs(alias) == []
        tick(s, utc(2025, 1, 1, 0, 0, 2, 4000))
        [job] = jobs(alias)
        assert (job.name, job.kwargs, job.run_at) == (
            "tests.record",
            {"label": "x"},
            utc(2025, 1, 1, 0, 0, 2),
        )
        assert job.idempotency_key == "schedule:every2s:2025-01-01T00:00:02Z"
        schedule = row(alias, "every2s")
        assert schedule.next_run_at == utc(2025, 1, 1, 0, 0, 4)
        assert (schedule.last_run_at, schedule.last_job_id) == (job.run_at, job.pk)

    def test_two_supervisors_with_the_same_picture_enqueue_a_tick_once(self, alias: str) -> None:
        first, second = scheduler(utc(2025, 1, 1)), scheduler(utc(2025, 1, 1))
        first.run(utc(2025, 1, 1, 0, 0, 2, 1000))
        second.run(utc(2025, 1, 1, 0, 0, 2, 2000))  # its rows are stale: the UPDATE misses
        assert len(jobs(alias)) == 1
        assert second.next_refresh == 0.0  # and it reads them again at once
        tick(second, utc(2025, 1, 1, 0, 0, 4))
        tick(first, utc(2025, 1, 1, 0, 0, 4, 1000))
        assert [j.run_at for j in jobs(alias)] == [
            utc(2025, 1, 1, 0, 0, 2),
            utc(2025, 1, 1, 0, 0, 4),
        ]

    def test_the_ticks_key_stops_a_second_job_when_the_row_was_rewound(self, alias: str) -> None:
        """An admin's save racing a tick can write back the old next_run_at: the tick's
        idempotency key still stores one job."""
        s = scheduler(utc(2025, 1, 1))
        tick(s, utc(2025, 1, 1, 0, 0, 2))
        Schedule.objects.using(alias).update(next_run_at=utc(2025, 1, 1, 0, 0, 2))
        tick(s, utc(2025, 1, 1, 0, 0, 3))
        assert len(jobs(alias)) == 1
        assert row(alias, "every2s").next_run_at == utc(2025, 1, 1, 0, 0, 4)

    def test_a_disabled_schedule_stops_before_its_next_tick(self, alias: str) -> None:
        s = scheduler(utc(2025, 1, 1))
        Schedule.objects.using(alias).update(enabled=False)
        s.run(utc(2025, 1, 1, 0, 0, 2))  # its picture says enabled; the row decides
        assert jobs(alias) == []

    def test_re_enabled_after_a_gap_the_latest_missed_tick_runs_once(
        self, alias: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        s = scheduler(utc(2025, 1, 1))
        Schedule.objects.using(alias).update(enabled=False)
        tick(s, utc(2025, 1, 1, 0, 1))
        Schedule.objects.using(alias).update(enabled=True)
        with caplog.at_level(logging.WARNING, "django_sqlqueue"):
            tick(s, utc(2025, 1, 1, 0, 1, 0, 300_000))
        assert [j.run_at for j in jobs(alias)] == [utc(2025, 1, 1, 0, 1)]
        assert "missed tick(s) not enqueued (missed='latest')" in caplog.text
        assert row(alias, "every2s").next_run_at == utc(2025, 1, 1, 0, 1, 2)

    def test_an_edited_cron_takes_over_from_the_next_tick(self, alias: str) -> None:
        from django_sqlqueue.scheduling.store import retime

        s = scheduler(utc(2025, 1, 1))
        schedule = row(alias, "every2s")
        schedule.cron = "* * * * * */5"
        retime(schedule, utc(2025, 1, 1, 0, 0, 1))
        schedule.save(using=alias)
        s.run(utc(2025, 1, 1, 0, 0, 2))  # stale picture: the old cron's tick is refused
        assert jobs(alias) == []
        tick(s, utc(2025, 1, 1, 0, 0, 5))
        assert [j.run_at for j in jobs(alias)] == [utc(2025, 1, 1, 0, 0, 5)]


class TestMissed:
    @pytest.mark.parametrize(
        ("missed", "expected"),
        [
            ("latest", [utc(2025, 1, 1, 0, 30)]),
            ("skip", []),
            ("all", [utc(2025, 1, 1, 0, m) for m in range(5, 31, 5)]),
        ],
    )
    def test_after_downtime(
        self, alias: str, settings_schedules: Entries, missed: str, expected: list[datetime]
    ) -> None:
        settings_schedules({"m": {"job": "tests.noop", "cron": "*/5 * * * *", "missed": missed}})
        scheduler(utc(2025, 1, 1))  # a supervisor synced, then everything stopped
        tick(scheduler(utc(2025, 1, 1, 0, 33, 30)), utc(2025, 1, 1, 0, 33, 30))
        assert [j.run_at for j in jobs(alias)] == expected
        assert row(alias, "m").next_run_at == utc(2025, 1, 1, 0, 35)

    def test_skip_still_runs_a_tick_less_than_a_minute_late(
        self, alias: str, settings_schedules: Entries
    ) -> None:
        settings_schedules({"m": {"job": "tests.noop", "cron": "0 * * * *", "missed": "skip"}})
        scheduler(utc(2025, 1, 1))
        tick(scheduler(utc(2025, 1, 1, 1, 0, 45)), utc(2025, 1, 1, 1, 0, 45))
        assert [j.run_at for j in jobs(alias)] == [utc(2025, 1, 1, 1)]


class TestDaylightSaving:
    """A supervisor looking every 20 minutes across a whole DST day: one job per day."""

    @pytest.mark.parametrize(
        ("cron", "start", "expected"),
        [
            # 02:30 does not exist on March 9: it runs once, at 03:00 EDT.
            ("30 2 * * *", utc(2025, 3, 8, 12), [utc(2025, 3, 9, 7, 0), utc(2025, 3, 10, 6, 30)]),
            # 01:30 happens twice on November 2: it runs once, at the first.
            (
                "30 1 * * *",
                utc(2025, 11, 1, 12),
                [utc(2025, 11, 2, 5, 30), utc(2025, 11, 3, 6, 30)],
            ),
        ],
    )
    def test_one_run_a_day(
        self,
        alias: str,
        settings_schedules: Entries,
        cron: str,
        start: datetime,
        expected: list[datetime],
    ) -> None:
        settings_schedules(
            {"dst": {"job": "tests.noop", "cron": cron, "timezone": "America/New_York"}}
        )
        s = scheduler(start)
        now = start
        while now < start + timedelta(days=2):
            now += timedelta(minutes=20)
            tick(s, now)
        assert [j.run_at for j in jobs(alias)] == expected


def test_a_broken_schedule_is_logged_once_and_the_others_run(
    alias: str, settings_schedules: Entries, caplog: pytest.LogCaptureFixture
) -> None:
    settings_schedules(
        {
            "good": {"job": "tests.noop", "cron": "* * * * *"},
            "bad-cron": {"job": "tests.noop", "cron": "* * * * *"},
            "bad-job": {"job": "tests.noop", "cron": "* * * * *"},
        }
    )
    s = scheduler(utc(2025, 1, 1))
    # Rows changed behind the code's back (a shell, an old version's admin, a lost job).
    Schedule.objects.using(alias).filter(key="bad-cron").update(cron="not a cron")
    Schedule.objects.using(alias).filter(key="bad-job").update(job_name="tests.gone")
    with caplog.at_level(logging.ERROR, "django_sqlqueue"):
        for second in range(60, 190, 10):
            tick(s, utc(2025, 1, 1) + timedelta(seconds=second))
    assert [j.run_at for j in jobs(alias, "good")] == [utc(2025, 1, 1, 0, m) for m in (1, 2, 3)]
    assert jobs(alias, "bad") == []
    assert caplog.text.count("Schedule bad-cron cannot run") == 1
    assert caplog.text.count("Schedule bad-job cannot run") == 1
    assert "tests.gone" in caplog.text
    assert s.seconds_until_due(utc(2025, 1, 1, 0, 3, 30)) == pytest.approx(30)


def test_seconds_until_due_without_schedules_is_unbounded() -> None:
    s = Scheduler(get_settings())
    assert s.seconds_until_due() == float("inf")


def test_declarations_with_problems_are_logged_and_skipped(
    alias: str, settings_schedules: Entries, caplog: pytest.LogCaptureFixture
) -> None:
    """Only with `runworkers --skip-checks`: the checks refuse to start otherwise."""
    settings_schedules(
        {
            "good": {"job": "tests.noop", "cron": "* * * * *"},
            "typo": {"job": "tests.noop", "cron": "* * * *"},
        }
    )
    with caplog.at_level(logging.ERROR, "django_sqlqueue"):
        s = scheduler(utc(2025, 1, 1))
    assert "Schedule 'typo' (SQLQUEUE['SCHEDULES']): '* * * *' has 4 fields" in caplog.text
    assert "(django_sqlqueue.E021) Not scheduled." in caplog.text
    assert list(Schedule.objects.using(alias).values_list("key", flat=True)) == ["good"]
    tick(s, utc(2025, 1, 1, 0, 1))
    assert [j.run_at for j in jobs(alias)] == [utc(2025, 1, 1, 0, 1)]
