"""Unique jobs under a race of real processes, and after the job ran."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status
from tests.testapp.jobs import unique_record, unique_window
from tests.testapp.models import Execution

from .conftest import ROOT

pytestmark = pytest.mark.workers

PROCESSES = 6


def race(worker_env, tmp_path, job_name: str, label: str) -> list[tuple[int, bool]]:
    """PROCESSES processes enqueue the same unique job at the same instant."""
    start = time.time() + 3.0
    script = tmp_path / "race.py"
    script.write_text(
        "import sys, time, django\n"
        "django.setup()\n"
        "from django.db import connection\n"
        "from django_sqlqueue import enqueue\n"
        "connection.ensure_connection()\n"
        f"time.sleep(max(0.0, {start} - time.time()))\n"
        f"job = enqueue({job_name!r}, label={label!r})\n"
        "print('RESULT', job.pk, int(job.deduplicated), flush=True)\n"
    )
    children = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env=worker_env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    results = []
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        line = next(line for line in out.splitlines() if line.startswith("RESULT"))
        _, pk, dedup = line.split()
        results.append((int(pk), bool(int(dedup))))
    return results


@pytest.mark.parametrize("handler", [unique_record, unique_window], ids=["unique", "unique_for"])
def test_a_race_of_processes_stores_one_job(workers, worker_env, tmp_path, handler):
    results = race(worker_env, tmp_path, handler.name, "race")
    assert len({pk for pk, _ in results}) == 1, results
    assert sorted(dedup for _, dedup in results) == [False] + [True] * (PROCESSES - 1)
    assert Job.objects.filter(name=handler.name).count() == 1


def test_after_the_job_ran_a_new_one_is_stored(workers):
    first = unique_record.enqueue(label="again")
    assert unique_record.enqueue(label="again").deduplicated
    workers.run("--burst", "-n", "1")
    assert Job.objects.get(pk=first.pk).status == Status.COMPLETED
    second = unique_record.enqueue(label="again")
    assert not second.deduplicated and second.pk != first.pk
    workers.run("--burst", "-n", "1")
    assert Execution.objects.filter(label="again").count() == 2
