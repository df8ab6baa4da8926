"""PostgreSQL: the supervisor analyses the job table after a burst, so claims keep walking
the claim index in order instead of sorting the whole backlog."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections

from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.postgresql import AnalyzingKeeper
from tests.testapp.jobs import noop

pytestmark = pytest.mark.django_db(transaction=True)

CLAIM_SUBQUERY = (
    "SELECT id FROM django_sqlqueue_job WHERE status IN ('pending', 'failed') "
    "AND run_at <= now() ORDER BY priority DESC, run_at, id LIMIT 20 FOR UPDATE SKIP LOCKED"
)


@pytest.fixture
def postgres(vendor: str) -> None:
    if vendor != "postgresql":
        pytest.skip("planner statistics are PostgreSQL's")


def flush_statistics(alias: str) -> None:
    """Make this session's row counts visible in pg_stat_user_tables now, not within 1-10 s."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT 1")


def analyse(alias: str) -> None:
    flush_statistics(alias)  # or changes made before it would count as made after it
    with connections[alias].cursor() as cursor:
        cursor.execute("ANALYZE django_sqlqueue_job")


def counted_rows(alias: str) -> float:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'django_sqlqueue_job'::regclass")
        return float(cursor.fetchone()[0])


def claim_plan(alias: str) -> str:
    with connections[alias].cursor() as cursor:
        cursor.execute("EXPLAIN " + CLAIM_SUBQUERY)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_burst_is_analysed_and_the_claim_walks_the_index(alias: str, postgres: Any) -> None:
    analyse(alias)  # statistics say: no job at all
    noop.enqueue_many([{"n": n} for n in range(12_000)])
    flush_statistics(alias)

    assert AnalyzingKeeper(alias).refresh_if_stale() is True

    assert counted_rows(alias) == pytest.approx(12_000, rel=0.05)
    plan = claim_plan(alias)
    assert "Index Scan using sqlqueue_claim_any" in plan
    assert "Sort" not in plan


def test_small_changes_are_left_to_autovacuum(alias: str, postgres: Any) -> None:
    noop.enqueue_many([{"n": n} for n in range(400)])
    analyse(alias)
    noop.enqueue_many([{"n": n} for n in range(150)])
    flush_statistics(alias)

    keeper = AnalyzingKeeper(alias, min_changed_rows=100, min_changed_share=0.5)
    assert keeper.refresh_if_stale() is False  # 150 changed: under half of 400
    assert counted_rows(alias) == pytest.approx(400, rel=0.05)

    noop.enqueue_many([{"n": n} for n in range(100)])
    flush_statistics(alias)
    assert keeper.refresh_if_stale() is True  # 250 changed: over half of 400
    assert counted_rows(alias) == pytest.approx(650, rel=0.05)


def test_at_most_one_analysis_per_interval(alias: str, postgres: Any) -> None:
    keeper = AnalyzingKeeper(alias, min_changed_rows=10, min_interval=3600)
    analyse(alias)
    noop.enqueue_many([{"n": n} for n in range(50)])
    flush_statistics(alias)
    assert keeper.refresh_if_stale() is True

    noop.enqueue_many([{"n": n} for n in range(500)])
    flush_statistics(alias)
    assert keeper.refresh_if_stale() is False
    assert counted_rows(alias) == pytest.approx(50, rel=0.05)


def test_other_databases_need_nothing(alias: str, vendor: str) -> None:
    if vendor == "postgresql":
        pytest.skip("PostgreSQL is the one that needs it")
    noop.enqueue_many([{"n": n} for n in range(20)])
    assert queue_database(alias).statistics_keeper().refresh_if_stale() is False
