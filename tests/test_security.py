"""No SQL is ever built from user input: job names, queue names, keys, worker ids, errors and
results always travel as query parameters.

Two complementary checks:
- statically, every string in django_sqlqueue/ that looks like SQL and is assembled by
  f-string, `.format()`, `%` or `+` interpolates only expressions reviewed below (quoted
  identifiers, constants, placeholder lists). A new interpolation fails the test until someone
  reads it and adds it here with the reason it is safe;
- dynamically, a whole job life cycle and the admin run with hostile strings everywhere while
  every statement Django sends is captured: the marker in those strings must never appear in
  SQL text, only in parameters, and the table must survive.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sqlite3
import types
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connections
from django.utils import timezone

import django_sqlqueue
from django_sqlqueue import job, operations, queries, registry
from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.claiming import Claimer
from django_sqlqueue.databases.sqlite import SQLiteDatabase
from django_sqlqueue.models import Job
from django_sqlqueue.runtime import transitions
from django_sqlqueue.states import Status

PACKAGE = Path(django_sqlqueue.__file__).parent
#: Literal text that makes a string SQL: a keyword, or a parameter placeholder.
SQL_TEXT = re.compile(
    r"\b(SELECT|UPDATE|INSERT|DELETE|WHERE|PRAGMA|LISTEN|NOTIFY|FROM|SET|VALUES|RETURNING|"
    r"ORDER BY|GROUP BY|LIMIT|JOIN|INDEXED BY|AND|OR|IN|IS NULL|CREATE|DROP|ALTER)\b|%s|pg_notify"
)

#: Every expression interpolated into SQL-looking text, by module, and why it is safe.
REVIEWED: dict[str, dict[str, str]] = {
    "databases/claiming.py": {
        "', '.join((f\"'{s.value}'\" for s in CLAIMABLE))": "the Status constants of CLAIMABLE",
        "', '.join(['%s'] * len(queues))": "placeholders; the queue names are parameters",
        "Status.RUNNING.value": "a Status constant",
        "self.table": "quote_name of the model's table",
        "assignments": "Claimer.running_assignments: constants and placeholders",
        "self.index_hint(queues)": "empty, or SQLiteClaimer's constant INDEXED BY clause",
        "self.index_hint(None)": "the same, for Claimer.next_due's read across every queue",
        "self.claimable_sql": "status constants (Claimer.__init__)",
        "queue_sql": "Claimer.queue_filter: placeholders only",
        "self.lock_clause": "a class constant: empty or FOR UPDATE SKIP LOCKED",
        "self.columns": "quoted constant column names",
        "Status.PENDING.value": "a Status constant",
        "column": "Claimer.defer: asserted to be name, queue or concurrency_key",
        "keyed": "Claimer.defer: a constant condition, or empty",
        "self.wake_returning": "a class constant: empty, or PostgreSQL's RETURNING pg_notify",
        "candidates": "Claimer.candidates: the reviewed parts above, placeholders for values",
        "self.claimed_rows.format(candidates=candidates)": (
            "a class constant (id IN, or PostgreSQL's ctid = ANY) around the reviewed candidates"
        ),
        "marks": "placeholders; the paused queue names are parameters",
        "names_sql": "Claimer.names_filter: placeholders only",
        "placeholders": "', '.join(['%s'] * len(queues)): the queue names are parameters",
        "', '.join(['%s'] * len(self.names))": "placeholders; the job names are parameters",
        "parked": "Claimer.wake: a Status constant and a placeholder for the parked owner",
        "self.claimable_condition()": (
            "QueueDatabase.claimable_condition (status constants, or MySQL's claimable = 1), "
            "else self.claimable_sql"
        ),
        "others_sql": "Claimer.others_due_sql: '0', or an EXISTS of the reviewed parts above",
    },
    "databases/mysql.py": {
        "', '.join(['%s'] * len(jobs))": "placeholders",
        "Status.RUNNING.value": "a Status constant",
        "pairs": "pairs of placeholders",
        "flow_table": "QueueDatabase.flow_key_names: a quoted constant table name",
        "key_column": "QueueDatabase.flow_key_names: a quoted constant column name",
        "self.columns": "quoted constant column names (Claimer.__init__)",
        "self.table": "quote_name of the model's table",
        "queue_sql": "Claimer.queue_filter: placeholders only",
        "assignments": "Claimer.running_assignments: constants and placeholders",
        "placeholders": "', '.join(['%s'] * len(ids))",
        "quote(table)": "quote_name of the rollup model's table",
        "names": "quoted constant column names (rollups.KEYS and SUMS)",
        "values": "rows of placeholders",
        "sums": "quoted constant column names (rollups.SUMS)",
        "quote(c)": "quote_name of a constant column name (rollups.SUMS)",
    },
    "testing/running.py": {
        "sql": "Claimer.queue_filter of the vendor's claimer: placeholders only",
        "placeholders": "', '.join(['%s'] * len(names)): the job names are parameters",
    },
    "databases/sqlite.py": {
        "'sqlqueue_claim_queue' if queues else 'sqlqueue_claim_any'": "two constant index names",
        "int(conf.sqlite_busy_timeout * 1000)": "an int",
        "synchronous": "checked against SQLITE_SYNCHRONOUS_MODES before use (tested below)",
        "sqlite3.sqlite_version": "an error message, not SQL",
        "WAL_SIZE_LIMIT": "an int constant of the module",
    },
    "databases/exits.py": {
        "self.table": "quote_name of the model's table",
        "self.assignments(shape, in_transaction)": (
            "ExitWriter.assignments: Status constants, column names, the vendor's constant JSON "
            "functions around ENTRY_FIELDS' constant keys and columns, placeholders"
        ),
        "fence": "ExitWriter.build_statement: a Status constant and placeholders",
        "running": "a Status constant",
        "ids": "placeholders",
        "self.row_values_prefix": "a class constant: '' or 'VALUES '",
        "pairs": "pairs of placeholders",
        "sql": "the statement built above from the reviewed parts",
        "Status.RUNNING.value": "a Status constant",
    },
    "databases/inserting.py": {
        "ops.quote_name(Job._meta.db_table)": "a quoted identifier",
        "', '.join(map(ops.quote_name, INSERT_COLUMNS))": "quoted constant column names",
        "', '.join(map(ops.quote_name, INSERT_COLUMNS + EXTRA_COLUMNS))": "quoted constant names",
        "self.returning_extra": "a class constant: empty, or pg_notify of the constant channel",
    },
    "databases/postgresql.py": {
        "CHANNEL": "the constant NOTIFY channel name",
        "self.prefix.removesuffix(' VALUES ')": "INSERT INTO and quoted identifiers",
        "selected": "quoted constant column names and constant SQL literals",
        "record": "quoted constant column names with the constant types of JSON_ROW_TYPES",
        "self.returning_sql": "RETURNING id, and pg_notify of the constant channel",
        "LOCK_TIMEOUT_MS": "an int constant",
        "table": "quote_name of the job table's name",
        "self.table": "quote_name of the model's table",
        "self.claimable_sql": "status constants (Claimer.__init__)",
        "self.lock_clause": "a class constant: FOR UPDATE SKIP LOCKED",
        "columns": "constant column lists of the callers (ctid, priority, run_at, id)",
        "branch": "queue_walk: quoted table, status constants, placeholders",
        "index": "an int",
        "branches": "copies of `branch` joined by UNION ALL",
        "assignments": "Claimer.running_assignments: constants and placeholders",
        "candidates": "PostgreSQLClaimer.candidates: the reviewed parts, placeholders for values",
        "self.columns": "quoted constant column names (Claimer.__init__)",
        "paused_sql": "Claimer.excluded_filter: placeholders only",
        "only_sql": "Claimer.names_filter: placeholders only",
        "self.names_filter()[0]": "Claimer.names_filter: placeholders only",
    },
    "databases/paused.py": {"table": "quote_name of the QueueState model's table"},
    "databases/postgresql_pooling.py": {
        "CHANNEL": "the constant LISTEN channel name",
        "alias": "a check message, not SQL",
    },
    "databases/base.py": {
        "flow_table": "QueueDatabase.flow_key_names: a quoted constant table name",
        "key_column": "QueueDatabase.flow_key_names: a quoted constant column name",
        "connection.display_name": "an error message, not SQL",
        "alias": "an error message, not SQL",
        "quote(table)": "quote_name of the rollup model's table",
        "names": "quoted constant column names (rollups.KEYS and SUMS)",
        "values": "rows of placeholders",
        "conflict": "quoted constant column names (rollups.KEYS)",
        "sums": "quoted constant column names (rollups.SUMS)",
        "', '.join((f\"'{s.value}'\" for s in CLAIMABLE))": "the Status constants of CLAIMABLE",
    },
    "metrics/state.py": {
        "alias_name": "quote_name of a constant alias made from an int",
        "table": "quote_name of the job table's name",
        "status.value": "a Status constant",
        "int(cap) + 1": "an int",
        "quote(Job._meta.db_table)": "quote_name of the job table's name",
        "queue_database(alias).claimable_condition()": "status constants, or claimable = 1",
        "sql": "the statement built above from the reviewed parts",
    },
    "admin/filters.py": {"table": "quote_name of the model's table"},
    "admin/summary.py": {
        "sql": "SQL Django's compiler made for a queryset (its values are parameters)",
        "connection.ops.quote_name('sample')": "a quoted constant alias",
        "connection.ops.quote_name(f'c{index}')": "a quoted alias made from an int",
        "index": "an int",
        "', '.join(columns)": "subqueries compiled by Django, values as parameters",
    },
}


def _interpolations(node: ast.AST) -> tuple[str, list[ast.expr]] | None:
    """(literal text, interpolated expressions) of a string built by formatting."""
    if isinstance(node, ast.JoinedStr):
        text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        return text, [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return node.func.value.value, [*node.args, *(k.value for k in node.keywords)]
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mod)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str)
    ):
        return node.left.value, [node.right]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        sides = [node.left, node.right]
        texts = [s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
        if texts:
            return " ".join(texts), [s for s in sides if not isinstance(s, ast.Constant)]
    return None


def sql_interpolations() -> Iterator[tuple[str, int, str]]:
    """(module, line, expression) of every expression formatted into SQL-looking text."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            found = _interpolations(node)
            if found and SQL_TEXT.search(found[0]):
                for expression in found[1]:
                    if not isinstance(expression, ast.JoinedStr):  # nested: walked on its own
                        yield module, node.lineno, ast.unparse(expression)


