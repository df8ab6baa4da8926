"""`runworkers --reload` (development only): a code change restarts the supervisor and its
workers, so a job added while they run is run by the new code instead of going dead as
unknown ("No handler for job ... in this deployment"), and an edited job runs its new code.

A small app is written to a temporary directory for each test, so that it can be edited.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status
from tests.probes import Probes
from tests.runs import sqlite_runs_only
from tests.workers.conftest import WorkerProcesses, wait_for

pytestmark = [
    pytest.mark.workers,
    pytest.mark.slow,
    # The reloader and the process restarts do not depend on the database, which the other
    # worker tests cover: half a minute saved on each server's run.
    sqlite_runs_only("the reload mechanics do not depend on the database"),
]

JOBS_V1 = """
from django_sqlqueue import job


@job("reloadapp.greet")
def greet():
    return "v1"
"""
JOBS_V2 = """
from django_sqlqueue import job


@job("reloadapp.greet")
def greet():
    return "v2"


@job("reloadapp.added")
def added(n):
    return n * 2
"""


@pytest.fixture
def reloadable_app(tmp_path: Path, worker_env: dict[str, str]) -> dict[str, str]:
    """An app `reloadapp` with a jobs.py, and settings that install it; the environment."""
    project = tmp_path / "project"
    (project / "reloadapp").mkdir(parents=True)
    (project / "reloadapp" / "__init__.py").write_text("")
    (project / "reloadapp" / "jobs.py").write_text(JOBS_V1)
    (project / "reload_settings.py").write_text(
        "from tests.settings import *  # noqa\nINSTALLED_APPS = [*INSTALLED_APPS, 'reloadapp']\n"
    )
    env = dict(worker_env)
    env["DJANGO_SETTINGS_MODULE"] = "reload_settings"
    env["PYTHONPATH"] = os.pathsep.join([str(project), env["PYTHONPATH"]])
    return env


def edit(path: Path, text: str) -> None:
    """Rewrite a file so that any reloader sees a newer modification time."""
    path.write_text(text)
    later = time.time() + 5
    os.utime(path, (later, later))


def finished(name: str, **fields: object) -> Job | None:
    job = Job.objects.filter(name=name, **fields).order_by("-id").first()
    return job if job is not None and job.status in (Status.COMPLETED, Status.DEAD) else None


def test_a_code_change_restarts_the_workers_on_the_new_code(
    workers: WorkerProcesses, reloadable_app: dict[str, str], tmp_path: Path, probes: Probes
) -> None:
    process = workers.start("-n", "1", "--reload", env=reloadable_app)
    Job.objects.create(name="reloadapp.greet")
    first = wait_for(lambda: finished("reloadapp.greet"), timeout=60)
    assert first.result == "v1", workers.log(process)
    wait_for(lambda: "Reloading on code changes" in workers.log(process), timeout=30)
    probes.wait("reloader-look")  # the reloader's first look recorded the files as they are

    edit(tmp_path / "project" / "reloadapp" / "jobs.py", JOBS_V2)
    wait_for(lambda: "jobs.py changed: restarting" in workers.log(process), timeout=30)
    wait_for(lambda: workers.log(process).count("Reloading on code changes") == 2, timeout=60)
    Job.objects.create(name="reloadapp.added", args=[21])
    Job.objects.create(name="reloadapp.greet")
    added = wait_for(lambda: finished("reloadapp.added"), timeout=60)
    assert (added.status, added.result) == (Status.COMPLETED, 42), workers.log(process)
    greet = wait_for(lambda: finished("reloadapp.greet", result="v2"), timeout=60)
    assert greet.status == Status.COMPLETED

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, workers.log(process)
    assert "Worker" in workers.log(process) and "stopped" in workers.log(process)


def test_a_change_that_breaks_start_up_is_waited_out(
    workers: WorkerProcesses, reloadable_app: dict[str, str], tmp_path: Path, probes: Probes
) -> None:
    jobs = tmp_path / "project" / "reloadapp" / "jobs.py"
    process = workers.start("-n", "1", "--reload", env=reloadable_app)
    wait_for(lambda: "Reloading on code changes" in workers.log(process), timeout=60)
    probes.wait("reloader-look")  # the child's reloader has seen the files
    edit(jobs, JOBS_V1 + "\nraise ImportError('broken on purpose')\n")
    wait_for(lambda: "start again at the next change" in workers.log(process), timeout=60)
    assert process.poll() is None, "a broken change must not end the command"
    # Now the command itself (no child left) watches the files: its reloader has seen them.
    probes.wait("reloader-look", pid=process.pid)
    edit(jobs, JOBS_V2)
    wait_for(lambda: workers.log(process).count("Reloading on code changes") == 2, timeout=60)
    Job.objects.create(name="reloadapp.added", args=[1])
    added = wait_for(lambda: finished("reloadapp.added"), timeout=60)
    assert added.result == 2
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, workers.log(process)


def test_reload_is_refused_with_burst(workers: WorkerProcesses) -> None:
    process = workers.start("--reload", "--burst")
    assert process.wait(timeout=30) == 1
    assert "--reload runs until stopped" in workers.log(process)
