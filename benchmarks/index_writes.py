"""What one job writes to the database's log: a count, not a time, so a busy machine cannot
blur it. A benchmark, not a test.

    python -m benchmarks.index_writes                    # SQLite, PostgreSQL and MariaDB
    python -m benchmarks.index_writes --db postgres --jobs 5000

Each index a job has an entry in is written at its INSERT and again at every UPDATE that
changes a column the index covers; every write is a page (or part of one) in the log the
commit must write. Per database, in a fresh process on the benchmark's fresh database:

- **enqueue**: `--jobs` single enqueues of the no-op job, each in its own transaction;
- **drain** (PostgreSQL, MariaDB): `runworkers -n 2 --burst` claiming and completing them.

PostgreSQL: WAL bytes (`pg_current_wal_insert_lsn()`), after a CHECKPOINT before each part, so
both sides pay the same full-page images. MariaDB: InnoDB redo bytes
(`Innodb_os_log_written`, server-wide: run it alone). SQLite: WAL frames (pages) of the
enqueues, with the automatic checkpoint off; the workers' own connections checkpoint as
they please, so no drain figure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

from .databases import VENDORS
from .procs import ROOT, django_command


def enqueue(jobs: int) -> None:
    from django.db import transaction

    from .jobsapp.jobs import bench_job

    for i in range(jobs):
        with transaction.atomic():
            bench_job.enqueue(i=i)


def drain() -> None:
    from django.db import connections

    connections.close_all()
    subprocess.run(
        django_command("runworkers", "-n", "2", "--burst"),
        cwd=ROOT,
        check=True,
        capture_output=True,
    )


def log_position(vendor: str) -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        if vendor == "postgres":
            cursor.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
            return float(cursor.fetchone()[0])
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Innodb_os_log_written'")
        return float(cursor.fetchone()[1])


def settle(vendor: str) -> None:
    """PostgreSQL: a checkpoint, so that each part starts with no page already imaged."""
    from django.db import connection

    if vendor == "postgres":
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")


def measure(vendor: str, jobs: int) -> dict[str, Any]:
    from django.db import connection

    if vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint = 0")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        enqueue(jobs)
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
            _, frames, _ = cursor.fetchone()
        return {"pages per enqueue": frames / jobs}
    unit = "WAL bytes" if vendor == "postgres" else "redo bytes"
    settle(vendor)
    before = log_position(vendor)
    enqueue(jobs)
    enqueued = log_position(vendor) - before
    settle(vendor)
    before = log_position(vendor)
    drain()
    drained = log_position(vendor) - before
    return {f"{unit} per enqueue": enqueued / jobs, f"{unit} per drained job": drained / jobs}


def run_one(vendor: str, jobs: int) -> None:
    os.environ.update(BENCH_DB=vendor, BENCH_SYSTEM="sqlqueue")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    from .databases import recreate

    recreate(vendor)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    results = measure(vendor, jobs)
    print(
        f"{vendor}: {jobs:,} jobs: "
        + ", ".join(f"{value:,.1f} {label}" for label, value in results.items())
        + f" (load average {os.getloadavg()[0]:.2f})",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", action="append", choices=VENDORS, help="repeatable; default all")
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--one", choices=VENDORS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        run_one(args.one, args.jobs)
        return 0
    status = 0
    for vendor in args.db or list(VENDORS):
        command = [sys.executable, "-m", "benchmarks.index_writes", "--one", vendor]
        status |= subprocess.call([*command, "--jobs", str(args.jobs)], cwd=ROOT)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
