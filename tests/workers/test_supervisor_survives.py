"""Nothing a schedule's row can hold stops a supervisor, and a supervisor whose loop fails
anyway does not stay up without it.

A review found a `Schedule` row whose kwargs were the JSON list `[1, 2]` raising out of the
scheduler, ending the supervisor's loop while the process stayed alive: no more ticks, dead
workers not replaced. Here hypothesis writes every column of a row, edited as by hand, under
one real supervisor, which must keep ticking, keep a good schedule running and replace a
killed worker.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import datetime
from datetime import timezone as dt_timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_sqlqueue import operations
from django_sqlqueue.models import Job, Schedule
from django_sqlqueue.runtime.supervisor import EXIT_LOOP_FAILED
from django_sqlqueue.states import Status
from tests.probes import Probes
from tests.testapp.jobs import cooperative

from .conftest import ROOT, WorkerProcesses, wait_for
from .test_schedules import schedules_env

pytestmark = pytest.mark.workers

#: The supervisors here read the schedule rows every 0.2 s instead of every second (the test
#: app sets the scheduler's REFRESH_SECONDS): each fuzzed row waits for two reads of the rows.
FAST_READS = {"SQLQUEUE_TEST_SCHEDULE_REFRESH": "0.2"}

EXAMPLES = int(os.environ.get("SQLQUEUE_SCHEDULE_FUZZ_EXAMPLES", "15"))


def text(max_size: int) -> st.SearchStrategy[str]:
    # Every character a column can store on all three databases (PostgreSQL refuses NUL).
    return st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=max_size,
    )


def moments() -> st.SearchStrategy[datetime | None]:
    return st.none() | st.datetimes(
        min_value=datetime(2000, 1, 1),
        max_value=datetime(2100, 1, 1),
        timezones=st.just(dt_timezone.utc),
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text(20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text(10), inner, max_size=4),
    max_leaves=8,
)

# A row as an admin, a script or a bad migration could leave it: valid values often enough
# that rows get as far as enqueuing, anything a column holds otherwise.
rows = st.fixed_dictionaries(
    {
        "key": text(199).map(lambda key: "f" + key),
        "job_name": st.sampled_from(["tests.noop", "tests.add", "tests.record", "no.such"])
        | text(255),
        "cron": st.sampled_from(["* * * * * *", "*/5 * * * *", "0 3 * * *", "61 * * * *"])
        | text(200),
        "declared_cron": st.sampled_from(["* * * * * *"]) | text(200),
        # Not None at the top: Django stores it as SQL NULL, which the column refuses.
        "kwargs": st.sampled_from([{}, {"a": 1, "b": 2}, [1, 2]])
        | json_values.filter(lambda value: value is not None),
        "timezone": st.sampled_from(["UTC", "Europe/Paris", "Nowhere/Land", ""]) | text(64),
        "queue": st.sampled_from(["", "default", "mail"]) | text(100),
        "priority": st.none() | st.integers(-32768, 32767),
        "missed": st.sampled_from(["latest", "skip", "all", ""]) | text(8),
        "source": st.sampled_from(["code", "settings"]) | text(8),
        "removed_at": moments(),
        "next_run_at": moments(),
        "last_run_at": moments(),
        "last_job_id": st.none() | st.integers(1, 2**31 - 1),
    }
)


def worker_pids(log: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"Worker \S+ started \(pid (\d+)\)", log)]


def test_no_schedule_row_stops_the_supervisor(workers: WorkerProcesses, probes: Probes) -> None:
    env = schedules_env(good={"job": "tests.noop", "cron": "* * * * * *"}) | FAST_READS
    supervisor = workers.start("-n", "1", env=env)
    probes.wait("schedule-fired", key="good")
    first_tick = probes.wait("scheduler-tick")
    pid = first_tick["pid"]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(row=rows)
    def survives(row: dict[str, Any]) -> None:
        Schedule.objects.exclude(key="good").delete()
        Schedule.objects.create(enabled=True, **row)
        written = probes.mark()
        # Two full runs that read the rows after the write: the second began after the
        # first ended, which was after the row was written.
        probes.wait("scheduler-tick", after=written, pid=pid, count=2, refreshed=True)
        assert supervisor.poll() is None, workers.log(supervisor)

    survives()
    Schedule.objects.exclude(key="good").delete()

    after_fuzz = probes.mark()
    probes.wait("schedule-fired", key="good", after=after_fuzz)
    # Its loop still replaces a dead worker.
    [worker] = worker_pids(workers.log(supervisor))
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: len(worker_pids(workers.log(supervisor))) == 2, 30)
    probes.wait("schedule-fired", key="good", after=probes.mark())
    supervisor.send_signal(signal.SIGTERM)
    assert workers.wait(supervisor, 60) == 0
    log = workers.log(supervisor)
    # Each bad row was the scheduler's to skip: none reached the loop's guard.
    assert "The supervisor's scheduler failed" not in log, log
    assert "The supervisor's loop failed" not in log, log


def test_a_list_of_kwargs_is_logged_once_and_skipped(
    workers: WorkerProcesses, probes: Probes
) -> None:
    """The row the review met, and what the log says of it."""
    env = schedules_env(good={"job": "tests.noop", "cron": "* * * * * *"}) | FAST_READS
    supervisor = workers.start("-n", "1", env=env)
    probes.wait("schedule-fired", key="good")
    Schedule.objects.create(
        key="listed",
        job_name="tests.add",
        cron="* * * * * *",
        declared_cron="* * * * * *",
        kwargs=[1, 2],
        source="settings",
        next_run_at=None,
    )
    written = probes.mark()
    probes.wait("scheduler-tick", after=written, count=3, refreshed=True)
    probes.wait("schedule-fired", key="good", after=written)
    supervisor.send_signal(signal.SIGTERM)
    assert workers.wait(supervisor, 60) == 0
    log = workers.log(supervisor)
    message = "Schedule listed cannot run: its kwargs must be a JSON object"
    assert log.count(message) == 1, log
    assert not Job.objects.filter(idempotency_key__startswith="schedule:listed:").exists()


# A supervisor whose loop raises (a bug: here `reap` is made to raise once a file exists).
FAILING_LOOP = """
import os
from pathlib import Path

