"""The clock the scheduler decides ticks on: the database's, read in its own time zone
handling, and a step of it noticed."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from django_sqlqueue.databases import queue_database
from django_sqlqueue.runtime import scheduler_clock
from django_sqlqueue.runtime.scheduler_clock import SchedulerClock

pytestmark = pytest.mark.django_db


def test_the_database_clock_reads_as_a_time_like_djangos(alias: str) -> None:
    before = timezone.now()
    read = queue_database(alias).current_time()
    after = timezone.now()
    assert timezone.is_aware(read)
    # The server runs on this machine: its clock is this one (to a query's latency).
    assert before - timedelta(seconds=1) <= read <= after + timedelta(seconds=1)


@override_settings(USE_TZ=False, TIME_ZONE="America/New_York")
def test_without_time_zones_it_is_local_and_naive_as_djangos(alias: str) -> None:
    read = queue_database(alias).current_time()
    assert timezone.is_naive(read)
    assert abs((read - timezone.now()).total_seconds()) < 1


def test_a_step_is_noticed_and_logged(
    alias: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = SchedulerClock(alias)
    boot = [1000.0]
    monkeypatch.setattr(scheduler_clock, "since_boot", lambda: boot[0])
    clock.read()
    boot[0] += 1.0  # a second passes on both clocks: no step
    assert abs((clock.estimate() - timezone.now()).total_seconds()) < 1.5
    clock.read()
    assert clock.take_step() == 0.0
    boot[0] -= 60.0  # the database's clock moved 60 s more than the time since boot
    with caplog.at_level(logging.WARNING, logger="django_sqlqueue"):
        clock.read()
    assert 59 < clock.take_step() < 61
    assert clock.take_step() == 0.0, "taken once"
    assert "stepped forward by 60" in caplog.text
