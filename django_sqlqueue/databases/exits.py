"""The one door out of `running`: every exit (exits.py) written as one fenced UPDATE.

Complete, fail, retry, dead, release, unclaim, park and stop all go through `ExitWriter.write`,
for one job (the per-job acknowledgement) or a batch of one worker's jobs that leave the same
way (one statement for all). Every statement names the job's id, `status = 'running'`, the
lease owner and the claim's attempt: a worker that lost its lease (a zombie) changes nothing.
The history entry is built by the database from `attempts.ENTRY_FIELDS`, the row's own columns
for the attempt's number, worker and start, and the exit's values for how it ended; vendors
supply their JSON functions. The lease renewal of running jobs is here too: the other write a
holder of a lease makes.

Statements run on the driver's own cursor unless something watches the connection's queries
(driver.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections

from ..attempts import ENTRY_FIELDS, clean_text
from ..exits import Exit, ExitShape
from ..models import Job
from ..rows import ClaimedJob
from ..states import COMPLETE, RELEASE, UNCLAIM, Status
from .driver import run_statement

#: Most jobs in one statement (a bounded number of parameters on every database).
MAX_BATCH = 200

#: A statement's form: the exit's shape, batch size (1: by primary key), inside the job's
#: own transaction or not.
StatementKey = tuple[ExitShape, int, bool]


class ExitWriter:
    """Writes exits from `running` on one database alias. Vendors declare their JSON
    functions and what their UPDATE can return."""

    #: SQL of `history` with the entry `{entry}` appended.
    append_entry = ""
    #: The JSON object constructor, called with `key, value, …` pairs.
    json_object = "json_object"
    #: Placeholder of a text value inside the JSON object (PostgreSQL says it is text).
    text_placeholder = "%s"
    #: Placeholder of a JSON value (PostgreSQL casts text to jsonb).
    json_placeholder = "%s"
    #: Written before a list of row values (SQLite needs `VALUES (…), (…)`).
    row_values_prefix = ""
    #: Written between the SET list and WHERE of a completion outside a job's own transaction
    #: (PostgreSQL: commit without waiting for the disk, where the settings allow it).
    completion_tail = ""
    #: Whether UPDATE … RETURNING tells which rows were written (MySQL: row counts instead).
    returning = True
    #: Added to RETURNING of exits that make jobs due now (PostgreSQL wakes idle workers).
    returning_woken = ""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.connection = connections[alias]
        self.table = self.connection.ops.quote_name(Job._meta.db_table)
        self.entry_sql = self.history_entry()
        self.statements: dict[StatementKey, str] = {}
        #: Statements in the driver's placeholder style, by their Django form.
        self.driver_forms: dict[str, str] = {}

    # SQL ---------------------------------------------------------------------------------

    def history_entry(self) -> str:
        """The JSON object of one history entry, from ENTRY_FIELDS: columns are read from
        the row, the other values are parameters (in ENTRY_FIELDS order)."""
        pairs = []
        for field in ENTRY_FIELDS:
            if field.column is None:
                value = self.text_placeholder
            elif field.timestamp:
                value = "{" + field.key + "}"  # the row's start, or NULL for a hand-back
            else:
                value = field.column
            pairs.append(f"'{field.key}', {value}")
        return f"{self.json_object}({', '.join(pairs)})"

    def assignments(self, shape: ExitShape, in_transaction: bool) -> str:
        """The SET list of `shape`. The history entry comes first: MySQL applies assignments
        in order, and the entry reads the lease owner and attempt before they change."""
        sets = []
        if shape.entry:
            started = {
                field.key: self.timestamp_text(field.column) if shape.started else "NULL"
                for field in ENTRY_FIELDS
                if field.timestamp and field.column
            }
            entry = self.entry_sql.format(**started)
            sets.append("history = " + self.append_entry.format(entry=entry))
        sets.append(f"status = '{shape.status.value}'")
        if shape.unspent:
            sets.append("attempts = attempts - 1")
        sets += ["lease_owner = %s", "lease_expires_at = NULL", "updated_at = %s"]
        if shape.writes_result:
            sets.append(f"result = {self.json_placeholder}")
        if shape.writes_finished_at:
            sets.append("finished_at = %s")
        if shape.writes_run_at:
            sets.append("run_at = %s")
        if shape.writes_last_error:
            sets.append("last_error = %s")
        tail = self.completion_tail if shape.transition is COMPLETE and not in_transaction else ""
        return ", ".join(sets) + tail

    def statement(self, shape: ExitShape, size: int, in_transaction: bool) -> str:
        """The fenced UPDATE of `size` jobs leaving as `shape` (cached per form)."""
        key = (shape, size, in_transaction)
        sql = self.statements.get(key)
        if sql is None:
            sql = self.statements[key] = self.build_statement(shape, size, in_transaction)
        return sql

    def build_statement(self, shape: ExitShape, size: int, in_transaction: bool) -> str:
        running = f"status = '{Status.RUNNING.value}'"
        if size == 1:
            fence = f"id = %s AND {running} AND lease_owner = %s AND attempts = %s"
        else:
            ids = ", ".join(["%s"] * size)
            pairs = ", ".join(["(%s, %s)"] * size)
            # `id IN` steers every planner to the primary key; the row-value test is the fence.
            fence = (
                f"id IN ({ids}) AND {running} AND lease_owner = %s "
                f"AND (id, attempts) IN ({self.row_values_prefix}{pairs})"
            )
        sql = f"UPDATE {self.table} SET {self.assignments(shape, in_transaction)} WHERE {fence}"
        if not self.returning:
            return sql
        due_now = shape.transition in (RELEASE, UNCLAIM)
        return sql + " RETURNING id" + (self.returning_woken if due_now else "")

    def timestamp_text(self, column: str) -> str:
        """SQL of a timestamp column as ISO 8601 text with its zone (PostgreSQL's JSON
        functions write timestamps so)."""
        return column

    def driver_sql(self, sql: str) -> str:
        """`sql` in the driver's own placeholder style (Django's is `%s`)."""
        return sql

    # Parameters ----------------------------------------------------------------------------

    def parameters(self, exit: Exit, jobs: Sequence[ClaimedJob]) -> list[Any]:
        shape = exit.shape
        adapt = self.connection.ops.adapt_datetimefield_value
        at = adapt(exit.at)
        params: list[Any] = []
        if shape.entry:
            params += [
                exit.at.isoformat(),
                str(exit.outcome),
                clean_text(exit.error) if exit.error else "",
                clean_text(exit.traceback) if exit.traceback else "",
                exit.exception,
            ]
        params += [shape.owner_after, at]
        if shape.writes_result:
            params.append(exit.result)
        if shape.writes_finished_at:
            params.append(at)
        if shape.writes_run_at:
            params.append(adapt(exit.run_at))
        if shape.writes_last_error:
            params.append(clean_text(exit.error))
        if len(jobs) == 1:
            job = jobs[0]
            params += [job.id, job.lease_owner, job.attempts]
        else:
            params += [job.id for job in jobs]
            params.append(jobs[0].lease_owner)
            params += [value for job in jobs for value in (job.id, job.attempts)]
        return params

    # Writing -------------------------------------------------------------------------------

    def write(
        self, jobs: Sequence[ClaimedJob], exit: Exit, *, in_transaction: bool = False
    ) -> set[int]:
        """Move `jobs` (all held by one worker) out of `running` as `exit` says; the ids of
        those written. A job whose lease was lost is left alone and is not in the result.

        `in_transaction`: inside the job's own transaction (`atomic=True`), which the caller
        commits: no vendor trick that changes how it commits."""
        if not jobs:
            return set()
        owners = {job.lease_owner for job in jobs}
        if len(owners) != 1:
            raise ValueError(f"One exit writes the jobs of one lease owner, not {sorted(owners)}.")
        written: set[int] = set()
        for start in range(0, len(jobs), MAX_BATCH):
            chunk = jobs[start : start + MAX_BATCH]
            written |= self.write_chunk(chunk, exit, in_transaction)
        return written

    def write_chunk(self, jobs: Sequence[ClaimedJob], exit: Exit, in_transaction: bool) -> set[int]:
        sql = self.statement(exit.shape, len(jobs), in_transaction)
        rows = self.execute(sql, self.parameters(exit, jobs))
        if self.returning:
            return {row[0] for row in rows}
        return {jobs[0].id} if rows else set()

    def execute(self, sql: str, params: Sequence[Any]) -> Any:
        """Run one statement: its rows (RETURNING) or its row count."""
        driver_form = self.driver_forms.get(sql)
        if driver_form is None:
            driver_form = self.driver_forms[sql] = self.driver_sql(sql)
        return run_statement(self.connection, sql, driver_form, params, rows=self.returning)

    # Leases --------------------------------------------------------------------------------

    def renew(self, held: Sequence[tuple[int, str]], lease_seconds: float, now: datetime) -> int:
        """Push forward the leases of `held` (job id, lease owner) pairs still running under
        that owner, in one statement; how many rows it moved."""
        if not held:
            return 0
        adapt = self.connection.ops.adapt_datetimefield_value
        written = 0
        for start in range(0, len(held), MAX_BATCH):
            chunk = held[start : start + MAX_BATCH]
            ids = ", ".join(["%s"] * len(chunk))
            pairs = ", ".join(["(%s, %s)"] * len(chunk))
            sql = (
                f"UPDATE {self.table} SET lease_expires_at = %s, updated_at = %s "
                f"WHERE id IN ({ids}) AND status = '{Status.RUNNING.value}' "
                f"AND (id, lease_owner) IN ({self.row_values_prefix}{pairs})"
            )
            params = [
                adapt(now + timedelta(seconds=lease_seconds)),
                adapt(now),
                *(job_id for job_id, _ in chunk),
                *(value for pair in chunk for value in pair),
            ]
            with self.connection.cursor() as cursor:
                cursor.execute(sql, params)
                written += cursor.rowcount
        return written


def result_text(result: Any) -> str | None:
    """A handler's result as the JSON text the door stores (None stays NULL)."""
    return None if result is None else json.dumps(result)


def zone_suffix() -> str:
    """What a stored naive UTC datetime needs appended to read as ISO text with its zone."""
    return "+00:00" if settings.USE_TZ else ""