import django

django.setup()
from django.core.management import execute_from_command_line

from django_sqlqueue.runtime.supervisor import Supervisor

flag = Path(os.environ["FAIL_FLAG"])
reap = Supervisor.reap


def failing_reap(self):
    if flag.exists():
        raise RuntimeError("a bug in the loop")
    reap(self)


Supervisor.reap = failing_reap
execute_from_command_line(
    ["manage.py", "runworkers", "-n", "2", "--metrics-port", "0", "--grace-period", "60"]
)
"""


def healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            return response.status, response.read().decode().strip()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode().strip()


def test_a_failed_loop_stops_the_workers_and_exits_non_zero(
    worker_env: dict[str, str], tmp_path: Path
) -> None:
    pytest.importorskip("prometheus_client")
    flag = tmp_path / "fail"
    log_path = tmp_path / "supervisor.log"
    process = subprocess.Popen(
        [sys.executable, "-c", FAILING_LOOP],
        env={**worker_env, "FAIL_FLAG": str(flag)},
        cwd=ROOT,
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        job = cooperative.enqueue(seconds=120)
        wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.RUNNING, 60)
        port = int(re.search(r"Metrics on http://[\d.]+:(\d+)/", log_path.read_text())[1])
        assert healthz(port)[0] == 200

        flag.touch()
        # The workers get the grace period to finish; meanwhile /healthz says why.
        wait_for(lambda: "loop failed" in healthz(port)[1], 30)
        assert healthz(port) == (
            503,
            "the supervisor's loop failed (RuntimeError: a bug in the loop); exiting",
        )
        operations.cancel_many([job.pk])  # the running job stops at its next safe point
        assert process.wait(timeout=60) == EXIT_LOOP_FAILED
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    log = log_path.read_text()
    assert "The supervisor's loop failed (RuntimeError: a bug in the loop)" in log, log
    assert "Traceback" in log
    # No worker outlived it: the whole process group is gone.
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)
    assert Job.objects.get(pk=job.pk).status == Status.CANCELLED
