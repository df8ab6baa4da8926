"""Which ticks are due, by missed-ticks policy, with fixed clocks; and the words for crons."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from django.utils import translation

from django_sqlqueue.scheduling.cron import Cron
from django_sqlqueue.scheduling.describe import describe
from django_sqlqueue.scheduling.plan import plan_ticks, tick_key
from django_sqlqueue.scheduling.specs import MISSED_ALL_LIMIT

UTC = timezone.utc
EVERY_2S = Cron("* * * * * */2", "UTC")
NIGHTLY = Cron("0 3 * * *", "Europe/Paris")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


class TestOnTime:
    @pytest.mark.parametrize("missed", ["latest", "skip", "all"])
    def test_one_due_tick_runs_whatever_the_policy(self, missed: str) -> None:
        plan = plan_ticks(
            EVERY_2S, utc(2025, 1, 1, 0, 0, 2), utc(2025, 1, 1, 0, 0, 2, 3000), missed
        )
        assert plan.ticks == [utc(2025, 1, 1, 0, 0, 2)]
        assert plan.next_run_at == utc(2025, 1, 1, 0, 0, 4)
        assert plan.missed == 0

    def test_nothing_before_the_next_tick(self) -> None:
        plan = plan_ticks(EVERY_2S, utc(2025, 1, 1, 0, 0, 4), utc(2025, 1, 1, 0, 0, 3), "latest")
        assert plan.ticks == [] and plan.next_run_at == utc(2025, 1, 1, 0, 0, 4)

    def test_a_schedule_without_a_next_run_starts_at_its_next_tick(self) -> None:
        plan = plan_ticks(NIGHTLY, None, utc(2025, 1, 1, 12), "latest")
        assert plan.ticks == [] and plan.next_run_at == utc(2025, 1, 2, 2)

    def test_a_late_tick_keeps_its_own_time(self) -> None:
        # The supervisor came 40 s late: the job's run_at is still 03:00.
        plan = plan_ticks(NIGHTLY, utc(2025, 1, 1, 2), utc(2025, 1, 1, 2, 0, 40), "skip")
        assert plan.ticks == [utc(2025, 1, 1, 2)]


class TestAfterDowntime:
    """Supervisors down from Jan 1 at 03:00 (Paris) to Jan 4 at noon: 4 ticks missed."""

    START, NOW = utc(2025, 1, 1, 2), utc(2025, 1, 4, 11)

    def test_latest_runs_the_latest_missed_tick_once(self) -> None:
        plan = plan_ticks(NIGHTLY, self.START, self.NOW, "latest")
        assert plan.ticks == [utc(2025, 1, 4, 2)]
        assert plan.next_run_at == utc(2025, 1, 5, 2)
        # Counted for the log, exactly or as a lower bound (a long gap is not walked whole).
        assert plan.missed == 3 if plan.missed_exact else 1 <= plan.missed <= 3

    def test_skip_runs_none(self) -> None:
        plan = plan_ticks(NIGHTLY, self.START, self.NOW, "skip")
        assert plan.ticks == []
        assert plan.missed == 4 if plan.missed_exact else 1 <= plan.missed <= 4
        assert plan.next_run_at == utc(2025, 1, 5, 2)

    def test_all_runs_each(self) -> None:
        plan = plan_ticks(NIGHTLY, self.START, self.NOW, "all")
        assert plan.ticks == [utc(2025, 1, day, 2) for day in (1, 2, 3, 4)]
        assert plan.missed == 0

    def test_all_is_capped_to_the_latest_ticks(self) -> None:
        start, now = utc(2025, 1, 1), utc(2025, 1, 1, 1)  # an hour: 1,801 ticks
        plan = plan_ticks(EVERY_2S, start, now, "all")
        assert len(plan.ticks) == MISSED_ALL_LIMIT
        assert plan.ticks[-1] == now
        assert plan.ticks[0] == now - timedelta(seconds=2 * (MISSED_ALL_LIMIT - 1))
        assert plan.missed >= MISSED_ALL_LIMIT

    def test_a_week_of_a_two_second_schedule_is_one_catch_up(self) -> None:
        plan = plan_ticks(EVERY_2S, utc(2025, 1, 1), utc(2025, 1, 8, 0, 0, 1), "latest")
        assert plan.ticks == [utc(2025, 1, 8)]
        assert plan.next_run_at == utc(2025, 1, 8, 0, 0, 2)


class TestDaylightSaving:
    """The plan across a DST change, as a supervisor asleep through it would see it."""

    def test_the_nonexistent_tick_is_enqueued_once(self) -> None:
        cron = Cron("30 2 * * *", "America/New_York")
        next_run = cron.next_after(utc(2025, 3, 8, 12))
        assert next_run == utc(2025, 3, 9, 7)  # 03:00 EDT
        plan = plan_ticks(cron, next_run, utc(2025, 3, 9, 7, 0, 0, 1000), "latest")
        assert plan.ticks == [utc(2025, 3, 9, 7)]
        assert plan.next_run_at == utc(2025, 3, 10, 6, 30)

    def test_the_ambiguous_tick_is_enqueued_once(self) -> None:
        cron = Cron("30 1 * * *", "America/New_York")
        plan = plan_ticks(cron, utc(2025, 11, 2, 5, 30), utc(2025, 11, 2, 6, 31), "all")
        assert plan.ticks == [utc(2025, 11, 2, 5, 30)]  # not 06:30 UTC, the second 01:30
        assert plan.next_run_at == utc(2025, 11, 3, 6, 30)


def test_tick_keys_name_the_schedule_and_the_instant() -> None:
    paris = datetime(2025, 1, 1, 3, tzinfo=Cron("0 3 * * *", "Europe/Paris").zone)
    assert tick_key("nightly", paris) == "schedule:nightly:2025-01-01T02:00:00Z"


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("* * * * *", "every minute"),
        ("*/5 * * * *", "every 5 minutes"),
        ("7 * * * *", "every hour at minute 07"),
        ("15 */2 * * *", "every 2 hours at minute 15"),
        ("0 3 * * *", "every day at 03:00"),
        ("@daily", "every day at 00:00"),
        ("30 9 * * 1-5", "on weekdays at 09:30"),
        ("0 10 * * 0,6", "on weekends at 10:00"),
        ("0 8 * * 1", "every Monday at 08:00"),
        ("0 8 * * mon,thu", "every Monday and Thursday at 08:00"),
        ("0 6 1 * *", "on day 1 of every month at 06:00"),
        ("0 0 25 12 *", "every year on December 25 at 00:00"),
        ("* * * * * *", "every second"),
        ("* * * * * */2", "every 2 seconds"),
        ("0 3 * * * 30", "every day at 03:00:30"),
        ("0 3 1-7 * 1", None),
        ("0 3,15 * * *", None),
    ],
)
def test_cron_in_words(expression: str, words: str | None) -> None:
    with translation.override("en"):
        assert describe(expression) == words


def test_cron_in_words_is_translated() -> None:
    with translation.override("fr"):
        assert describe("0 8 * * 1") is not None
        assert "lundi" in (describe("0 8 * * 1") or "")
