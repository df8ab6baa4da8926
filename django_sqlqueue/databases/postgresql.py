"""PostgreSQL: every way the queue's SQL and waiting differ on PostgreSQL.

- Claim: `UPDATE … WHERE ctid = ANY(ARRAY(SELECT ctid … LIMIT n FOR UPDATE SKIP LOCKED))
  RETURNING`, under planner settings that forbid a sort.
- Enqueue: the INSERT notifies idle workers itself, and many rows travel as one JSON document.
- Waiting: LISTEN on a dedicated connection, direct even when the queue's go through a
  connection pooler (postgresql_pooling.py).
- Statistics: the supervisor analyses the job table after a burst.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core import checks
from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import get_settings
from ..models import Job
from ..rows import NewJob
from ..states import Status
from .base import QueueDatabase, StatisticsKeeper, skip_locked_check
from .claiming import UpdateReturningClaimer
from .exits import ExitWriter
from .inserting import INSERT_COLUMNS, Inserter
from .postgresql_pooling import CHANNEL, ListeningWaiter, pooler_checks

logger = logging.getLogger("django_sqlqueue")


#: Planner settings of the claim's own transaction, sent in the same message as the claim.
#: Whatever the statistics say (a burst enqueued faster than anyone analyses the table looks
#: like a handful of rows), no plan may sort the backlog: the claim walks its partial index in
#: claim order and stops after LIMIT rows. Where a sort cannot be avoided (merging the few
#: candidates of several queues), its disabled price would trigger JIT compilation: JIT off.
#: SET LOCAL ends with the transaction, so nothing outlives the claim on a pooled connection.
PLANNER_SETTINGS = (
    "SET LOCAL enable_sort = off; SET LOCAL enable_incremental_sort = off; SET LOCAL jit = off; "
)


class PostgreSQLClaimer(UpdateReturningClaimer):
    """SKIP LOCKED lets concurrent workers pass each other instead of queueing on the same
    rows, and rows are locked only after the LIMIT has picked them.

    The claim is written so that no statistics can make it slow (docs/databases.md has the
    measurements). The candidates' subquery runs once, as an array, and the UPDATE finds the
    rows it locked by their physical address (`ctid`, a TID scan): with `id IN (subquery)`, a
    table the statistics call empty could be joined the other way round, the locking subquery
    run again for every row of the table. Under PLANNER_SETTINGS the subquery cannot sort, so
    it walks the index whose order it asks for: `sqlqueue_claim_any` for every queue, and for one
    queue `sqlqueue_claim_queue`, which alone gives `ORDER BY queue, priority DESC, …` (the queue
    is an array of one, not a constant the planner would drop from the order).
    """

    lock_clause = " FOR UPDATE SKIP LOCKED"
    # A woken job wakes idle workers, as an enqueue does.
    wake_returning = f" RETURNING pg_notify('{CHANNEL}', queue)"

    # Nothing but the TID condition in the WHERE: another condition could make an index scan
    # look as cheap as the TID scan to a planner that believes the table empty.
    claimed_rows = "ctid = ANY(ARRAY({candidates}))"

    def candidates(
        self,
        queues: Sequence[str] | None,
        limit: int,
        now: datetime,
        excluded: Sequence[str] = (),
    ) -> tuple[str, list[Any]]:
        ready = self.adapt(now)
        only_sql, only_params = self.names_filter()
        names = list(dict.fromkeys(queues or ()))
        if not names:
            # Paused queues (rare) are filtered out of the walk of the cross-queue index.
            paused_sql, paused_params = self.excluded_filter(excluded)
            sql = (
                f"SELECT ctid FROM {self.table} WHERE {self.claimable_sql}{paused_sql} "
                f"AND run_at <= %s{only_sql} "
                f"ORDER BY priority DESC, run_at, id LIMIT %s{self.lock_clause}"
            )
            return sql, [*paused_params, ready, *only_params, limit]
        if len(names) == 1:
            return self.queue_walk("ctid"), [names[0], ready, *only_params, limit]
        # Several queues: each queue's own index walk, at most `limit` rows each, merged
        # (one walk of the cross-queue index, filtered, would read every claimable row of the
        # other queues whenever the named ones are empty or rare).
        branch = self.queue_walk("ctid, priority, run_at, id")
        branches = " UNION ALL ".join(
            f"SELECT * FROM ({branch}) AS q{index}" for index in range(len(names))
        )
        sql = (
            f"SELECT c.ctid FROM ({branches}) AS c "
            "ORDER BY c.priority DESC, c.run_at, c.id LIMIT %s"
        )
        params = [value for name in names for value in (name, ready, *only_params, limit)]
        return sql, [*params, limit]

    def queue_walk(self, columns: str) -> str:
        """One queue's candidates, in the order of its own index only."""
        return (
            f"SELECT {columns} FROM {self.table} WHERE {self.claimable_sql} "
            f"AND queue = ANY(ARRAY[%s]) AND run_at <= %s{self.names_filter()[0]} "
            f"ORDER BY queue, priority DESC, run_at, id LIMIT %s{self.lock_clause}"
        )

    def run_claim(self, sql: str, params: list[Any]) -> list[Any]:
        if not self.connection.get_autocommit():
            # Inside a caller's transaction SET LOCAL would outlast the claim: plain claim.
            return super().run_claim(sql, params)
        with self.connection.cursor() as cursor:
            text, values = one_text(self.connection, cursor, PLANNER_SETTINGS + sql, params)
            cursor.execute(text, values)
            # psycopg 3 stays on the first statement's result; psycopg2 keeps only the last.
            while cursor.description is None and cursor.nextset():
                pass
            return list(cursor.fetchall())


