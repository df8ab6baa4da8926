"""PostgreSQL: a claim walks its index and never sorts the backlog, whatever the planner's
statistics say. A burst enqueued faster than anyone analyses the table looks, to the planner,
like a handful of rows; the claim must read as few rows as on an analysed table.

Also: claims across several queues keep the claim order, and a connection with psycopg's
server-side binding claims as well as the default one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections, transaction
from django.utils import timezone

from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.claiming import Claimer

pytestmark = pytest.mark.django_db(transaction=True)

#: Pending jobs of the burst, all in queue "default"; a few more in "mail".
BACKLOG = 200_000
MAIL = 100
LIMIT = 20
#: The claim shapes: every queue, one queue, several queues (one of them empty).
SHAPES = {"any": None, "one": ["default"], "several": ["mail", "default", "sms"]}

BURST = """
INSERT INTO django_sqlqueue_job (name, queue, args, kwargs, status, priority, attempts,
    max_attempts, run_at, created_at, updated_at, last_error, history, lease_owner, backend,
    progress_message)
SELECT 'tests.noop', %s, '[]', '{}', 'pending', 0, 0, 5,
    now() - interval '1 hour' + n * interval '1 microsecond', now(), now(), '', '[]', '', '', ''
FROM generate_series(1, %s) AS n
"""


@pytest.fixture
def postgres(vendor: str) -> None:
    if vendor != "postgresql":
        pytest.skip("the planner is PostgreSQL's")


@pytest.fixture
def stale_backlog(alias: str, postgres: None) -> Iterator[None]:
    """BACKLOG + MAIL pending jobs in a table whose statistics say it is empty — analysed
    after its last jobs were deleted, so it has pages but no rows: to the planner, every
    table and index scan then looks free — and that autovacuum leaves alone meanwhile. A
    claim that regresses fails on the statement timeout instead of running for minutes."""
    with connections[alias].cursor() as cursor:
        cursor.execute("ALTER TABLE django_sqlqueue_job SET (autovacuum_enabled = false)")
        cursor.execute(BURST, ["default", 1000])
        cursor.execute("DELETE FROM django_sqlqueue_job")
        cursor.execute("ANALYZE django_sqlqueue_job")
        cursor.execute(BURST, ["default", BACKLOG])
        cursor.execute(BURST, ["mail", MAIL])
        cursor.execute("SET statement_timeout = '20s'")
    yield
    with connections[alias].cursor() as cursor:
        cursor.execute("RESET statement_timeout")
        cursor.execute("ALTER TABLE django_sqlqueue_job RESET (autovacuum_enabled)")


def captured_claim(alias: str, claimer: Claimer, queues: list[str] | None) -> tuple[str, Any]:
    """Claim for real, and return the statement the claimer sent."""
    sent: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append((sql, params))
        return execute(sql, params, many, context)

    claimer.paused.current()  # the paused queues' once-a-second read, not the claim's
    with connections[alias].execute_wrapper(capture):
        jobs = claimer.claim("plan-test", queues, LIMIT, 60, timezone.now())
    assert len(jobs) == LIMIT
    [statement] = sent
    return statement


def analysed_plan(alias: str, sql: str, params: Any) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, FORMAT JSON) of the claim's UPDATE, after its planner settings, in a
    transaction that is rolled back."""
    explain = sql.replace("UPDATE ", "EXPLAIN (ANALYZE, FORMAT JSON) UPDATE ", 1)
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        cursor.execute(explain, params)
        while cursor.description is None and cursor.nextset():
            pass
        [[document]] = cursor.fetchall()
        transaction.set_rollback(True, using=alias)
    return dict(document[0]["Plan"])


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def sorts(node: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(rows sorted, node) of every Sort in the plan."""
    children = node.get("Plans", [])
    if node["Node Type"] in ("Sort", "Incremental Sort"):
        yield sum(int(child["Actual Rows"]) for child in children), node
    for child in children:
        yield from sorts(child)


def rows_read(plan: dict[str, Any]) -> list[int]:
    """The rows each scan of the plan read: those it returned and those it filtered out."""
    return [
        (
            int(node["Actual Rows"])
            + int(node.get("Rows Removed by Filter", 0))
            + int(node.get("Rows Removed by Index Recheck", 0))
        )
        * int(node["Actual Loops"])
        for node in nodes(plan)
        if node["Node Type"].endswith("Scan") and node["Node Type"] != "Subquery Scan"
    ]


@pytest.mark.slow
def test_no_claim_sorts_the_backlog_on_stale_statistics(
    alias: str, stale_backlog: None, claimer: Claimer
) -> None:
    stale: dict[str, list[int]] = {}
    for shape, queues in SHAPES.items():
        sql, params = captured_claim(alias, claimer, queues)
        plan = analysed_plan(alias, sql, params)
        sorted_rows = [rows for rows, _ in sorts(plan)]
        if queues is None or len(queues) == 1:
            assert sorted_rows == [], f"{shape}: the claim sorts {sorted_rows} rows"
        else:
            # Only the few candidates each queue's own index walk found are merged.
            assert all(rows <= len(queues) * LIMIT for rows in sorted_rows), (shape, sorted_rows)
        # The candidates are chosen once, and the UPDATE goes straight to their rows.
        scans = [node for node in nodes(plan) if node["Node Type"].endswith("Scan")]
        assert all(node["Actual Loops"] == 1 for node in scans), (shape, scans)
        assert plan["Plans"][-1]["Node Type"] == "Tid Scan", (shape, plan)
        # What keeps it quick: each scan reads no more rows than the claim takes, of a
        # backlog of BACKLOG.
        stale[shape] = rows_read(plan)
        assert max(stale[shape]) <= LIMIT, (shape, stale[shape])

    with connections[alias].cursor() as cursor:
        cursor.execute("ANALYZE django_sqlqueue_job")
    for shape, queues in SHAPES.items():
        analysed = rows_read(analysed_plan(alias, *captured_claim(alias, claimer, queues)))
        # Stale statistics cost nothing: no more rows read than on the analysed table.
        assert sum(stale[shape]) <= sum(analysed), (shape, stale[shape], analysed)


def test_claims_across_queues_keep_the_claim_order(
    postgres: None, make_job: Any, claim: Any
) -> None:
    now = timezone.now()
    make_job(queue="mail", priority=1, run_at=now - timedelta(seconds=3))
    first = make_job(queue="sms", priority=5, run_at=now - timedelta(seconds=1))
    second = make_job(queue="mail", priority=1, run_at=now - timedelta(seconds=5))
    make_job(queue="other", priority=9, run_at=now - timedelta(seconds=9))
    make_job(queue="sms", priority=0, run_at=now - timedelta(seconds=9))

    claimed = claim("w", queues=["mail", "sms", "mail"], limit=2)

    assert [job.id for job in claimed] == [first.pk, second.pk]


def test_server_side_binding_claims_too(alias: str, postgres: None, make_job: Any) -> None:
    """With OPTIONS['server_side_binding'] the driver sends one statement per message; the
    claim binds its parameters itself to send its settings along."""
    connection = connections[alias]
    saved = connection.settings_dict["OPTIONS"]
    connection.close()
    connection.settings_dict["OPTIONS"] = {**saved, "server_side_binding": True}
    try:
        jobs = [make_job(queue=queue) for queue in ("mail", "sms", "default")]
        claimer = queue_database(alias).claimer()
        assert len(claimer.claim("w", ["mail", "sms"], 5, 60, timezone.now())) == 2
        assert len(claimer.claim("w", None, 5, 60, timezone.now())) == 1
        assert not type(connection.connection.cursor()).__name__.startswith("Client")
        assert len(jobs) == 3
    finally:
        connection.close()
        connection.settings_dict["OPTIONS"] = saved
