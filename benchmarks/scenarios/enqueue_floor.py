"""Enqueue floor: the INSERT django-sqlqueue sends, without django-sqlqueue around it.

Each enqueue of the `enqueue` scenario is one transaction (as a view's). This scenario sends
the very same INSERT, with the same values, 3,000 times, one transaction each:
`driver` through the bare driver (BEGIN, INSERT, COMMIT), `django` through Django's
`transaction.atomic()` and cursor. The gap between `driver` and `django` is Django's price
per transaction; the gap between `django` and our `enqueue` is ours.
"""

from __future__ import annotations

import time
from typing import Any

from django.db import connection, connections, transaction

from ..raw_driver import RAW_QUEUES, sqlite_pragmas
from ..systems import System


def _statement() -> tuple[str, list[Any]]:
    from django_sqlqueue.databases import queue_database
    from django_sqlqueue.enqueueing.options import EnqueueOptions, build_job

    from ..jobsapp.jobs import bench_job

    inserter = queue_database("default").inserter()
    job = build_job(bench_job, (), {"i": 0, "sleep_ms": 0}, EnqueueOptions())
    return inserter.prefix + inserter.row_sql + inserter.returning_sql, inserter.values(job)


def _through_django(sql: str, values: list[Any], n: int) -> float:
    began = time.perf_counter()
    for _ in range(n):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, values)
            cursor.fetchall()
    return time.perf_counter() - began


def _through_driver(vendor: str, sql: str, values: list[Any], n: int) -> float:
    pragmas = sqlite_pragmas(connection) if vendor == "sqlite" else {}
    connections.close_all()
    queue = RAW_QUEUES[vendor](pragmas)
    conn = queue.conn
    try:
        if vendor == "sqlite":
            sql = sql.replace("%s", "?")
            began = time.perf_counter()
            for _ in range(n):
                conn.execute("BEGIN")
                conn.execute(sql, values).fetchall()
                conn.execute("COMMIT")
        elif vendor == "postgres":
            began = time.perf_counter()
            for _ in range(n):
                with conn.transaction():
                    conn.execute(sql, values).fetchall()
        else:
            cursor = conn.cursor()
            began = time.perf_counter()
            for _ in range(n):
                cursor.execute("BEGIN")
                cursor.execute(sql, values)
                cursor.fetchall()
                conn.commit()
        return time.perf_counter() - began
    finally:
        queue.close()


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    n = params["jobs"]
    sql, values = _statement()
    if params["mode"] == "django":
        elapsed = _through_django(sql, values, n)
    else:
        elapsed = _through_driver(system.vendor, sql, values, n)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_sqlqueue_job")
        stored = cursor.fetchone()[0]
    return {
        "jobs_per_s": n / elapsed,
        "seconds": elapsed,
        "problems": "" if stored == n else f"{stored} of {n} rows stored",
    }
