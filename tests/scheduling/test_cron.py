"""Ticks as instants, with fixed clocks: DST gaps and folds, seconds, long gaps.

America/New_York springs forward on 2025-03-09 (02:00 EST becomes 03:00 EDT: 02:30 does not
exist) and falls back on 2025-11-02 (02:00 EDT becomes 01:00 EST: 01:30 happens twice).
Europe/Paris does the same at 02:00 and 03:00 on 2025-03-30 and 2025-10-26.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import islice

import pytest

from django_sqlqueue.scheduling.cron import Cron, CronError

UTC = timezone.utc
NY = "America/New_York"
PARIS = "Europe/Paris"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def ticks(expression: str, zone: str, start: datetime, count: int) -> list[datetime]:
    return list(islice(Cron(expression, zone).ticks_after(start), count))


def between(expression: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    found = []
    for tick in Cron(expression, zone).ticks_after(start):
        if tick > end:
            return found
        found.append(tick)
    raise AssertionError("unreachable")


class TestSpringForward:
    def test_a_nonexistent_daily_time_runs_once_when_the_clocks_jump(self) -> None:
        # 02:30 EST is 07:30 UTC; on the 9th 02:30 does not exist: 03:00 EDT (07:00 UTC).
        assert ticks("30 2 * * *", NY, utc(2025, 3, 7, 12), 3) == [
            utc(2025, 3, 8, 7, 30),
            utc(2025, 3, 9, 7, 0),
            utc(2025, 3, 10, 6, 30),
        ]

    def test_every_time_in_the_gap_collapses_into_one_run(self) -> None:
        day = between("*/15 2 * * *", NY, utc(2025, 3, 9, 0), utc(2025, 3, 9, 23))
        assert day == [utc(2025, 3, 9, 7, 0)]

    def test_with_seconds_too(self) -> None:
        assert ticks("30 2 * * * 15", NY, utc(2025, 3, 8, 12), 2) == [
            utc(2025, 3, 9, 7, 0, 0),
            utc(2025, 3, 10, 6, 30, 15),
        ]

    def test_hourly_schedules_follow_the_clock(self) -> None:
        # Every 30 minutes in real time: nothing is added for the skipped hour.
        assert ticks("*/30 * * * *", NY, utc(2025, 3, 9, 5, 50), 4) == [
            utc(2025, 3, 9, 6, 0),  # 01:00 EST
            utc(2025, 3, 9, 6, 30),  # 01:30 EST
            utc(2025, 3, 9, 7, 0),  # 03:00 EDT
            utc(2025, 3, 9, 7, 30),  # 03:30 EDT
        ]

    def test_paris(self) -> None:
        assert ticks("30 2 * * *", PARIS, utc(2025, 3, 28, 12), 3) == [
            utc(2025, 3, 29, 1, 30),  # 02:30 CET
            utc(2025, 3, 30, 1, 0),  # 02:30 does not exist: 03:00 CEST
            utc(2025, 3, 31, 0, 30),  # 02:30 CEST
        ]


class TestFallBack:
    def test_an_ambiguous_daily_time_runs_once_at_its_first_occurrence(self) -> None:
        assert ticks("30 1 * * *", NY, utc(2025, 10, 31, 12), 3) == [
            utc(2025, 11, 1, 5, 30),
            utc(2025, 11, 2, 5, 30),  # 01:30 EDT; not 01:30 EST (06:30 UTC) as well
            utc(2025, 11, 3, 6, 30),
        ]

    def test_the_repeated_hour_runs_once(self) -> None:
        day = between("*/15 1 * * *", NY, utc(2025, 11, 2, 0), utc(2025, 11, 2, 23))
        assert day == [utc(2025, 11, 2, 5, m) for m in (0, 15, 30, 45)]

    def test_from_inside_the_repetition_the_next_run_is_after_it(self) -> None:
        # 06:10 UTC is 01:10 EST, the second 01:10: 01:15 already ran (05:15 UTC).
        assert ticks("*/15 1 * * *", NY, utc(2025, 11, 2, 6, 10), 1) == [utc(2025, 11, 3, 6, 0)]

    def test_hourly_schedules_follow_the_clock(self) -> None:
        assert ticks("*/30 * * * *", NY, utc(2025, 11, 2, 4, 50), 5) == [
            utc(2025, 11, 2, 5, 0),  # 01:00 EDT
            utc(2025, 11, 2, 5, 30),  # 01:30 EDT
            utc(2025, 11, 2, 6, 0),  # 01:00 EST
            utc(2025, 11, 2, 6, 30),  # 01:30 EST
            utc(2025, 11, 2, 7, 0),  # 02:00 EST
        ]
        # From inside the repetition too.
        assert ticks("*/30 * * * *", NY, utc(2025, 11, 2, 6, 10), 1) == [utc(2025, 11, 2, 6, 30)]

    def test_a_seconds_schedule_keeps_its_spacing(self) -> None:
        found = between("* * * * * */20", NY, utc(2025, 11, 2, 5, 59), utc(2025, 11, 2, 6, 1))
        assert found == [utc(2025, 11, 2, 5, 59) + timedelta(seconds=20 * n) for n in range(1, 7)]

    def test_paris(self) -> None:
        assert ticks("30 2 * * *", PARIS, utc(2025, 10, 24, 12), 3) == [
            utc(2025, 10, 25, 0, 30),
            utc(2025, 10, 26, 0, 30),  # 02:30 CEST, once
            utc(2025, 10, 27, 1, 30),
        ]


class TestExpressions:
    def test_six_fields_put_seconds_last(self) -> None:
        assert ticks("* * * * * */2", "UTC", utc(2025, 1, 1, 0, 0, 1), 3) == [
            utc(2025, 1, 1, 0, 0, 2),
            utc(2025, 1, 1, 0, 0, 4),
            utc(2025, 1, 1, 0, 0, 6),
        ]

    def test_ticks_are_strictly_after_the_start(self) -> None:
        assert ticks("0 3 * * *", "UTC", utc(2025, 1, 1, 3), 1) == [utc(2025, 1, 2, 3)]

    def test_aliases(self) -> None:
        assert ticks("@daily", PARIS, utc(2025, 1, 1, 12), 1) == [utc(2025, 1, 1, 23)]

    def test_hash_expressions_spread_by_key(self) -> None:
        first = Cron("H 3 * * *", "UTC", hash_id="a").next_after(utc(2025, 1, 1))
        assert first == Cron("H 3 * * *", "UTC", hash_id="a").next_after(utc(2025, 1, 1))
        others = {Cron("H 3 * * *", "UTC", hash_id=k).next_after(utc(2025, 1, 1)) for k in "bcdef"}
        assert len(others | {first}) > 1

    @pytest.mark.parametrize(
        ("expression", "words"),
        [
            ("0 3 * *", "has 4 fields"),
            ("* * * * * * *", "has 7 fields"),
            ("61 * * * *", "not a valid cron expression"),
            ("a b c d e", "not a valid cron expression"),
            ("", "non-empty string"),
            (None, "non-empty string"),
        ],
    )
    def test_invalid_expressions(self, expression: object, words: str) -> None:
        with pytest.raises(CronError, match=words):
            Cron(expression, "UTC")  # type: ignore[arg-type]

    def test_an_expression_that_never_matches(self) -> None:
        with pytest.raises(CronError, match="never matches"):
            Cron("0 0 30 2 *", "UTC").next_after(utc(2025, 1, 1))

    def test_unknown_zone(self) -> None:
        with pytest.raises(CronError, match="unknown time zone 'Mars/Olympus'"):
            Cron("0 3 * * *", "Mars/Olympus")


class TestTicksBetween:
    def test_a_long_gap_on_a_fast_schedule_is_cheap_and_counted(self) -> None:
        cron = Cron("* * * * * */2", "UTC")
        latest, count, exact = cron.ticks_between(utc(2025, 1, 1), utc(2025, 1, 8), 1)
        assert latest == [utc(2025, 1, 8)]
        assert not exact and count >= 1
        latest, count, exact = cron.ticks_between(utc(2025, 1, 1), utc(2025, 1, 8), 100)
        assert latest == [utc(2025, 1, 8) - timedelta(seconds=2 * n) for n in range(99, -1, -1)]

    def test_a_short_range_is_counted_exactly(self) -> None:
        cron = Cron("0 3 * * *", PARIS)
        latest, count, exact = cron.ticks_between(utc(2025, 1, 1), utc(2025, 1, 8), 100)
        assert latest == [utc(2025, 1, day, 2) for day in range(1, 8)]
        assert (count, exact) == (7, True)

    def test_both_ends_are_included(self) -> None:
        cron = Cron("0 3 * * *", "UTC")
        latest, count, exact = cron.ticks_between(utc(2025, 1, 1, 3), utc(2025, 1, 3, 3), 10)
        assert latest == [utc(2025, 1, 1, 3), utc(2025, 1, 2, 3), utc(2025, 1, 3, 3)]
        assert (count, exact) == (3, True)
