"""Record successful attempts in batches: one UPDATE per distinct result value.

A batch of jobs returning the same value (None, the common case) costs one statement. Every
row stays fenced by lease owner and attempt, so a worker that lost a lease cannot overwrite the
new owner's state. The attempt's history entry is built by the database from the row itself
(attempt, worker, start), so no per-row value is sent. Vendors supply how to append to a JSON
array (`history_append`) and whether UPDATE can return the rows it changed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connections

from ..models import Job
from ..rows import ClaimedJob
from ..states import Status

#: Longest batch sent in one statement (bounded parameter count on every database).
MAX_BATCH = 200

#: The completion entry's fields as `key, SQL value` pairs for a JSON object constructor;
#: `{started}` is the vendor's text of started_at. Same keys as attempts.AttemptEntry.
ENTRY_FIELDS = (
    "'attempt', attempts, 'worker', lease_owner, 'started_at', {started}, "
    "'finished_at', %s, 'outcome', 'completed', 'error', '', 'traceback', '', "
    "'exception', ''"
)


class Completer:
    """Marks claimed jobs completed, fenced, in as few statements as their results allow."""

    #: SQL of `history` with the completion entry appended (vendor's JSON functions).
    history_append = ""
    #: Placeholder of a JSON value (PostgreSQL casts text to jsonb).
    json_placeholder = "%s"
    #: Written before a list of row values (SQLite needs `VALUES (…), (…)`).
    row_values_prefix = ""
    #: Written between the SET list and WHERE (PostgreSQL: commit without waiting for disk).
    from_clause = ""
    #: Whether UPDATE … RETURNING tells which rows were written (MySQL: row counts instead).
    returning = True

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.connection = connections[alias]
        self.table = self.connection.ops.quote_name(Job._meta.db_table)
        self.history_params = self.history_parameters()
        self.one_sql = self.driver_sql(self.single_statement())
        # Inside a job's own transaction (`atomic=True`) the commit is the caller's: no
        # vendor trick that changes how it commits.
        self.one_sql_in_transaction = self.driver_sql(self.single_statement(from_clause=""))

    def history_parameters(self) -> list[Any]:
        """Parameters `history_append` takes before the finished_at text."""
        return []

    def assignments(self, from_clause: str | None = None) -> str:
        # MySQL applies SET assignments in order: history must read lease_owner first.
        tail = self.from_clause if from_clause is None else from_clause
        return (
            f"history = {self.history_append}, status = '{Status.COMPLETED.value}', "
            f"result = {self.json_placeholder}, finished_at = %s, updated_at = %s, "
            f"lease_owner = '', lease_expires_at = NULL{tail}"
        )

    def single_statement(self, from_clause: str | None = None) -> str:
        """The fenced UPDATE of one job, built once: the per-job acknowledgement."""
        sql = (
            f"UPDATE {self.table} SET {self.assignments(from_clause)} WHERE id = %s "
            f"AND status = '{Status.RUNNING.value}' AND lease_owner = %s AND attempts = %s"
        )
        return sql + " RETURNING id" if self.returning else sql

    def driver_sql(self, sql: str) -> str:
        """`sql` in the driver's own placeholder style (see execute_raw)."""
        return sql

    def execute_raw(self, sql: str, params: Sequence[Any]) -> Any:
        """Run one statement on the driver's cursor, skipping Django's cursor wrapper (its
        placeholder conversion and query logging are a large share of a short job's
        acknowledgement); errors still come out as Django's database exceptions."""
        connection = self.connection
        connection.ensure_connection()
        with connection.wrap_database_errors:
            cursor = connection.connection.cursor()
            try:
                cursor.execute(sql, params)
                return cursor.fetchall() if self.returning else cursor.rowcount
            finally:
                cursor.close()

    def complete_one(
        self, job: ClaimedJob, result: Any, now: datetime, *, in_transaction: bool = False
    ) -> bool:
        """Mark one job completed; False if its lease was lost and nothing was written.

        `in_transaction`: inside the job's own transaction, which the caller commits."""
        adapted_now = self.connection.ops.adapt_datetimefield_value(now)
        params = [
            *self.history_params,
            now.isoformat(),
            None if result is None else json.dumps(result),
            adapted_now,
            adapted_now,
            job.id,
            job.lease_owner,
            job.attempts,
        ]
        sql = self.one_sql_in_transaction if in_transaction else self.one_sql
        outcome = self.execute_raw(sql, params)
        return bool(outcome)

    def complete(self, results: Sequence[tuple[ClaimedJob, Any]], now: datetime) -> set[int]:
        """Mark the jobs completed with their results; return the ids actually recorded."""
        by_result: dict[str | None, list[ClaimedJob]] = defaultdict(list)
        for job, result in results:
            by_result[None if result is None else json.dumps(result)].append(job)
        recorded: set[int] = set()
        for result_text, jobs in by_result.items():
            for start in range(0, len(jobs), MAX_BATCH):
                recorded |= self.complete_batch(jobs[start : start + MAX_BATCH], result_text, now)
        return recorded

    def statement(
        self, jobs: list[ClaimedJob], result_text: str | None, now: datetime
    ) -> tuple[str, list[Any]]:
        """The fenced UPDATE of one batch and its parameters."""
        owner = jobs[0].lease_owner
        adapted_now = self.connection.ops.adapt_datetimefield_value(now)
        pairs = ", ".join(["(%s, %s)"] * len(jobs))
        keys = [value for job in jobs for value in (job.id, job.attempts)]
        # `id IN` steers every planner to the primary key; the row-value test is the fence.
        sql = (
            f"UPDATE {self.table} SET {self.assignments()} "
            f"WHERE id IN ({', '.join(['%s'] * len(jobs))}) "
            f"AND status = '{Status.RUNNING.value}' AND lease_owner = %s "
            f"AND (id, attempts) IN ({self.row_values_prefix}{pairs})"
        )
        ids = [job.id for job in jobs]
        params = [
            *self.history_params,
            now.isoformat(),
            result_text,
            adapted_now,
            adapted_now,
            *ids,
            owner,
            *keys,
        ]
        return sql, params

    def complete_batch(
        self, jobs: list[ClaimedJob], result_text: str | None, now: datetime
    ) -> set[int]:
        sql, params = self.statement(jobs, result_text, now)
        with self.connection.cursor() as cursor:
            cursor.execute(sql + " RETURNING id", params)
            return {row[0] for row in cursor.fetchall()}


def zone_suffix() -> str:
    """What a stored naive UTC datetime needs appended to read as ISO text with its zone."""
    return "+00:00" if settings.USE_TZ else ""
