"""How fast the job admin's list page renders over 1,000,000 rows. A benchmark, not a test.

    python -m benchmarks.admin_list                      # SQLite and PostgreSQL
    python -m benchmarks.admin_list --db mysql --rows 200000
    python -m benchmarks.admin_list --db sqlite --keep   # reuse the seeded database

Seeds a fresh database (named `bench_admin_list`) in one INSERT … SELECT over
generate_series (PostgreSQL), a recursive CTE (SQLite) or a cross join of digits (MySQL),
then renders admin pages with Django's test client as a superuser and prints, per page, the
median and slowest of several renders and the number of SQL queries. Each database runs in
its own process, because Django's settings are configured once per process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .databases import bench_dir, django_database_named

DB_NAME = "bench_admin_list"
VENDORS = ("sqlite", "postgres", "mysql")

# (label, URL under /admin/django_sqlqueue/, query string)
PAGES = [
    ("list, unfiltered", "job/", ""),
    ("list, page 50", "job/", "p={page}"),
    ("status = dead", "job/", "status__exact=dead"),
    ("status = completed", "job/", "status__exact=completed"),
    ("queue + job name", "job/", "queue=mail&name=app.job3"),
    ("created in the last day", "job/", "created_at__range__gte={yesterday}"),
    (
        "finished 3-4 days ago, dead",
        "job/",
        "status__exact=dead&finished_at__range__gte={days4}&finished_at__range__lte={days3}",
    ),
    ("stuck", "job/", "stuck=yes"),
    ("scheduled in the future", "job/", "scheduled=future"),
    ("jobs of a schedule (key prefix)", "job/", "idempotency_key__startswith=schedule:nightly:"),
    ("search by id", "job/", "q={some_id}"),
    ("search text in arguments", "job/", "q=needle-42"),
    ("job detail", "job/{some_id}/change/", ""),
    ("workers", "worker/", ""),
]


# Settings and URLs --------------------------------------------------------------------


def database_settings(vendor: str) -> dict[str, Any]:
    if vendor not in VENDORS:
        raise SystemExit(f"unknown database {vendor!r}; expected one of {', '.join(VENDORS)}")
    return django_database_named(vendor, DB_NAME, bench_dir() / f"{DB_NAME}.sqlite3")


def configure(vendor: str) -> None:
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="benchmark-only",
        DEBUG=False,
        ALLOWED_HOSTS=["testserver"],
        USE_TZ=True,
        TIME_ZONE="UTC",
        DATABASES={"default": database_settings(vendor)},
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "rangefilter",
            "django_sqlqueue",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        ROOT_URLCONF=__name__,
        STATIC_URL="/static/",
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        SQLQUEUE={"AUTODISCOVER": False},
    )
    django.setup()


def __getattr__(name: str) -> Any:
    """`urlpatterns`, built when Django asks for it (after setup)."""
    if name == "urlpatterns":
        from django.contrib import admin
        from django.urls import path

        return [path("admin/", admin.site.urls)]
    raise AttributeError(name)


# Seeding --------------------------------------------------------------------------------


def recreate_database(vendor: str) -> None:
    if vendor == "sqlite":
        base = Path(database_settings("sqlite")["NAME"])
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{base}{suffix}").unlink(missing_ok=True)
    elif vendor == "postgres":
        import psycopg

        db = database_settings("postgres")
        params = {"host": db["HOST"], "port": db["PORT"], "user": db["USER"], "dbname": "postgres"}
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {DB_NAME}")
    else:
        import MySQLdb

        db = database_settings("mysql")
        conn = MySQLdb.connect(
            host=db["HOST"], port=int(db["PORT"]), user=db["USER"], password=db["PASSWORD"]
        )
        try:
            cursor = conn.cursor()
            cursor.execute(f"DROP DATABASE IF EXISTS {DB_NAME}")
            cursor.execute(f"CREATE DATABASE {DB_NAME} CHARACTER SET utf8mb4")
        finally:
            conn.close()


COLUMNS = (
    "name, queue, args, kwargs, status, priority, attempts, max_attempts, run_at, created_at, "
    "started_at, finished_at, updated_at, result, last_error, history, lease_owner, backend, "
    "idempotency_key"
)


def seed_sql(vendor: str, rows: int) -> str:
    """One INSERT … SELECT of `rows` jobs, oldest first, one created every second.

    97% completed, 1% each dead, failed (retrying later) and pending (due); 8 job names,
    3 queues; every 1000th job has `needle-<n>` in its arguments; every 200th is a recurring
    job's tick, with the idempotency key `schedule:nightly:<n>`.
    """
    if vendor == "postgres":
        ts = "(now() - make_interval(secs => {n} - i))"
        later = "(now() + interval '1 hour')"
        source = f"generate_series(1, {rows}) AS g(i)"
        text = "i::text"
        prefix = ""
    elif vendor == "sqlite":
        ts = "strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || ({n} - i) || ' seconds')"
        later = "strftime('%Y-%m-%d %H:%M:%f', 'now', '+1 hour')"
        source = "g"
        text = "CAST(i AS TEXT)"
        prefix = (
            f"WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {rows}) "
        )
    else:
        ts = "(UTC_TIMESTAMP(6) - INTERVAL ({n} - i) SECOND)"
        later = "(UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)"
        digits = "(SELECT 0 d " + " ".join(f"UNION ALL SELECT {d}" for d in range(1, 10)) + ")"
        power = len(str(rows - 1))
        parts = [f"{digits} d{k}" for k in range(power)]
        number = " + ".join(f"d{k}.d * {10**k}" for k in range(power))
        source = f"(SELECT {number} + 1 AS i FROM {' CROSS JOIN '.join(parts)}) g WHERE i <= {rows}"
        text = "CAST(i AS CHAR)"
        prefix = ""
    at = ts.format(n=rows)
    status = (
        "CASE WHEN i % 100 = 0 THEN 'dead' WHEN i % 100 = 1 THEN 'failed' "
        "WHEN i % 100 = 2 THEN 'pending' ELSE 'completed' END"
    )
    finished = f"CASE WHEN i % 100 IN (1, 2) THEN NULL ELSE {at} END"
    run_at = f"CASE WHEN i % 100 = 1 THEN {later} ELSE {at} END"  # failed: retries later
    queue = "CASE WHEN i % 3 = 0 THEN 'mail' WHEN i % 3 = 1 THEN 'default' ELSE 'reports' END"
    concat = (
        (lambda *p: " || ".join(p)) if vendor != "mysql" else (lambda *p: f"CONCAT({', '.join(p)})")
    )
    name = concat("'app.job'", "CAST(i % 8 AS " + ("TEXT" if vendor != "mysql" else "CHAR") + ")")
    needle = concat("'[\"needle-'", text, "'\"]'")
    args = f"CASE WHEN i % 1000 = 42 THEN {needle} ELSE '[]' END"
    kwargs = concat("'{\"n\": '", text, "'}'")
    error = "CASE WHEN i % 100 = 0 THEN 'ValueError: boom' ELSE '' END"
    key = f"CASE WHEN i % 200 = 7 THEN {concat(chr(39) + 'schedule:nightly:' + chr(39), text)} END"

    def json(expression: str) -> str:
        return f"CAST({expression} AS jsonb)" if vendor == "postgres" else expression

    select = (
        f"SELECT {name}, {queue}, {json(args)}, {json(kwargs)}, {status}, 0, 1, 5, {run_at}, "
        f"{at}, {at}, {finished}, {at}, NULL, {error}, {json(chr(39) + '[]' + chr(39))}, '', '', "
        f"{key} FROM {source}"
    )
    return f"{prefix}INSERT INTO django_sqlqueue_job ({COLUMNS}) {select}"


def seed(vendor: str, rows: int) -> float:
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(seed_sql(vendor, rows))
    if vendor == "postgres":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE django_sqlqueue_job")
    elif vendor == "mysql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE TABLE django_sqlqueue_job")
            cursor.fetchall()
    # SQLite is left as a fresh database is: without ANALYZE (see --analyze).
    return time.perf_counter() - started


def add_running_and_workers() -> None:
    from datetime import timedelta

    from django.utils import timezone

    from django_sqlqueue.models import Job, Worker

    now = timezone.now()
    for i in range(5):
        Job.objects.create(
            name="app.job1",
            status="running",
            attempts=1,
            started_at=now,
            lease_owner=f"bench:1:w{i}",
            lease_expires_at=now + timedelta(seconds=60 if i else -60),
        )
        Worker.objects.create(id=f"bench:1:w{i}", hostname="bench", pid=1, queues="mail,default")


# Timing ---------------------------------------------------------------------------------


def time_pages(repeat: int) -> list[tuple[str, float, float, float, int, int]]:
    """Per page: median and fastest wall time, median CPU time of this process, queries, rows.

    The CPU time is what the page costs the web process (on SQLite, the queries included),
    whatever else the machine is doing; the wall time includes waiting for a busy CPU and, on
    PostgreSQL and MySQL, the database server's work.
    """
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.utils import timezone

    from django_sqlqueue.models import Job

    setup_test_environment()  # lets the test client capture each response's context
    user, _ = User.objects.get_or_create(username="bench", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    today = timezone.localdate()
    newest = Job.objects.order_by("-id").values_list("id", flat=True).first()
    values = {
        "yesterday": (today - timedelta(days=1)).isoformat(),
        "days4": (today - timedelta(days=4)).isoformat(),
        "days3": (today - timedelta(days=3)).isoformat(),
        "some_id": str((newest or 2) // 2),
        "page": str(max(1, min(50, (newest or 0) // 100))),
    }
    results = []
    for label, path, query in PAGES:
        url = f"/admin/django_sqlqueue/{path.format(**values)}"
        if query:
            url += "?" + query.format(**values)

        def render(url: str = url) -> Any:
            response = client.get(url)
            if response.status_code != 200:
                raise SystemExit(f"{url}: HTTP {response.status_code}")
            return response

        response, median, fastest, cpu, captured = timed(render, repeat)
        if os.environ.get("BENCH_SHOW_QUERIES"):
            for query in captured.captured_queries:
                print(f"    {float(query['time']) * 1000:8.1f}ms  {query['sql'][:150]}")
        rows = len(response.context["cl"].result_list) if "cl" in (response.context or {}) else 1
        results.append((label, median, fastest, cpu, len(captured), rows))
    return results


def timed(action: Callable[[], Any], repeat: int) -> tuple[Any, float, float, float, Any]:
    """`action` once to warm up (templates, caches, the database's buffers), then `repeat`
    times timed: its last result, the median and fastest wall time, the median CPU time of
    this process, and the queries of the last run."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    action()
    timings, cpu = [], []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            started, started_cpu = time.perf_counter(), time.process_time()
            result = action()
            timings.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
    return result, statistics.median(timings), min(timings), statistics.median(cpu), captured


def time_purge(repeat: int) -> tuple[str, float, float, float, int, int]:
    """purgejobs' batch: the ids of 1,000 jobs finished more than 3 days ago, and their
    DELETE, in a transaction rolled back (so every repeat finds the same rows)."""
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from django_sqlqueue.models import Job
    from django_sqlqueue.operations import purgeable
    from django_sqlqueue.states import FINISHED_VALUES

    queryset = purgeable(timezone.now() - timedelta(days=3), statuses=list(FINISHED_VALUES))

    def one_batch() -> int:
        with transaction.atomic():
            ids = list(queryset.order_by("id").values_list("id", flat=True)[:1000])
            _, per_model = queryset.filter(id__in=ids).delete()
            transaction.set_rollback(True)
        return per_model.get(Job._meta.label, 0)

    deleted, median, fastest, cpu, captured = timed(one_batch, repeat)
    return "purge: one batch of 1,000 (rolled back)", median, fastest, cpu, len(captured), deleted


PROPOSED_INDEX = "bench_status_id"


def proposed_index(vendor: str, enabled: bool) -> None:
    """The index (status, id DESC) proposed for the model: serves every status filter in id
    order, which SQLite otherwise answers by sorting all the status's rows."""
    from django.db import connection

    with connection.cursor() as cursor:
        if enabled:
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {PROPOSED_INDEX} "
                "ON django_sqlqueue_job (status, id DESC)"
            )
            if vendor == "postgres":
                cursor.execute("ANALYZE django_sqlqueue_job")
        elif vendor == "mysql":
            cursor.execute(f"DROP INDEX IF EXISTS {PROPOSED_INDEX} ON django_sqlqueue_job")
        else:
            cursor.execute(f"DROP INDEX IF EXISTS {PROPOSED_INDEX}")


