"""The migrations match the models, and the claim indexes exist as designed on each vendor."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connections

from django_sqlqueue.models import Job


@pytest.mark.django_db
@pytest.mark.parametrize("app", ["django_sqlqueue", "testapp"])
def test_migrations_are_complete(app: str) -> None:
    out = io.StringIO()
    try:
        call_command("makemigrations", app, "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exit_:  # makemigrations --check exits 1 when a migration is missing
        pytest.fail(
            f"makemigrations {app} found model changes (exit {exit_.code}):\n{out.getvalue()}"
        )
    assert "No changes detected" in out.getvalue()


def constraints(alias: str) -> dict[str, Any]:
    connection = connections[alias]
    with connection.cursor() as cursor:
        return connection.introspection.get_constraints(cursor, Job._meta.db_table)


@pytest.mark.django_db
class TestIndexes:
    @pytest.mark.parametrize(
        ("name", "columns"),
        [
            ("sqlqueue_claim_queue", ["queue", "priority", "run_at", "id"]),
            ("sqlqueue_claim_any", ["priority", "run_at", "id"]),
            ("sqlqueue_running_lease", ["lease_expires_at"]),
        ],
    )
    def test_claim_indexes(self, alias: str, vendor: str, name: str, columns: list[str]) -> None:
        """Partial indexes on PostgreSQL and SQLite; led by the claimable column on MySQL."""
        index = constraints(alias).get(name)
        assert index is not None, f"index {name} is missing"
        if vendor == "mysql":
            lead = "status" if name == "sqlqueue_running_lease" else "claimable"
            assert index["columns"] == [lead, *columns]
        else:
            assert index["columns"] == columns
            assert self._is_partial(alias, vendor, name)

    def _is_partial(self, alias: str, vendor: str, name: str) -> bool:
        with connections[alias].cursor() as cursor:
            if vendor == "postgresql":
                cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
            else:
                cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [name])
            (definition,) = cursor.fetchone()
        return " WHERE " in definition.upper()

    def test_purge_index(self, alias: str, vendor: str) -> None:
        """Partial where the database has them: a job enters it when it finishes."""
        index = constraints(alias)["sqlqueue_status_finished"]
        assert index["columns"] == ["status", "finished_at"]
        if vendor != "mysql":
            assert self._is_partial(alias, vendor, "sqlqueue_status_finished")

    def test_idempotency_key_is_unique(self, alias: str, vendor: str) -> None:
        """One unique index, partial where the database has them (a job without a key writes
        no entry); on PostgreSQL a partial prefix index and no index over every row."""
        over_the_key = {
            name: c for name, c in constraints(alias).items() if c["columns"] == ["idempotency_key"]
        }
        unique = [name for name, c in over_the_key.items() if c["unique"]]
        assert unique == ["sqlqueue_idempotency_key"], over_the_key
        if vendor == "mysql":
            assert list(over_the_key) == unique
            return
        assert self._is_partial(alias, vendor, "sqlqueue_idempotency_key")
        others = sorted(set(over_the_key) - set(unique))
        if vendor == "postgresql":
            assert others == ["sqlqueue_idempotency_prefix"]
            assert self._is_partial(alias, vendor, "sqlqueue_idempotency_prefix")
        else:
            assert others == []

    def test_priority_range_is_enforced_by_the_database(self, alias: str) -> None:
        from django.db import IntegrityError, transaction

        with pytest.raises(IntegrityError), transaction.atomic(using=alias):
            Job.objects.using(alias).create(name="tests.noop", priority=101)

    def test_claimable_column_follows_the_status(self, make_job: Any, alias: str) -> None:
        pending = make_job(status="pending")
        done = make_job(status="completed")
        values = dict(Job.objects.using(alias).values_list("pk", "claimable"))
        assert values[pending.pk] == 1
        assert values[done.pk] is None
        Job.objects.using(alias).filter(pk=done.pk).update(status="failed")
        assert Job.objects.using(alias).get(pk=done.pk).claimable == 1
