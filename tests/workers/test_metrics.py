"""`runworkers --metrics-port`: counters equal what ran, across several worker processes, a
SIGKILLed worker and recycled ones; /healthz; the private metrics directory is removed."""

from __future__ import annotations

import glob
import os
import re
import signal
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status
from tests.testapp.jobs import behind_gate, fail_always, noop, sleep
from tests.testapp.models import Counter as CounterRow
from tests.testapp.models import Execution

from .conftest import wait_for

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.workers


def metrics_port(workers, process) -> int:
    def port() -> int | None:
        found = re.search(r"Metrics on http://[\d.]+:(\d+)/metrics", workers.log(process))
        return int(found.group(1)) if found else None

    return int(wait_for(port, timeout=30))


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = get(port, "/metrics")
    assert status == 200, text
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def jobs_total(values, name: str, outcome: str) -> float:
    key = ("sqlqueue_jobs_total", (("name", name), ("outcome", outcome), ("queue", "default")))
    return values.get(key, 0.0)


def history_outcomes() -> Counter[tuple[str, str]]:
    """(job name, outcome) → attempts, from the rows themselves: what really ran."""
    counted: Counter[tuple[str, str]] = Counter()
    for job in Job.objects.all():
        for index, entry in enumerate(job.history):
            outcome = entry["outcome"]
            if outcome == "released":
                continue
            last = index == len(job.history) - 1
            if outcome == "completed":
                counted[(job.name, "completed")] += 1
            elif outcome == "lost":
                counted[(job.name, "lost")] += 1
            elif outcome == "cancelled":
                counted[(job.name, "cancelled")] += 1
            else:
                counted[(job.name, "dead" if last and job.status == "dead" else "failed")] += 1
    return counted


def test_counters_equal_what_ran_with_workers_killed(workers, tmp_path: Path):
    noop.enqueue_many([{} for _ in range(40)])
    for _ in range(4):
        fail_always.enqueue()  # 3 attempts: 2 failed, then dead
    victim = sleep.enqueue(2)
    supervisor = workers.start("-n", "3", "--metrics-port", "0", env={"TMPDIR": str(tmp_path)})
    port = metrics_port(workers, supervisor)
    started = wait_for(
        lambda: Execution.objects.filter(job_id=victim.pk, label="sleep-start").first(), 30
    )
    os.kill(started.worker_pid, signal.SIGKILL)

    def finished() -> bool:
        return not Job.objects.exclude(status__in=[Status.COMPLETED, Status.DEAD]).exists()

    wait_for(finished, timeout=90)
    ran = history_outcomes()
    assert ran[("tests.sleep", "lost")] == 1
    assert ran[("tests.fail_always", "dead")] == 4

    def counted() -> Counter[tuple[str, str]]:
        values = samples(port)
        return Counter(
            {
                (dict(labels)["name"], dict(labels)["outcome"]): int(value)
                for (name, labels), value in values.items()
                if name == "sqlqueue_jobs_total" and value
            }
        )

    wait_for(lambda: counted() == ran, timeout=15)
    values = samples(port)
    assert jobs_total(values, "tests.noop", "completed") == 40
    assert jobs_total(values, "tests.fail_always", "failed") == 8
    assert jobs_total(values, "tests.sleep", "lost") == 1
    # Every attempt a worker finished has a duration; the lost one has none. Waits: all.
    durations = sum(v for (n, _), v in values.items() if n == "sqlqueue_job_duration_seconds_count")
    assert durations == sum(ran.values()) - 1
    waits = sum(v for (n, _), v in values.items() if n == "sqlqueue_job_wait_seconds_count")
    assert waits == sum(ran.values())

    # Gauges: read from the database by the supervisor, a few seconds old at most.
    def gauge(status: str) -> float:
        return samples(port).get(("sqlqueue_jobs", (("queue", "default"), ("status", status))), 0)

    wait_for(lambda: gauge("completed") == 41, timeout=20, interval=0.5)
    assert gauge("dead") == 4
    wait_for(lambda: samples(port).get(("sqlqueue_workers", (("state", "idle"),))) == 3, timeout=20)
    assert get(port, "/healthz")[0] == 200
    assert get(port, "/nothing")[0] == 404

    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=60) == 0
    assert not glob.glob(str(tmp_path / "sqlqueue-metrics-*")), "metrics directory left behind"


def test_recycled_workers_files_are_folded(workers, tmp_path: Path):
    noop.enqueue_many([{} for _ in range(30)])
    supervisor = workers.start(
        "-n", "1", "--max-jobs", "5", "--metrics-port", "0", env={"TMPDIR": str(tmp_path)}
    )
    port = metrics_port(workers, supervisor)
    wait_for(lambda: not Job.objects.exclude(status=Status.COMPLETED).exists(), timeout=60)
    wait_for(lambda: jobs_total(samples(port), "tests.noop", "completed") == 30, timeout=15)
    [directory] = glob.glob(str(tmp_path / "sqlqueue-metrics-*"))
    # Six worker processes ran; only the archive, the supervisor's and the live worker's
    # files remain (one of each kind at most).
    files = [os.path.basename(f) for f in glob.glob(os.path.join(directory, "*.db"))]
    assert len(files) <= 6, files
    assert "counter_archive.db" in files
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=60) == 0


def test_healthz_fails_while_shutting_down_and_when_workers_keep_dying(workers, tmp_path):
    from tests.testapp.jobs import hard_exit

    supervisor = workers.start("-n", "1", "--metrics-port", "0", "--grace-period", "30")
    port = metrics_port(workers, supervisor)
    wait_for(lambda: get(port, "/healthz")[0] == 200, timeout=30)
    assert get(port, "/healthz")[1].startswith("ok")

    # A worker that dies at once, again and again: restarted with a growing delay, and the
    # health check says so after the third death in a minute.
    hard_exit.enqueue_many([{} for _ in range(40)])
    wait_for(lambda: get(port, "/healthz")[0] == 503, timeout=60, interval=0.2)
    assert "3 workers died in the last" in get(port, "/healthz")[1]
    Job.objects.all().delete()

    long = sleep.enqueue(20)
    wait_for(lambda: Job.objects.filter(pk=long.pk, status=Status.RUNNING).exists(), 60)
    supervisor.send_signal(signal.SIGTERM)
    wait_for(lambda: get(port, "/healthz") == (503, "shutting down\n"), timeout=10)
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=60) == 0


def test_metrics_port_in_use_is_a_clear_error(workers):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = workers.start("-n", "1", "--metrics-port", str(port))
        assert process.wait(timeout=60) == 1
        assert f"cannot serve metrics on 127.0.0.1:{port}" in workers.log(process)
    time.sleep(0)


def test_slots_busy_and_free_are_gauged(workers, tmp_path: Path):
    """runworkers --concurrency: the supervisor counts its workers' slots running a job."""
    CounterRow.objects.create(name="gate", value=0)
    for _ in range(3):
        behind_gate.enqueue()
    supervisor = workers.start(
        "-n", "2", "--concurrency", "4", "--metrics-port", "0", env={"TMPDIR": str(tmp_path)}
    )
    port = metrics_port(workers, supervisor)

    def slots(state: str) -> float | None:
        return samples(port).get(("sqlqueue_worker_slots", (("state", state),)))

    wait_for(lambda: slots("busy") == 3, timeout=30)
    assert slots("free") == 5
    CounterRow.objects.filter(name="gate").update(value=1)
    wait_for(lambda: slots("busy") == 0, timeout=30)
    assert slots("free") == 8
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=60) == 0
