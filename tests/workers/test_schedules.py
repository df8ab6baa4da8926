"""Recurring jobs run by real supervisors: each tick enqueued once however many supervisors
race for it, an admin's switch obeyed before the next tick, one catch-up after downtime, and a
schedule that cannot run refused at start-up.

The schedules come from SQLQUEUE["SCHEDULES"] through the environment (tests/settings.py), so
every supervisor syncs them to the table itself.
"""

from __future__ import annotations

import itertools
import json
import signal
import time
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job, Schedule
from django_sqlqueue.states import Status
from tests.probes import Line, Probes
from tests.test_admin.helpers import staff_client
from tests.testapp.models import Execution

from .conftest import WorkerProcesses, wait_for

pytestmark = pytest.mark.workers


def schedules_env(**entries: dict[str, Any]) -> dict[str, str]:
    return {"SQLQUEUE_TEST_SCHEDULES": json.dumps(entries)}


def jobs_of(key: str) -> list[Job]:
    """The schedule's jobs, by tick."""
    jobs = Job.objects.filter(idempotency_key__startswith=f"schedule:{key}:")
    return sorted(jobs, key=lambda job: tick_of(job, key))


def ticks_of(key: str) -> list[datetime]:
    """The ticks enqueued, from the jobs' keys (a job handed back at shutdown or retried
    changes its run_at, never its key)."""
    return [tick_of(job, key) for job in jobs_of(key)]


def tick_of(job: Job, key: str) -> datetime:
    """The tick a job was enqueued for, from its idempotency key."""
    assert job.idempotency_key is not None
    stamp = job.idempotency_key.removeprefix(f"schedule:{key}:")
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt_timezone.utc)


def assert_consecutive(ticks: list[datetime], step: float) -> None:
    """Every tick from the first to the last, each once: no gap, no extra."""
    expected = [ticks[0] + timedelta(seconds=step * n) for n in range(len(ticks))]
    assert ticks == expected, [t.isoformat() for t in ticks]


def stop(workers: WorkerProcesses, *supervisors: Any) -> None:
    for supervisor in supervisors:
        supervisor.send_signal(signal.SIGTERM)
    for supervisor in supervisors:
        assert supervisor.wait(timeout=30) == 0, workers.log(supervisor)


def admin_action(client: Any, action: str, key: str) -> None:
    schedule = Schedule.objects.get(key=key)
    response = client.post(
        reverse("admin:django_sqlqueue_schedule_changelist"),
        {"action": action, "_selected_action": [schedule.pk]},
    )
    assert response.status_code == 302


def enqueuing_run(probes: Probes, job: Job) -> Line:
    """The scheduler run that enqueued `job`: the first to say so (another supervisor may
    find the job already there later), and the end of that run, in its supervisor."""
    fired = probes.find("schedule-fired", where=lambda line: job.pk in line["jobs"])
    assert fired, f"no supervisor says it enqueued job {job.pk}"
    return probes.wait("scheduler-tick", after=fired[0], pid=fired[0]["pid"])


def runs_before(probes: Probes, run: Line) -> list[Line]:
    """The scheduler runs of `run`'s supervisor before it, in order."""
    return [line for line in probes.find("scheduler-tick", pid=run["pid"]) if line["n"] < run["n"]]


def enqueued_late(probes: Probes, key: str) -> list[str]:
    """The schedule's jobs that the first scheduler run to look at the schedules at or after
    their tick, in the supervisor that enqueued them, left for a later run: what makes a tick
    wait. Each described."""
    late = []
    for job in jobs_of(key):
        tick = tick_of(job, key).timestamp()
        run = enqueuing_run(probes, job)
        passed = [earlier["now"] for earlier in runs_before(probes, run) if earlier["now"] >= tick]
        if passed:
            late.append(f"job {job.pk}: tick {tick}, left by the runs at {passed}")
    return late