def one_text(
    connection: BaseDatabaseWrapper, cursor: Any, sql: str, params: list[Any]
) -> tuple[str, list[Any] | None]:
    """`sql` with `params` in a form that may hold several statements: unchanged where the
    driver binds parameters itself and sends one query text (psycopg 3's default cursor, and
    psycopg2); with server-side binding (OPTIONS['server_side_binding']), which allows one
    statement per message, the parameters are bound here, by psycopg's own client-side rules."""
    try:
        import psycopg
    except ImportError:  # psycopg2
        return sql, params
    raw = getattr(cursor, "cursor", cursor)
    if not isinstance(raw, psycopg.Cursor) or isinstance(raw, psycopg.ClientCursor):
        return sql, params
    return psycopg.ClientCursor(connection.connection).mogrify(sql, params), None


class PostgreSQLExitWriter(ExitWriter):
    append_entry = "history || jsonb_build_array({entry})"
    json_object = "jsonb_build_object"
    text_placeholder = "%s::text"
    json_placeholder = "%s::jsonb"
    # Jobs handed back due now wake idle workers, as an enqueue does.
    returning_woken = f", pg_notify('{CHANNEL}', queue)"

    def __init__(self, alias: str) -> None:
        if async_completion(alias):
            # A completion's own transaction commits without waiting for the WAL flush: a
            # worker crash loses nothing, a database server crash may lose the completions
            # of its last fraction of a second, whose jobs then run again (docs/guarantees.md).
            self.completion_tail = ASYNC_COMMIT
        super().__init__(alias)


def async_completion(alias: str) -> bool:
    """POSTGRESQL_ASYNC_COMPLETION, or by default: on, unless the server waits for
    synchronous standbys. An asynchronous commit waits for no standby either, so a failover
    could lose completions the standby never received (their jobs would run again), which a
    project that pays for synchronous replication does not expect."""
    wanted = get_settings().postgresql_async_completion
    if wanted is not None:
        return wanted
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_standby_names')")
        (standbys,) = cursor.fetchone()
    return not standbys.strip()


#: Makes the implicit transaction of one statement commit asynchronously.
ASYNC_COMMIT = " FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit"


#: Rows per JSON statement: it has one parameter whatever its size, so larger chunks pay.
ROWS_PER_JSON_STATEMENT = 5000
#: The columns that differ between jobs, and their types in the JSON rows.
JSON_ROW_TYPES = {
    "name": "text",
    "queue": "text",
    "args": "jsonb",
    "kwargs": "jsonb",
    "priority": "integer",
    "max_attempts": "integer",
    "run_at": "timestamptz",
    "created_at": "timestamptz",
    "idempotency_key": "text",
    "backend": "text",
    "trace_context": "jsonb",
    "ref_nonce": "bigint",
}


