"""Clocks that disagree or step: every tick of a schedule is stored exactly once.

A review ran one supervisor 30 s fast beside two correct ones: it enqueued ticks early and
moved the schedule past 14 ticks of a 2-second schedule, for every supervisor. Ticks are now
decided on the database's clock. A supervisor here runs under libfaketime
(scripts/install_faketime.sh), which skews or steps the clock of its processes only; the
time since boot, which the scheduler carries the database's clock forward with, is left alone
as a real step leaves it.
"""

from __future__ import annotations

import glob
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from tests.testapp.models import Execution

from .conftest import WorkerProcesses, wait_for
from .test_schedules import assert_consecutive, schedules_env, stop, ticks_of

pytestmark = pytest.mark.workers

EVERY_2S = {"job": "tests.record", "cron": "* * * * * */2", "kwargs": {"label": "tick"}}


def faketime(**settings: str) -> dict[str, str]:
    """The environment that runs a process under libfaketime with `settings`."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if not found:
        raise AssertionError(
            "libfaketime is not installed (scripts/install_faketime.sh installs Debian's)"
        )
    return {"LD_PRELOAD": found[0], "FAKETIME_DONT_FAKE_MONOTONIC": "1", **settings}


def test_supervisors_whose_clocks_disagree_by_a_minute_enqueue_each_tick_once(
    workers: WorkerProcesses,
) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("the supervisors of an SQLite file share one host, and its clock")
    env = schedules_env(every2s=EVERY_2S)
    supervisors = [
        workers.start("-n", "1", env={**env, **faketime(FAKETIME=offset)})
        for offset in ("+30s", "-30s")
    ]
    supervisors.append(workers.start("-n", "1", env=env))
    for supervisor in supervisors:
        wait_for(lambda s=supervisor: "Scheduler: 1 schedule(s)" in workers.log(s), 30)
    started = timezone.now()
    wait_for(lambda: len([t for t in ticks_of("every2s") if t > started]) >= 6, 40)
    # The ticks ran, too (waited for before the stop: a tick stored just before it may be
    # handed back unstarted, as a shutdown does).
    wait_for(lambda: Execution.objects.filter(label="tick").count() >= 6, 40)
    stop(workers, *supervisors)

    ticks = ticks_of("every2s")
    assert_consecutive(ticks, 2)
    assert ticks[-1] <= timezone.now(), "no tick enqueued ahead of its time"
    for supervisor in supervisors:
        assert "missed tick" not in workers.log(supervisor)


def test_a_clock_stepped_forward_and_back_stores_each_tick_once(
    workers: WorkerProcesses, tmp_path: Path
) -> None:
    """On SQLite the database's clock is this host's, so the step is the scheduler's own: the
    ticks it jumps over are enqueued, and stepping back enqueues none twice. Elsewhere a
    supervisor's own clock does not decide ticks at all."""
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    clock = faketime(FAKETIME_TIMESTAMP_FILE=str(offset), FAKETIME_CACHE_DURATION="1")
    supervisor = workers.start("-n", "1", env={**schedules_env(every2s=EVERY_2S), **clock})
    wait_for(lambda: len(ticks_of("every2s")) >= 2, 30)

    offset.write_text("+60s\n")
    sqlite = connection.vendor == "sqlite"
    if sqlite:  # the 30 ticks the step jumped over, at once
        wait_for(lambda: "stepped forward by 60" in workers.log(supervisor), 30)
        wait_for(lambda: len(ticks_of("every2s")) >= 32, 30)
    before_back = len(ticks_of("every2s"))

    offset.write_text("+40s\n")  # 20 s back
    if sqlite:
        wait_for(lambda: "stepped back by 20" in workers.log(supervisor), 30)
    # Ticks go on once the clock is back at the next one (20 s on SQLite).
    wait_for(lambda: len(ticks_of("every2s")) >= before_back + 2, 60)
    stop(workers, supervisor)

    ticks = ticks_of("every2s")
    assert_consecutive(ticks, 2)
    assert "missed tick" not in workers.log(supervisor)
