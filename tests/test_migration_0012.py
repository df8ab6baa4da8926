"""Migration 0012 (fewer index writes) on a table that holds jobs: an upgrade keeps every row
and every key unique, and it can be undone. On SQLite it rebuilds the job table, whose
generated column and the foreign keys that point at it must come through."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import IntegrityError, connections, transaction
from django.db.migrations.executor import MigrationExecutor

from django_sqlqueue.models import Job, JobDependency

pytestmark = pytest.mark.django_db(transaction=True)

APP = "django_sqlqueue"
BEFORE = (APP, "0011_reference_nonce")
AFTER = (APP, "0012_fewer_index_writes")


def migrate(alias: str, target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connections[alias])
    executor.loader.build_graph()
    executor.migrate([target])


@pytest.fixture
def at_0011(alias: str) -> Iterator[None]:
    migrate(alias, BEFORE)
    try:
        yield
    finally:
        leaf = MigrationExecutor(connections[alias]).loader.graph.leaf_nodes(APP)
        migrate(alias, leaf[0])


def index_names(alias: str) -> set[str]:
    connection = connections[alias]
    with connection.cursor() as cursor:
        return set(connection.introspection.get_constraints(cursor, Job._meta.db_table))


def insert_old_rows(alias: str) -> dict[str, int]:
    """Rows as 0011 stored them, through SQL (the model is 0012's)."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    ids = {}
    rows = [
        ("keyed", "completed", "key-1", "2026-01-01 00:00:00", "u1"),
        ("plain_done", "completed", None, "2026-01-01 00:00:00", None),
        ("plain_pending", "pending", None, None, "u2"),
    ]
    with connection.cursor() as cursor:
        for label, status, key, finished, unique_key in rows:
            cursor.execute(
                f"INSERT INTO {quote('django_sqlqueue_job')} (name, queue, args, kwargs, status, "
                "priority, attempts, max_attempts, run_at, created_at, updated_at, finished_at, "
                "last_error, history, idempotency_key, lease_owner, backend, progress_message, "
                "unique_key, has_dependents) VALUES (%s, 'default', '[]', '{}', %s, 0, 0, 5, "
                "'2026-01-01 00:00:00', '2026-01-01 00:00:00', '2026-01-01 00:00:00', %s, '', "
                "'[]', %s, '', '', '', %s, %s)",
                [f"tests.{label}", status, finished, key, unique_key, False],
            )
            cursor.execute(
                f"SELECT MAX(id) FROM {quote('django_sqlqueue_job')} WHERE name = %s",
                [f"tests.{label}"],
            )
            ids[label] = cursor.fetchone()[0]
    return ids


def test_an_upgrade_keeps_the_rows_and_the_keys_unique(alias: str, at_0011: None) -> None:
    ids = insert_old_rows(alias)
    JobDependency.objects.using(alias).create(
        job_id=ids["plain_pending"], depends_on_id=ids["keyed"]
    )
    assert "sqlqueue_idempotency_key" not in index_names(alias)

    migrate(alias, AFTER)

    jobs = {job.name: job for job in Job.objects.using(alias).all()}
    assert {job.pk for job in jobs.values()} == set(ids.values())
    assert jobs["tests.keyed"].idempotency_key == "key-1"
    assert jobs["tests.plain_pending"].unique_active == "u2"  # the generated column
    assert jobs["tests.keyed"].unique_active is None
    dependency = JobDependency.objects.using(alias).get()
    assert (dependency.job_id, dependency.depends_on_id) == (ids["plain_pending"], ids["keyed"])
    assert {"sqlqueue_idempotency_key", "sqlqueue_status_finished"} <= index_names(alias)
    with pytest.raises(IntegrityError), transaction.atomic(using=alias):
        Job.objects.using(alias).create(name="tests.again", idempotency_key="key-1")
    # Jobs without a key are many, and none is refused.
    Job.objects.using(alias).create(name="tests.plain")
    Job.objects.using(alias).create(name="tests.plain")


def test_it_can_be_undone(alias: str, at_0011: None) -> None:
    migrate(alias, AFTER)
    Job.objects.using(alias).create(name="tests.keyed", idempotency_key="key-2")
    migrate(alias, BEFORE)
    names = index_names(alias)
    assert "sqlqueue_idempotency_key" not in names
    assert "sqlqueue_idempotency_prefix" not in names
    connection = connections[alias]
    # The column's own UNIQUE is back.
    with (
        pytest.raises(IntegrityError),
        transaction.atomic(using=alias),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO django_sqlqueue_job (name, queue, args, kwargs, status, priority, "
            "attempts, max_attempts, run_at, created_at, updated_at, last_error, history, "
            "idempotency_key, lease_owner, backend, progress_message, has_dependents) "
            "VALUES ('tests.again', 'default', '[]', '{}', 'pending', 0, 0, 5, "
            "'2026-01-01 00:00:00', '2026-01-01 00:00:00', '2026-01-01 00:00:00', '', '[]', "
            "'key-2', '', '', '', %s)",
            [False],
        )