def run_one(
    vendor: str, rows: int, repeat: int, keep: bool, analyze: bool, with_index: bool
) -> None:
    if not keep:
        recreate_database(vendor)
    configure(vendor)
    from django.core.management import call_command
    from django.db import connection

    from django_sqlqueue.models import Job

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    took = time.perf_counter() - started
    if keep:  # a kept database may have been seeded by an older schema: its upgrade's time
        print(f"{vendor}: migrate took {took:.1f}s", flush=True)
    if not (keep and Job.objects.exists()):
        took = seed(vendor, rows)
        add_running_and_workers()
        print(f"{vendor}: seeded {rows:,} jobs in {took:.1f}s", flush=True)
    proposed_index(vendor, enabled=with_index)
    if analyze and vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    analyzed = analyze or vendor != "sqlite"
    print(f"{vendor}: ANALYZE={analyzed}, proposed index (status, id DESC)={with_index}")
    print("| page | median | fastest | CPU (median) | queries | rows |")
    print("|---|--:|--:|--:|--:|--:|")
    for label, median, fastest, cpu, queries, shown in [*time_pages(repeat), time_purge(repeat)]:
        print(
            f"| {label} | {median * 1000:.0f} ms | {fastest * 1000:.0f} ms | {cpu * 1000:.0f} ms "
            f"| {queries} | {shown} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", action="append", choices=VENDORS, help="repeatable; default sqlite and postgres"
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="reuse an already seeded database")
    parser.add_argument("--analyze", action="store_true", help="run ANALYZE on SQLite first")
    parser.add_argument(
        "--proposed-index", action="store_true", help="add an index on (status, id DESC) first"
    )
    parser.add_argument("--one", choices=VENDORS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        run_one(args.one, args.rows, args.repeat, args.keep, args.analyze, args.proposed_index)
        return 0
    status = 0
    for vendor in args.db or ["sqlite", "postgres"]:
        command = [sys.executable, "-m", "benchmarks.admin_list", "--one", vendor]
        command += ["--rows", str(args.rows), "--repeat", str(args.repeat)]
        command += ["--keep"] * args.keep + ["--analyze"] * args.analyze
        command += ["--proposed-index"] * args.proposed_index
        status |= subprocess.call(command)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
