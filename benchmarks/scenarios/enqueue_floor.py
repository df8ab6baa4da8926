"""Enqueue floor: the INSERT django-sqlqueue sends, without django-sqlqueue around it.

Each enqueue of the `enqueue` scenario is one transaction (as a view's). This scenario sends
the very same INSERT, with the same values, 3,000 times, one transaction each:
`driver` through the bare driver (BEGIN, INSERT, COMMIT), `django` through Django's
`transaction.atomic()` and cursor. The gap between `driver` and `django` is Django's price
per transaction; the gap between `django` and our `enqueue` is ours.

`create`: what a Django project pays for a row of the same columns through the ORM, the
reference issue 27 sets ours against: `Model.objects.create()` inside `transaction.atomic()`,
on a table with the job table's columns (the same field types, no index but the primary key,
no generated column), created for the measurement and dropped after it.
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


TWIN_TABLE = "bench_job_twin"


def twin_model() -> Any:
    """A model with the job table's columns, built from `Job`'s fields, once per process."""
    from django.apps import apps
    from django.db import models

    from django_sqlqueue.models import Job

    try:
        return apps.get_model("jobsapp", "JobTwin")
    except LookupError:
        pass
    meta = type("Meta", (), {"app_label": "jobsapp", "db_table": TWIN_TABLE, "managed": False})
    attrs: dict[str, Any] = {"__module__": __name__, "Meta": meta}
    for field in Job._meta.concrete_fields:
        if field.primary_key or isinstance(field, models.GeneratedField):
            continue
        if field.is_relation:  # the batch: its id, without the foreign key's constraint
            attrs[field.attname] = models.BigIntegerField(null=True, blank=True)
            continue
        name, _, args, kwargs = field.deconstruct()
        kwargs.pop("db_index", None)
        kwargs.pop("unique", None)
        attrs[name] = field.__class__(*args, **kwargs)
    return type("JobTwin", (models.Model,), attrs)


def _twin_row() -> dict[str, Any]:
    """The values our enqueue writes, as a create() of the twin gets them."""
    from django_sqlqueue.enqueueing.options import EnqueueOptions, build_job

    from ..jobsapp.jobs import bench_job

    job = build_job(bench_job, (), {"i": 0, "sleep_ms": 0}, EnqueueOptions())
    return {
        "name": job.name,
        "queue": job.queue,
        "args": job.args,
        "kwargs": job.kwargs,
        "status": "pending",
        "priority": job.priority,
        "attempts": 0,
        "max_attempts": job.max_attempts,
        "history": [],
        "backend": job.backend,
    }


def _through_create(n: int) -> float:
    from django.utils import timezone

    twin = twin_model()
    row = _twin_row()
    with connection.schema_editor() as editor:
        editor.create_model(twin)
    try:
        began = time.perf_counter()
        for _ in range(n):
            now = timezone.now()
            with transaction.atomic():
                twin.objects.create(**row, run_at=now, created_at=now, updated_at=now)
        elapsed = time.perf_counter() - began
        stored = twin.objects.count()
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(twin)
    if stored != n:
        raise RuntimeError(f"{stored} of {n} twin rows stored")
    return elapsed


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
    if params["mode"] == "create":
        elapsed = _through_create(n)
        return {"jobs_per_s": n / elapsed, "seconds": elapsed, "problems": ""}
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
