"""What observability costs on a table of 1,000,000 jobs. A benchmark, not a test.

    python -m benchmarks.observability                      # SQLite and PostgreSQL
    python -m benchmarks.observability --db mysql --rows 200000
    python -m benchmarks.observability --db sqlite --keep   # reuse the seeded database
    python -m benchmarks.observability --enqueue-only       # the OpenTelemetry enqueue cost

Seeds a fresh database (`bench_observe`) with the admin benchmark's million jobs
(benchmarks/admin_list.py: 97% completed, 1% each dead, failed and pending) and a day of
rollup rows and queue samples (3 queues, 8 job names, 2 outcomes, every minute), then measures,
as medians of several runs:

- the gauges' reading (metrics/state.py), which the supervisor and the web view do at most
  every 5 s: time and statements;
- a scrape of the supervisor's /metrics: rendering the last reading and the merged
  multiprocess files of 8 worker processes (50 job names, 3 queues, both histograms);
- the admin dashboard, hour and day: time and queries, through Django's test client;
- `manage.py jobhealth --max-pending-age`'s checks.

`--enqueue-only` measures one enqueue (its own INSERT, autocommit, SQLite) in three separate
processes: the OpenTelemetry API not installed (hidden from the import), installed without an
SDK, and with the SDK recording every span into memory. Prints the load average before and
after: figures taken while other work runs are not figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .admin_list import configure as configure_admin_list
from .admin_list import seed_sql
from .databases import bench_dir, django_database_named

DB_NAME = "bench_observe"
VENDORS = ("sqlite", "postgres", "mysql")


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def database_settings(vendor: str) -> dict[str, Any]:
    return django_database_named(vendor, DB_NAME, bench_dir() / f"{DB_NAME}.sqlite3")


def recreate_database(vendor: str) -> None:
    settings = database_settings(vendor)
    if vendor == "sqlite":
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{settings['NAME']}{suffix}").unlink(missing_ok=True)
    elif vendor == "postgres":
        import psycopg

        params = {"host": settings["HOST"], "port": settings["PORT"], "user": settings["USER"]}
        with psycopg.connect(**params, dbname="postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {DB_NAME}")
    else:
        import MySQLdb

        conn = MySQLdb.connect(
            host=settings["HOST"], port=int(settings["PORT"]), user=settings["USER"], password=""
        )
        try:
            cursor = conn.cursor()
            cursor.execute(f"DROP DATABASE IF EXISTS {DB_NAME}")
            cursor.execute(f"CREATE DATABASE {DB_NAME} CHARACTER SET utf8mb4")
        finally:
            conn.close()


def configure(vendor: str) -> None:
    """The admin benchmark's settings (admin and URLs included) on this benchmark's database."""
    import benchmarks.admin_list as admin_list

    admin_list.DB_NAME = DB_NAME
    admin_list.database_settings = database_settings  # type: ignore[assignment]
    configure_admin_list(vendor)


def seed(vendor: str, rows: int) -> None:
    from datetime import timedelta

    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from django_sqlqueue.metrics import rollups
    from django_sqlqueue.models import JobRollup, QueueSample

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(seed_sql(vendor, rows))
    now = timezone.now()
    rollup, samples = [], []
    for back in range(24 * 60):
        minute = rollups.minute_of((now - timedelta(minutes=back)).timestamp())
        for queue in ("default", "mail", "reports"):
            samples.append(QueueSample(minute=minute, queue=queue, pending=back % 50))
            for job in range(8):
                for outcome, count in (("completed", 30), ("failed", 1)):
                    rollup.append(
                        JobRollup(
                            minute=minute,
                            queue=queue,
                            name=f"app.job{job}",
                            outcome=outcome,
                            count=count,
                            duration_sum=count * 0.05,
                            wait_b1=count,
                        )
                    )
    JobRollup.objects.bulk_create(rollup, batch_size=5000)
    QueueSample.objects.bulk_create(samples, batch_size=5000)
    with connection.cursor() as cursor:
        if vendor == "postgres":
            cursor.execute("VACUUM ANALYZE")
        elif vendor == "mysql":
            for table in ("django_sqlqueue_job", "django_sqlqueue_jobrollup"):
                cursor.execute(f"ANALYZE TABLE {table}")
                cursor.fetchall()
    print(
        f"{vendor}: seeded {rows:,} jobs, {len(rollup):,} rollup rows in "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )


def timed(function: Any, repeat: int) -> tuple[float, float, float, int]:
    """Median and slowest wall milliseconds of `function()`, its median CPU milliseconds in
    this process (on SQLite the queries' too, whatever else the machine runs), and the
    statements of its last run."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    function()  # warm-up
    timings, cpu = [], []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            started, started_cpu = time.perf_counter(), time.process_time()
            function()
            timings.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(timings), max(timings), statistics.median(cpu), len(captured)


def worker_files(directory: str, processes: int = 8) -> None:
    """Metric files as 8 busy workers leave them: 50 names over 3 queues, every outcome."""
    from django.utils import timezone

    from django_sqlqueue.metrics import prometheus
    from django_sqlqueue.outcomes import OUTCOMES, AttemptEnd
    from django_sqlqueue.rows import ClaimedJob

    prometheus.use_directory(directory)
    watcher = prometheus.PrometheusWatcher()
    now = timezone.now()
    for index in range(5000):
        name = index % 50  # each job name in one queue, as projects have them
        job = ClaimedJob(
            id=index,
            name=f"app.job{name}",
            queue=("default", "mail", "reports")[name % 3],
            args=[],
            kwargs={},
            attempts=1,
            max_attempts=5,
            priority=0,
            run_at=now,
            created_at=now,
            started_at=now,
        )
        watcher(AttemptEnd(job, OUTCOMES[index % len(OUTCOMES)], 0.01 * (index % 7), 0.0))
    for kind in prometheus.FILE_KINDS:
        source = os.path.join(directory, f"{kind}_{os.getpid()}.db")
        for fake in range(1, processes):
            shutil.copy(source, os.path.join(directory, f"{kind}_{900000 + fake}.db"))


def run_one(vendor: str, rows: int, repeat: int, keep: bool) -> None:
    if not keep:
        recreate_database(vendor)
    configure(vendor)
    from django.contrib.auth.models import User
    from django.test import Client
    from django.test.utils import setup_test_environment

    from django_sqlqueue.management.commands.jobhealth import Command as JobHealth
    from django_sqlqueue.metrics import prometheus, state
    from django_sqlqueue.models import Job

    if not (keep and Job.objects.exists()):
        seed(vendor, rows)
    print(f"{vendor}: load average before {load()}")
    reading = state.read_state()
    print(f"| {vendor} | median | slowest | CPU (median) | statements |")
    print("|---|--:|--:|--:|--:|")

    def row(label: str, figures: tuple[float, float, float, int]) -> None:
        median, slowest, cpu, queries = figures
        print(f"| {label} | {median:.1f} ms | {slowest:.1f} ms | {cpu:.1f} ms | {queries} |")

    row("gauges' reading (every 5 s at most)", timed(state.read_state, repeat))

    directory = tempfile.mkdtemp(prefix="bench-metrics-")
    try:
        worker_files(directory)
        collector = prometheus.StateCollector(lambda: reading, lambda: {"busy": 4, "idle": 4})
        figures = timed(lambda: prometheus.render([collector], directory), repeat)
        size = len(prometheus.render([collector], directory)[0])
        row(f"scrape of /metrics (8 workers' files, {size:,} bytes)", figures)
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    setup_test_environment()
    user, _ = User.objects.get_or_create(username="bench", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    for window in ("hour", "day"):

        def page(window: str = window) -> None:
            response = client.get("/admin/django_sqlqueue/job/dashboard/", {"range": window})
            assert response.status_code == 200, response.status_code

        row(f"dashboard, {window}", timed(page, repeat))
    health = JobHealth()
    row("jobhealth --max-pending-age 600", timed(lambda: health.verdict(None, 600), repeat))
    print(f"{vendor}: load average after {load()}")


ENQUEUE_PROGRAM = """
import json, os, sys, time, statistics
mode = sys.argv[1]
if mode == "absent":
    sys.modules["opentelemetry"] = None  # as if the API were not installed
import django
from django.conf import settings
settings.configure(
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[2]}},
    INSTALLED_APPS=["django_sqlqueue"], USE_TZ=True, SQLQUEUE={"AUTODISCOVER": False},
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()
if mode == "sdk":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django_sqlqueue import enqueue, job, tracing
@job("bench.noop")
def noop():
    pass
runs = []
for _ in range(5):
    started = time.perf_counter()
    for _ in range(2000):
        enqueue("bench.noop")
    runs.append((time.perf_counter() - started) / 2000 * 1e6)
print(json.dumps({"mode": mode, "enabled": tracing.ENABLED, "us": statistics.median(runs)}))
"""


def enqueue_costs() -> None:
    print(f"enqueue, load average before {load()}")
    print("| OpenTelemetry | tracing active | µs per enqueue (median of 5 runs of 2,000) |")
    print("|---|---|--:|")
    labels = {"absent": "API not installed", "api": "API, no SDK", "sdk": "SDK, spans recorded"}
    for mode in ("absent", "api", "sdk"):
        with tempfile.TemporaryDirectory() as folder:
            output = subprocess.run(
                [sys.executable, "-c", ENQUEUE_PROGRAM, mode, os.path.join(folder, "db.sqlite3")],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        result = json.loads(output.strip().splitlines()[-1])
        print(f"| {labels[mode]} | {result['enabled']} | {result['us']:.1f} |")
    print(f"enqueue, load average after {load()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", action="append", choices=VENDORS)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="reuse an already seeded database")
    parser.add_argument("--enqueue-only", action="store_true")
    parser.add_argument("--one", choices=VENDORS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.enqueue_only:
        enqueue_costs()
        return 0
    if args.one:
        run_one(args.one, args.rows, args.repeat, args.keep)
        return 0
    status = 0
    for vendor in args.db or ["sqlite", "postgres"]:
        command = [sys.executable, "-m", "benchmarks.observability", "--one", vendor]
        command += ["--rows", str(args.rows), "--repeat", str(args.repeat)]
        command += ["--keep"] * args.keep
        status |= subprocess.call(command)
    enqueue_costs()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
