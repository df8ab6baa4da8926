"""django-sqlqueue's claim and complete statements, issued straight through the DB driver.

No Django, no ORM, no worker loop: just the SQL a worker needs per job, so the table shows
the floor under our own numbers. Keep these statements in step with
django_sqlqueue/databases/ and transitions.complete().
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from typing import Any

from .databases import mysql_params, pg_params, sqlite_path

TABLE = "django_sqlqueue_job"
COLUMNS = (
    "id, name, queue, args, kwargs, attempts, max_attempts, priority, run_at, created_at, "
    "history, backend"
)
ASSIGN = (
    "status = 'running', attempts = attempts + 1, lease_owner = {p}, lease_expires_at = {p}, "
    "started_at = {p}, finished_at = NULL, updated_at = {p}"
)
ORDER = "ORDER BY priority DESC, run_at, id LIMIT {p}"
COMPLETE = (
    f"UPDATE {TABLE} SET status = 'completed', result = NULL, finished_at = {{p}}, "
    "updated_at = {p}, lease_owner = '', lease_expires_at = NULL, history = {json} "
    "WHERE id = {p} AND status = 'running' AND lease_owner = {p} AND attempts = {p}"
)
LEASE = timedelta(seconds=60)


class RawQueue:
    """One connection; `claim(limit)` then `complete(rows)` exactly as a worker would."""

    placeholder = "%s"
    json_placeholder = "%s"

    def __init__(self) -> None:
        self.owner = f"raw:{os.getpid()}"
        self.complete_sql = COMPLETE.format(p=self.placeholder, json=self.json_placeholder)

    def now(self) -> Any:
        return datetime.now(timezone.utc)

    def claim(self, limit: int) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def complete(self, rows: list[tuple[Any, ...]], started: Any) -> None:
        """Record each claimed job as completed: one statement each, one transaction per call."""
        now = self.now()
        params = []
        for row in rows:
            history = row[10]
            history = json.loads(history) if isinstance(history, (str, bytes)) else history
            record = {
                "attempt": row[5],
                "worker": self.owner,
                "started_at": str(started),
                "finished_at": str(now),
                "outcome": "completed",
                "error": "",
                "traceback": "",
            }
            params.append(
                (now, now, json.dumps([*(history or []), record]), row[0], self.owner, row[5])
            )
        self.write_many(self.complete_sql, params)

    def write_many(self, sql: str, params: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError

    def count_completed(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        self.conn.close()


class SQLiteQueue(RawQueue):
    placeholder = "?"
    json_placeholder = "?"
    #: PRAGMAs copied from django-sqlqueue's own tuned Django connection (see `pragmas`).
    PRAGMAS = ("journal_mode", "synchronous", "busy_timeout")

    def __init__(self, pragmas: dict[str, Any] | None = None) -> None:
        import sqlite3

        super().__init__()
        self.conn = sqlite3.connect(sqlite_path(), isolation_level=None, timeout=20)
        for name, value in (pragmas or {}).items():
            self.conn.execute(f"PRAGMA {name} = {value}")

    def now(self) -> Any:
        return datetime.now(timezone.utc).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")

    def claim(self, limit: int) -> list[tuple[Any, ...]]:
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        text = now.strftime("%Y-%m-%d %H:%M:%S.%f")
        expires = (now + LEASE).strftime("%Y-%m-%d %H:%M:%S.%f")
        sql = (
            f"UPDATE {TABLE} SET {ASSIGN.format(p='?')} WHERE id IN (SELECT id FROM {TABLE} "
            f"INDEXED BY sqlqueue_claim_any "  # as the claimer: the planner may pick another
            f"WHERE status IN ('pending', 'failed') AND run_at <= ? {ORDER.format(p='?')}) "
            f"RETURNING {COLUMNS}"
        )
        return self.conn.execute(sql, (self.owner, expires, text, text, text, limit)).fetchall()

    def write_many(self, sql: str, params: list[tuple[Any, ...]]) -> None:
        if len(params) == 1:
            self.conn.execute(sql, params[0])
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(sql, params)
        self.conn.execute("COMMIT")

    def count_completed(self) -> int:
        query = f"SELECT count(*) FROM {TABLE} WHERE status = 'completed'"
        return int(self.conn.execute(query).fetchone()[0])


class PostgreSQLQueue(RawQueue):
    json_placeholder = "%s::jsonb"

    def __init__(self, pragmas: dict[str, Any] | None = None) -> None:
        import psycopg

        super().__init__()
        # Client-side binding, as Django sends queries: with server-side binding psycopg
        # prepares repeated statements and PostgreSQL may switch to a generic plan.
        self.conn = psycopg.connect(
            **pg_params(), autocommit=True, cursor_factory=psycopg.ClientCursor
        )

    def claim(self, limit: int) -> list[tuple[Any, ...]]:
        # As PostgreSQLClaimer sends it: its planner settings in the same message, and the
        # rows found by ctid from the array of candidates.
        now = self.now()
        sql = (
            "SET LOCAL enable_sort = off; SET LOCAL enable_incremental_sort = off; "
            f"SET LOCAL jit = off; UPDATE {TABLE} SET {ASSIGN.format(p='%s')} "
            f"WHERE ctid = ANY(ARRAY(SELECT ctid FROM {TABLE} "
            f"WHERE status IN ('pending', 'failed') AND run_at <= %s {ORDER.format(p='%s')} "
            f"FOR UPDATE SKIP LOCKED)) RETURNING {COLUMNS}"
        )
        cursor = self.conn.execute(sql, (self.owner, now + LEASE, now, now, now, limit))
        while cursor.description is None and cursor.nextset():
            pass
        return cursor.fetchall()

    def write_many(self, sql: str, params: list[tuple[Any, ...]]) -> None:
        if len(params) == 1:
            self.conn.execute(sql, params[0])
            return
        with self.conn.transaction(), self.conn.cursor() as cursor:
            cursor.executemany(sql, params)

    def count_completed(self) -> int:
        query = f"SELECT count(*) FROM {TABLE} WHERE status = 'completed'"
        row = self.conn.execute(query).fetchone()
        return int(row[0]) if row else 0


class MySQLQueue(RawQueue):
    def __init__(self, pragmas: dict[str, Any] | None = None) -> None:
        import MySQLdb

        super().__init__()
        self.conn = MySQLdb.connect(**mysql_params())
        self.conn.autocommit(True)

    def now(self) -> Any:
        return datetime.now(timezone.utc).replace(tzinfo=None)

    def claim(self, limit: int) -> list[tuple[Any, ...]]:
        import MySQLdb

        while True:
            try:
                return self._claim(limit)
            except MySQLdb.OperationalError as exc:
                if exc.args[0] != 1213:  # InnoDB deadlock: rolled back, retry at once
                    raise
                self.conn.rollback()

    def _claim(self, limit: int) -> list[tuple[Any, ...]]:
        now = self.now()
        cursor = self.conn.cursor()
        cursor.execute("BEGIN")
        cursor.execute(
            f"SELECT {COLUMNS} FROM {TABLE} WHERE claimable = 1 AND run_at <= %s "
            f"{ORDER.format(p='%s')} FOR UPDATE SKIP LOCKED",
            (now, limit),
        )
        rows = cursor.fetchall()
        if rows:
            ids = [row[0] for row in rows]
            cursor.execute(
                f"UPDATE {TABLE} SET {ASSIGN.format(p='%s')} WHERE id IN "
                f"({', '.join(['%s'] * len(ids))})",
                (self.owner, now + LEASE, now, now, *ids),
            )
        cursor.execute("COMMIT")
        # The UPDATE spent an attempt: the rows read before it show the old count.
        return [(*row[:5], row[5] + 1, *row[6:]) for row in rows]

    def write_many(self, sql: str, params: list[tuple[Any, ...]]) -> None:
        cursor = self.conn.cursor()
        if len(params) == 1:
            cursor.execute(sql, params[0])
            return
        cursor.execute("BEGIN")
        cursor.executemany(sql, params)
        cursor.execute("COMMIT")

    def count_completed(self) -> int:
        cursor = self.conn.cursor()
        cursor.execute(f"SELECT count(*) FROM {TABLE} WHERE status = 'completed'")
        return int(cursor.fetchone()[0])


RAW_QUEUES: dict[str, type[RawQueue]] = {
    "sqlite": SQLiteQueue,
    "postgres": PostgreSQLQueue,
    "mysql": MySQLQueue,
}


def sqlite_pragmas(connection: Any) -> dict[str, Any]:
    """The PRAGMAs django-sqlqueue put on a Django SQLite connection, to apply them raw."""
    with connection.cursor() as cursor:
        values = {}
        for name in SQLiteQueue.PRAGMAS:
            cursor.execute(f"PRAGMA {name}")
            values[name] = cursor.fetchone()[0]
    return values


def work_through(
    vendor: str, batch: int, pragmas: dict[str, Any] | None = None, *, each: bool = False
) -> int:
    """A raw worker: claim `batch` jobs, complete them, until none are left; jobs done.

    `each` commits every completion on its own, as a worker in the default mode does (a
    success is durable before the next job starts); otherwise a batch's completions share one
    transaction.
    """
    queue = RAW_QUEUES[vendor](pragmas)
    done = 0
    try:
        while True:
            started = queue.now()
            rows = queue.claim(batch)
            if not rows:
                return done
            if each:
                for row in rows:
                    queue.complete([row], started)
            else:
                queue.complete(rows, started)
            done += len(rows)
    finally:
        queue.close()
