"""The worker's periodic activity summary (the per-job lines are DEBUG only)."""

from __future__ import annotations

import logging

import pytest

from django_sqlqueue.runtime.activity_log import ActivitySummary


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def summary(clock: Clock) -> ActivitySummary:
    return ActivitySummary("w1", logging.getLogger("tests.activity"), interval=30, clock=clock)


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tests.activity"]


def test_reports_once_per_interval_with_the_counts_since_the_last(
    summary: ActivitySummary, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tests.activity")
    summary.record(completed=20)
    clock.now += 29
    summary.record(completed=5, failed=1)
    assert messages(caplog) == []

    clock.now += 1
    summary.record(completed=1)
    assert messages(caplog) == ["Worker w1: completed 26, failed 1 in 30.0 s"]

    clock.now += 31
    summary.record(failed=2)
    assert messages(caplog)[-1] == "Worker w1: completed 0, failed 2 in 31.0 s"


def test_final_report_says_nothing_when_nothing_happened(
    summary: ActivitySummary, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tests.activity")
    clock.now += 5
    summary.report()
    assert messages(caplog) == []

    summary.record(completed=3)
    clock.now += 2.5
    summary.report()
    assert messages(caplog) == ["Worker w1: completed 3, failed 0 in 2.5 s"]