def test_three_supervisors_enqueue_each_tick_once_and_obey_the_admin(
    workers: WorkerProcesses, probes: Probes
) -> None:
    env = schedules_env(
        every2s={"job": "tests.record", "cron": "* * * * * */2", "kwargs": {"label": "tick"}},
        failing={"job": "tests.fail_always", "cron": "* * * * * */2"},
        switched={"job": "tests.noop", "cron": "* * * * * */2"},
    )
    supervisors = [workers.start("-n", "1", "-v", "2", env=env) for _ in range(3)]
    for supervisor in supervisors:
        wait_for(lambda s=supervisor: "Scheduler: 3 schedule(s)" in workers.log(s), 30)
    staff = staff_client("ops", "view_schedule", "change_schedule")
    wait_for(lambda: len(ticks_of("switched")) >= 2, 10)

    admin_action(staff, "disable_schedules", "switched")
    disabled_at = timezone.now()
    # Two ticks of the same cron pass (enqueued for its sibling), none of them enqueued.
    wait_for(lambda: len([t for t in ticks_of("every2s") if t > disabled_at]) >= 2, 30)
    admin_action(staff, "enable_schedules", "switched")
    enabled_at = timezone.now()
    wait_for(lambda: any(t > enabled_at for t in ticks_of("switched")), 30)
    wait_for(lambda: len(ticks_of("every2s")) >= 8, 20)
    stop(workers, *supervisors)

    # Each tick once: consecutive 2-second ticks, each job run once, at its tick.
    ticks = ticks_of("every2s")
    assert_consecutive(ticks, 2)
    assert all(tick.second % 2 == 0 for tick in ticks)
    assert [job.run_at for job in jobs_of("every2s") if job.status == Status.COMPLETED] == [
        tick_of(job, "every2s") for job in jobs_of("every2s") if job.status == Status.COMPLETED
    ]
    executions = Execution.objects.filter(label="tick")
    assert executions.count() == executions.values("job_id").distinct().count()
    assert set(executions.values_list("job_id", flat=True)) == {
        job.pk for job in jobs_of("every2s") if job.status == Status.COMPLETED
    }
    assert len(executions) >= len(ticks) - 1  # the last tick may not have run before the stop
    # Enqueued as the tick came (created_at is when the job was made): never before it, and
    # by the first run of the scheduler that looked at the schedules after it.
    assert all(job.created_at >= tick_of(job, "every2s") for job in jobs_of("every2s"))
    assert enqueued_late(probes, "every2s") == []
    # Which supervisor enqueued which tick: each tick by one of them, never twice.
    enqueued = [
        line
        for supervisor in supervisors
        for line in workers.log(supervisor).splitlines()
        if "Schedule every2s: job" in line and "already enqueued" not in line
    ]
    assert len(enqueued) == len(ticks)

    # A failing job's schedule keeps ticking: each tick is its own job (a retry moves the
    # job's run_at; its key keeps the tick).
    failing = jobs_of("failing")
    assert_consecutive(ticks_of("failing"), 2)
    assert len(failing) >= 7
    assert any(job.status in (Status.FAILED, Status.DEAD) for job in failing)

    # Disabled from the admin: no tick after the switch. Enabled again: the latest missed
    # tick once (missed="latest"; the supervisors read the switch within a second, so that
    # tick is at most 2 s before it), then every tick.
    switched = ticks_of("switched")
    before = [t for t in switched if t <= disabled_at]
    after = [t for t in switched if t > disabled_at]
    assert_consecutive(before, 2)
    assert_consecutive(after, 2)
    assert after[0] > enabled_at - timedelta(seconds=2), (disabled_at, enabled_at, switched)
    assert after[0] - before[-1] >= timedelta(seconds=4)
    # The switch back on was obeyed at the first reread of the schedules after it was written
    # (a reread that began after a run that ended after the switch): that run enqueued the
    # catch-up tick.
    [catch_up] = [job for job in jobs_of("switched") if tick_of(job, "switched") == after[0]]
    run = enqueuing_run(probes, catch_up)
    assert run["refreshed"], run
    earlier = runs_before(probes, run)
    missed = [
        reread["now"]
        for previous, reread in itertools.pairwise(earlier)
        if reread["refreshed"] and previous["now"] >= enabled_at.timestamp()
    ]
    assert missed == [], f"rereads after the switch that left the schedule disabled: {missed}"
    logs = "".join(workers.log(supervisor) for supervisor in supervisors)
    assert "Schedule switched: " in logs and "missed tick(s) not enqueued" in logs

    # The rows the supervisors synced from the settings.
    row = Schedule.objects.get(key="every2s")
    assert (row.job_name, row.cron, row.kwargs, row.source) == (
        "tests.record",
        "* * * * * */2",
        {"label": "tick"},
        "settings",
    )
    assert row.last_run_at == ticks[-1]


def test_one_catch_up_after_downtime(workers: WorkerProcesses) -> None:
    env = schedules_env(every1s={"job": "tests.noop", "cron": "* * * * * *"})
    supervisor = workers.start("-n", "1", env=env)
    wait_for(lambda: len(ticks_of("every1s")) >= 2, 30)
    stop(workers, supervisor)
    stopped_at = timezone.now()
    # A clock, not an event: the downtime is time passing with no supervisor running, so no
    # process can say when it has been long enough (four ticks or so).
    time.sleep(4)
    restarted_at = timezone.now()
    supervisor = workers.start("-n", "1", env=env)
    wait_for(lambda: any(t > restarted_at + timedelta(seconds=1) for t in ticks_of("every1s")), 30)
    stop(workers, supervisor)

    ticks = ticks_of("every1s")
    before = [t for t in ticks if t <= stopped_at]
    after = [t for t in ticks if t > stopped_at]
    assert_consecutive(before, 1)
    assert_consecutive(after, 1)
    # The restarted supervisor enqueued the latest missed tick once (its first tick, from
    # before it started), then every tick: the ticks of the downtime are left out.
    assert after[0] - before[-1] >= timedelta(seconds=4)
    assert after[0] <= restarted_at + timedelta(seconds=5)
    catch_up = jobs_of("every1s")[len(before)]
    assert catch_up.created_at >= restarted_at
    assert "Schedule every1s: " in workers.log(supervisor)
    assert "missed tick(s) not enqueued (missed='latest')" in workers.log(supervisor)


def test_a_schedule_that_cannot_run_stops_the_start_with_a_check_error(
    workers: WorkerProcesses,
) -> None:
    env = schedules_env(nightly={"job": "tests.record", "cron": "0 3 * *"})
    supervisor = workers.start("-n", "1", env=env)
    assert supervisor.wait(timeout=60) != 0
    log = workers.log(supervisor)
    assert "(django_sqlqueue.E021) Schedule 'nightly' (SQLQUEUE['SCHEDULES'])" in log
    assert "'0 3 * *' has 4 fields" in log
    assert "HINT: Write 5 fields" in log
    assert not Schedule.objects.exists()


def test_no_scheduler(workers: WorkerProcesses) -> None:
    env = schedules_env(every1s={"job": "tests.noop", "cron": "* * * * * *"})
    workers.run("-n", "1", "--burst", "--no-scheduler", env=env)
    assert not Schedule.objects.exists() and not Job.objects.exists()
