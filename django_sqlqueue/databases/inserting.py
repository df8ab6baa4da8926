"""Write job rows with one plain INSERT per chunk of rows, skipping the ORM's per-save work.

Enqueue sits on the request path of every view that uses the queue, so it avoids model
instantiation before the insert, pre-save hooks and per-field compilation: the statement is
built once per connection and only the values change. Vendors may send many rows their own way
(PostgreSQL: one JSON document, see postgresql.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from ..models import Job
from ..rows import NewJob
from ..states import Status
from .driver import run_statement

#: Columns an INSERT sets; the nullable rest start NULL, `claimable` is computed.
INSERT_COLUMNS = (
    "name",
    "queue",
    "args",
    "kwargs",
    "status",
    "priority",
    "attempts",
    "max_attempts",
    "run_at",
    "created_at",
    "updated_at",
    "last_error",
    "history",
    "idempotency_key",
    "lease_owner",
    "backend",
    "trace_context",
    "ref_nonce",
)
#: Columns most jobs leave NULL (flow control, flow/; batch membership): written only by the
#: statements of jobs that use them, so the INSERT of every other job is the statement it
#: always was.
EXTRA_COLUMNS = ("unique_key", "concurrency_key", "batch_id")
JSON_COLUMNS = frozenset({"args", "kwargs", "history", "trace_context"})
ROWS_PER_STATEMENT = 500
_FIELD_NAMES = [f.attname for f in Job._meta.concrete_fields]
#: The status a new job is stored with, read once (an enum member's `.value` is two calls).
PENDING = Status.PENDING.value


class Inserter:
    """INSERTs validated jobs and hands them back as saved model instances."""

    #: Placeholder of a JSON value (PostgreSQL casts text to jsonb).
    json_placeholder = "%s"
    #: Appended to `RETURNING id` (PostgreSQL wakes idle workers from the INSERT itself).
    returning_extra = ""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.connection = connections[alias]
        ops = self.connection.ops
        self.returning = self.connection.features.can_return_rows_from_bulk_insert
        self.row_sql = "({})".format(
            ", ".join(self.json_placeholder if c in JSON_COLUMNS else "%s" for c in INSERT_COLUMNS)
        )
        self.prefix = "INSERT INTO {} ({}) VALUES ".format(
            ops.quote_name(Job._meta.db_table), ", ".join(map(ops.quote_name, INSERT_COLUMNS))
        )
        self.returning_sql = " RETURNING id" + self.returning_extra
        #: One plain job's INSERT, in Django's and in the driver's placeholder style.
        self.one_sql = self.prefix + self.row_sql + self.returning_sql
        self.one_driver_sql = self.driver_sql(self.one_sql)
        self.extra_row_sql = self.row_sql[:-1] + ", %s" * len(EXTRA_COLUMNS) + ")"
        self.extra_prefix = "INSERT INTO {} ({}) VALUES ".format(
            ops.quote_name(Job._meta.db_table),
            ", ".join(map(ops.quote_name, INSERT_COLUMNS + EXTRA_COLUMNS)),
        )

    def driver_sql(self, sql: str) -> str:
        """`sql` in the driver's own placeholder style (Django's is `%s`)."""
        return sql

    def extra_values(self, job: NewJob) -> list[Any]:
        return [*self.values(job), job.unique_key, job.concurrency_key, job.batch_id]

    def values(self, job: NewJob) -> list[Any]:
        adapt = self.connection.ops.adapt_datetimefield_value
        created = adapt(job.created_at)
        # A job to run now carries the very datetime it was created at: adapt it once.
        run_at = created if job.run_at is job.created_at else adapt(job.run_at)
        return [
            job.name,
            job.queue,
            json.dumps(job.args) if job.args_json is None else job.args_json,
            json.dumps(job.kwargs) if job.kwargs_json is None else job.kwargs_json,
            PENDING,
            job.priority,
            0,
            job.max_attempts,
            run_at,
            created,
            created,
            "",
            "[]",
            job.idempotency_key,
            "",
            job.backend,
            None if job.trace_context is None else json.dumps(job.trace_context),
            job.ref_nonce,
        ]

    def insert(self, jobs: Sequence[NewJob], *, extra: bool | None = None) -> list[Job]:
        """INSERT the jobs and return them as saved model instances, in order. `extra`: some
        job has one of EXTRA_COLUMNS to write (None: look; a caller that knows says so, and
        a batch of a handler without flow options is not walked twice)."""
        if not self.returning:
            return self._insert_with_orm(jobs)
        if extra is None:
            extra = any(job.has_extra_columns for job in jobs)
        if len(jobs) == 1 and not extra:
            ids = [self.insert_one(jobs[0])]
        else:
            with self.connection.cursor() as cursor:
                ids = self.insert_returning_ids(cursor, jobs, extra)
        plain = not init_signals_listened()
        return [self.to_model(job, pk, plain) for job, pk in zip(jobs, ids, strict=True)]

    def insert_one(self, job: NewJob) -> int:
        """The id of one plain job, INSERTed on the driver's cursor (driver.py). Inside an
        atomic block that an error broke, refused as Django's cursor refuses any statement
        (TransactionManagementError), not sent to be rolled back unseen."""
        self.connection.validate_no_broken_transaction()
        rows = run_statement(
            self.connection, self.one_sql, self.one_driver_sql, self.values(job), rows=True
        )
        return int(rows[0][0])

    def insert_returning_ids(
        self, cursor: Any, jobs: Sequence[NewJob], extra: bool = False
    ) -> list[int]:
        """Multi-row VALUES statements, ROWS_PER_STATEMENT rows each; the new ids in order."""
        ids: list[int] = []
        prefix, row_sql = (
            (self.extra_prefix, self.extra_row_sql) if extra else (self.prefix, self.row_sql)
        )
        values = self.extra_values if extra else self.values
        for start in range(0, len(jobs), ROWS_PER_STATEMENT):
            chunk = jobs[start : start + ROWS_PER_STATEMENT]
            sql = prefix + ", ".join([row_sql] * len(chunk)) + self.returning_sql
            cursor.execute(sql, [value for job in chunk for value in values(job)])
            ids.extend(row[0] for row in cursor.fetchall())
        return ids

    def _insert_with_orm(self, jobs: Sequence[NewJob]) -> list[Job]:
        """MySQL (unlike MariaDB) cannot return ids from a multi-row INSERT: save one by one."""
        saved = []
        plain = not init_signals_listened()
        for job in jobs:
            model = self.to_model(job, None, plain)
            model._state.adding = True
            model.save(using=self.alias, force_insert=True)
            saved.append(model)
        return saved

    def to_model(self, job: NewJob, pk: int | None, plain: bool) -> Job:
        """The saved Job for `job`; `plain` skips from_db's per-field work when nobody listens
        to the init signals it would send (checked once per insert, not per row)."""
        values = {
            "id": pk,
            "name": job.name,
            "queue": job.queue,
            "args": job.args,
            "kwargs": job.kwargs,
            "status": PENDING,
            "priority": job.priority,
            "attempts": 0,
            "max_attempts": job.max_attempts,
            "run_at": job.run_at,
            "created_at": job.created_at,
            "started_at": None,
            "finished_at": None,
            "updated_at": job.created_at,
            "result": None,
            "last_error": "",
            "history": [],
            "idempotency_key": job.idempotency_key,
            "lease_owner": "",
            "lease_expires_at": None,
            "backend": job.backend,
            "progress": None,
            "progress_message": "",
            "cancel_requested_at": None,
            "trace_context": job.trace_context,
            "claimable": 1,
            "unique_key": job.unique_key,
            "unique_active": job.unique_key,
            "concurrency_key": job.concurrency_key,
            "has_dependents": False,
            "batch_id": job.batch_id,
            "ref_nonce": job.ref_nonce,
        }
        if not plain:
            return Job.from_db(self.alias, _FIELD_NAMES, [values[name] for name in _FIELD_NAMES])
        # What from_db does, without its per-field setattr (a third of a 100,000-job bulk
        # enqueue on PostgreSQL).
        model = Job.__new__(Job)
        model.__dict__.update(values)
        model._state = ModelState()
        model._state.adding = False
        model._state.db = self.alias
        return model


def init_signals_listened() -> bool:
    # Most projects connect no init receiver at all: look no further than that.
    if not pre_init.receivers and not post_init.receivers:
        return False
    return pre_init.has_listeners(Job) or post_init.has_listeners(Job)