class TestNoSQLFromInput:
    def test_the_scan_finds_the_sql_it_must_review(self) -> None:
        """The scan is not blind: it sees the claimers' and the exit writer's statements."""
        found = {(module, expression) for module, _, expression in sql_interpolations()}
        for module in ("databases/claiming.py", "databases/mysql.py"):
            assert (module, "self.table") in found
        assert (
            "databases/sqlite.py",
            "'sqlqueue_claim_queue' if queues else 'sqlqueue_claim_any'",
        ) in found
        assert ("databases/exits.py", "self.table") in found

    def test_every_interpolation_into_sql_was_reviewed(self) -> None:
        unreviewed = [
            f"{module}:{line}: {expression}"
            for module, line, expression in sql_interpolations()
            if expression not in REVIEWED.get(module, {})
        ]
        assert not unreviewed, (
            "SQL built by formatting with expressions nobody reviewed. Pass values as query "
            "parameters; if this one is an identifier or a constant, add it to REVIEWED with "
            "the reason:\n" + "\n".join(unreviewed)
        )

    @pytest.mark.parametrize(
        "queues",
        [["q'); DROP TABLE x; --"], ["a", 'b"`;--', "%s", "%(x)s"]],
        ids=["one", "several"],
    )
    def test_queue_filter_is_placeholders_only(self, queues: list[str]) -> None:
        sql, params = Claimer.queue_filter(Claimer.__new__(Claimer), queues)
        assert params == queues
        assert re.fullmatch(r" AND queue (= %s|IN \(%s(, %s)*\))", sql), sql

    def test_lease_owner_is_a_parameter(self) -> None:
        claimer = Claimer.__new__(Claimer)
        claimer.connection = types.SimpleNamespace(
            ops=types.SimpleNamespace(adapt_datetimefield_value=lambda value: value)
        )
        worker = "w'); DROP TABLE x; --"
        sql, params = claimer.running_assignments(worker, 60, timezone.now())
        assert worker not in sql and "w'" not in sql
        assert params[0] == worker

    @pytest.mark.parametrize(
        "value", ["NORMAL; DROP TABLE victim", "OFF -- ", "normal'", 1, None, "FULL\x00;"]
    )
    def test_sqlite_synchronous_setting_is_never_executed_as_given(
        self, value: Any, tmp_path: Path, settings: Any
    ) -> None:
        path = tmp_path / "victim.sqlite3"
        raw = sqlite3.connect(path)
        raw.execute("CREATE TABLE victim (x)")
        settings.SQLQUEUE = {**settings.SQLQUEUE, "SQLITE_SYNCHRONOUS": value}
        fake = types.SimpleNamespace(
            vendor="sqlite", settings_dict={"NAME": str(path)}, connection=raw
        )
        with contextlib.suppress(Exception):  # refusing is fine; running it as SQL is not
            SQLiteDatabase.tune_connection(fake)
        assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'victim'").fetchone()
        assert raw.execute("PRAGMA synchronous").fetchone()[0] in (0, 1, 2, 3)
        raw.close()