class PostgreSQLInserter(Inserter):
    """Wakes idle workers from the INSERT, and sends many rows as one JSON array.

    NOTIFY is delivered only when the transaction commits, never on rollback, and identical
    notifications of one transaction are folded into one: one wake-up per queue per enqueueing
    transaction, with no extra round trip. Many rows go through `jsonb_to_recordset`: one
    parameter encoded by the json module's C code, where a VALUES list would have a placeholder
    per value for the driver to parse in Python.
    """

    json_placeholder = "%s::jsonb"
    returning_extra = f", pg_notify('{CHANNEL}', queue)"

    def __init__(self, alias: str) -> None:
        super().__init__(alias)
        self.json_rows_sql = self._json_rows_statement(self.connection.ops.quote_name)

    def _json_rows_statement(self, quote: Any) -> str:
        """INSERT … SELECT … FROM jsonb_to_recordset(one JSON array of rows).

        Rows come back from RETURNING in the order the set function produced them (Django's
        own bulk_create relies on the same for unnest), so ids pair with jobs by position.
        """
        constants = {
            "status": f"'{Status.PENDING.value}'",
            "attempts": "0",
            "updated_at": f"r.{quote('created_at')}",
            "last_error": "''",
            "history": "'[]'::jsonb",
            "lease_owner": "''",
        }
        selected = ", ".join(constants.get(c, f"r.{quote(c)}") for c in INSERT_COLUMNS)
        record = ", ".join(f"{quote(c)} {t}" for c, t in JSON_ROW_TYPES.items())
        return (
            f"{self.prefix.removesuffix(' VALUES ')} SELECT {selected} "
            f"FROM jsonb_to_recordset(%s::jsonb) AS r({record}){self.returning_sql}"
        )

    @staticmethod
    def json_row(job: NewJob) -> dict[str, Any]:
        created = job.created_at.isoformat()
        return {
            "name": job.name,
            "queue": job.queue,
            "args": job.args,
            "kwargs": job.kwargs,
            "priority": job.priority,
            "max_attempts": job.max_attempts,
            "run_at": job.run_at.isoformat() if job.run_at != job.created_at else created,
            "created_at": created,
            "idempotency_key": job.idempotency_key,
            "backend": job.backend,
            "trace_context": job.trace_context,
            "ref_nonce": job.ref_nonce,
        }

    def insert_returning_ids(
        self, cursor: Any, jobs: Sequence[NewJob], extra: bool = False
    ) -> list[int]:
        if len(jobs) == 1 or extra:
            return super().insert_returning_ids(cursor, jobs, extra)
        ids: list[int] = []
        for start in range(0, len(jobs), ROWS_PER_JSON_STATEMENT):
            chunk = jobs[start : start + ROWS_PER_JSON_STATEMENT]
            rows = json.dumps([self.json_row(job) for job in chunk])
            cursor.execute(self.json_rows_sql, [rows])
            ids.extend(row[0] for row in cursor.fetchall())
        return ids


#: Analyse when at least this many rows changed since the last analysis…
MIN_CHANGED_ROWS = 10_000
#: …and they are at least this share of the rows the statistics last counted.
MIN_CHANGED_SHARE = 0.5
#: At most one analysis per supervisor in this many seconds.
MIN_INTERVAL = 60.0
#: Another session's ANALYZE or VACUUM holds the lock: skip rather than wait.
LOCK_TIMEOUT_MS = 1000


@dataclass
class AnalyzingKeeper(StatisticsKeeper):
    """ANALYZE the job table after a burst, so claims keep walking the claim index.

    The planner walks the partial claim index in order only while it believes the backlog is
    large; after a burst enqueued faster than autovacuum analyses, it may sort the whole
    backlog on every claim (docs/benchmarks.md has the measurements). A steady workload stays
    below the thresholds and is left to autovacuum.
    """

    alias: str
    min_changed_rows: int = MIN_CHANGED_ROWS
    min_changed_share: float = MIN_CHANGED_SHARE
    min_interval: float = MIN_INTERVAL
    last_analyzed: float = float("-inf")

    def refresh_if_stale(self) -> bool:
        if time.monotonic() - self.last_analyzed < self.min_interval:
            return False
        connection = connections[self.alias]
        table = connection.ops.quote_name(Job._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT s.n_mod_since_analyze, c.reltuples FROM pg_stat_user_tables s "
                "JOIN pg_class c ON c.oid = s.relid WHERE s.relid = %s::regclass",
                [table],
            )
            row = cursor.fetchone()
        if row is None:
            return False
        changed, counted = int(row[0] or 0), max(float(row[1] or 0), 0.0)
        if changed < self.min_changed_rows or changed < self.min_changed_share * counted:
            return False
        self.last_analyzed = time.monotonic()
        try:
            with transaction.atomic(using=self.alias), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
                cursor.execute(f"ANALYZE {table}")
        except DatabaseError as exc:
            logger.info("Could not analyse the job table (%s); will try again later", exc)
            return False
        logger.info("Analysed the job table: %d rows had changed since its last analysis", changed)
        return True


class PostgreSQLDatabase(QueueDatabase):
    vendor = "postgresql"
    claimer_class = PostgreSQLClaimer
    exit_writer_class = PostgreSQLExitWriter
    inserter_class = PostgreSQLInserter
    waiter_class = ListeningWaiter
    clock_sql = "SELECT clock_timestamp() AT TIME ZONE 'UTC'"  # now(): the transaction's start
    max_connections_sql = "SHOW max_connections"

    def statistics_keeper(self) -> StatisticsKeeper:
        return AnalyzingKeeper(self.alias)

    def wake(self, queue: str) -> None:
        # Delivered on commit, as an enqueue's notification is.
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, queue])

    def estimated_rows(self, table: str) -> int | None:
        # pg_class keeps one, refreshed by autovacuum and ANALYZE.
        return self.estimate_from(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
            [self.connection.ops.quote_name(table)],
        )

    @classmethod
    def check(cls, alias: str, connection: BaseDatabaseWrapper) -> list[checks.CheckMessage]:
        return skip_locked_check(alias, connection) + pooler_checks(alias, connection)