# ---------------------------------------------------------------------------- live capture

MARK = "mark7Qz"
HOSTILE = f"{MARK}'); DROP TABLE django_sqlqueue_job; -- \"` \\ %s %(x)s"
HOSTILE_QUEUE = HOSTILE[:100]
HOSTILE_WORKER = f"{MARK}' OR '1'='1"


@pytest.fixture
def statements(alias: str) -> Iterator[list[tuple[str, Any]]]:
    """Every (sql, params) Django sends to the queue database while the test runs."""
    captured: list[tuple[str, Any]] = []

    def capture(
        execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        captured.append((sql, params))
        return execute(sql, params, many, context)

    with connections[alias].execute_wrapper(capture):
        yield captured


@pytest.fixture
def hostile_job() -> Iterator[Any]:
    name = HOSTILE[:255]

    def handler(*args: Any, **kwargs: Any) -> Any:
        return {"args": list(args), "kwargs": kwargs}

    registered = job(name, queue=HOSTILE_QUEUE)(handler)
    yield registered
    registry.unregister(name)


def _assert_parameters_only(statements: list[tuple[str, Any]]) -> None:
    assert statements, "nothing was captured"
    leaked = [sql for sql, _ in statements if MARK in sql]
    assert not leaked, "user input inside SQL text:\n" + "\n".join(leaked)
    assert any(MARK in repr(params) for _, params in statements), "the input never reached SQL"


@pytest.mark.django_db
def test_a_whole_job_life_with_hostile_strings_sends_them_only_as_parameters(
    alias: str, hostile_job: Any, statements: list[tuple[str, Any]]
) -> None:
    keyed = hostile_job.using(idempotency_key=HOSTILE).enqueue(HOSTILE, **{HOSTILE: [HOSTILE]})
    again = hostile_job.using(idempotency_key=HOSTILE).enqueue("again")
    assert again.deduplicated and again.pk == keyed.pk
    many = hostile_job.enqueue_many([{"x": HOSTILE}, {"y": HOSTILE}])
    claimer = queue_database(alias).claimer()
    now = timezone.now() + timedelta(seconds=1)

    claimed = claimer.claim(HOSTILE_WORKER, [HOSTILE_QUEUE, "other"], 10, 60, now)
    assert {c.id for c in claimed} == {keyed.pk, *(j.pk for j in many)}
    first, second, third = sorted(claimed, key=lambda c: c.id)
    assert transitions.renew_leases(HOSTILE_WORKER, [c.id for c in claimed], 60, alias=alias) == 3
    assert transitions.complete_many([(first, {"result": HOSTILE})], now=now, alias=alias) == {
        first.id
    }
    assert transitions.fail(second, HOSTILE, HOSTILE, alias=alias) == Status.FAILED
    assert transitions.release(third, HOSTILE, alias=alias)
    again_claimed = claimer.claim(HOSTILE_WORKER, [HOSTILE_QUEUE], 2, 60, now + timedelta(hours=1))
    assert {c.id for c in again_claimed} == {second.id, third.id}
    transitions.recover_worker(HOSTILE_WORKER, HOSTILE, running=again_claimed[0].id, alias=alias)
    transitions.recover_expired_leases(alias=alias, now=now + timedelta(days=1))
    assert operations.requeue_many([first.id], alias=alias).changed == 1
    assert operations.cancel_many([second.id], alias=alias).changed == 1
    assert operations.run_now_many([first.id, third.id], alias=alias).changed == 2
    assert queries.status_summary(HOSTILE_QUEUE, alias=alias)["cancelled"] == 1
    queries.status_summary_by_queue(alias=alias)
    out = io.StringIO()
    call_command("jobstatus", "--queue", HOSTILE_QUEUE, stdout=out)
    call_command("purgejobs", "--days", "0", "--queue", HOSTILE_QUEUE, "--dry-run", stdout=out)
    purged = operations.purge(operations.purgeable(queue=HOSTILE_QUEUE, alias=alias))

    _assert_parameters_only(statements)
    assert purged == 1  # the cancelled job, and only it
    stored = Job.objects.using(alias).get(pk=keyed.pk)
    assert stored.args == [HOSTILE] and stored.kwargs == {HOSTILE: [HOSTILE]}
    assert stored.name == HOSTILE[:255] and stored.queue == HOSTILE_QUEUE
    assert stored.idempotency_key == HOSTILE
    assert Job.objects.using(alias).count() == 2  # the table is still there, rows intact


@pytest.mark.django_db
def test_admin_search_and_filters_with_hostile_strings(
    admin_client: Any, hostile_job: Any, statements: list[tuple[str, Any]]
) -> None:
    hostile_job.enqueue(HOSTILE)
    for query in (
        {"q": HOSTILE},
        {"queue": HOSTILE_QUEUE},
        {"name": HOSTILE[:255]},
        {"idempotency_key": HOSTILE},
        {"q": HOSTILE, "status__exact": "pending"},
    ):
        response = admin_client.get("/admin/django_sqlqueue/job/", query)
        assert response.status_code == 200, (query, response.status_code)
    _assert_parameters_only(statements)
    assert Job.objects.count() == 1
