"""Write job rows with one plain INSERT per chunk of rows, skipping the ORM's per-save work.

Enqueue sits on the request path of every view that uses the queue, so it avoids model
instantiation before the insert, pre-save hooks and per-field compilation: the statement is
built once per connection and only the values change. On PostgreSQL the rows travel as one
JSON array of rows (`INSERT … SELECT … FROM jsonb_to_recordset(%s)`): one parameter whatever
the number of rows, encoded by the json module's C code, where a multi-row VALUES list has a
placeholder per value for the driver to parse in Python (60 % of a bulk enqueue's time,
measured; one array per column through unnest() moved that cost to psycopg's array dumper).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from .models import Job
from .notify import CHANNEL
from .states import Status

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
)
JSON_COLUMNS = frozenset({"args", "kwargs", "history"})
ROWS_PER_STATEMENT = 500
#: PostgreSQL's JSON statement has one parameter whatever its size: larger chunks pay.
ROWS_PER_JSON_STATEMENT = 5000
#: PostgreSQL: the columns that differ between jobs, and their types in the JSON rows.
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
}
_FIELD_NAMES = [f.attname for f in Job._meta.concrete_fields]


@dataclass(slots=True)
class NewJob:
    """A validated job not yet stored."""

    name: str
    queue: str
    args: list[Any]
    kwargs: dict[str, Any]
    priority: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    idempotency_key: str | None = None
    backend: str = ""

    @classmethod
    def from_model(cls, job: Job) -> NewJob:
        return cls(
            name=job.name,
            queue=job.queue,
            args=job.args,
            kwargs=job.kwargs,
            priority=job.priority,
            max_attempts=job.max_attempts,
            run_at=job.run_at,
            created_at=job.created_at,
            idempotency_key=job.idempotency_key,
            backend=job.backend,
        )


class Inserter:
    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.connection = connections[alias]
        ops = self.connection.ops
        self.returning = self.connection.features.can_return_rows_from_bulk_insert
        cast = "::jsonb" if self.connection.vendor == "postgresql" else ""
        self.row_sql = "({})".format(
            ", ".join(f"%s{cast}" if c in JSON_COLUMNS else "%s" for c in INSERT_COLUMNS)
        )
        self.prefix = "INSERT INTO {} ({}) VALUES ".format(
            ops.quote_name(Job._meta.db_table), ", ".join(map(ops.quote_name, INSERT_COLUMNS))
        )
        # PostgreSQL: wake idle workers in the same statement. NOTIFY is delivered only when
        # the transaction commits, never on rollback, and identical notifications of one
        # transaction are folded into one: one wake-up per queue per enqueueing transaction,
        # with no extra round trip.
        self.returning_sql = " RETURNING id"
        self.json_rows_sql = ""
        if self.connection.vendor == "postgresql":
            self.returning_sql += f", pg_notify('{CHANNEL}', queue)"
            self.json_rows_sql = self._json_rows_statement(ops.quote_name)

    def _json_rows_statement(self, quote: Any) -> str:
        """INSERT … SELECT … FROM jsonb_to_recordset(one JSON array of rows), for PostgreSQL.

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
        }

    def values(self, job: NewJob) -> list[Any]:
        adapt = self.connection.ops.adapt_datetimefield_value
        created = adapt(job.created_at)
        # A job to run now carries the very datetime it was created at: adapt it once.
        run_at = created if job.run_at is job.created_at else adapt(job.run_at)
        return [
            job.name,
            job.queue,
            json.dumps(job.args),
            json.dumps(job.kwargs),
            Status.PENDING.value,
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
        ]

    def insert(self, jobs: Sequence[NewJob]) -> list[Job]:
        """INSERT the jobs and return them as saved model instances, in order."""
        if not self.returning:
            return self._insert_with_orm(jobs)
        ids: list[int] = []
        with self.connection.cursor() as cursor:
            if self.json_rows_sql and len(jobs) > 1:
                for start in range(0, len(jobs), ROWS_PER_JSON_STATEMENT):
                    chunk = jobs[start : start + ROWS_PER_JSON_STATEMENT]
                    rows = json.dumps([self.json_row(job) for job in chunk])
                    cursor.execute(self.json_rows_sql, [rows])
                    ids.extend(row[0] for row in cursor.fetchall())
            else:
                for start in range(0, len(jobs), ROWS_PER_STATEMENT):
                    chunk = jobs[start : start + ROWS_PER_STATEMENT]
                    sql = self.prefix + ", ".join([self.row_sql] * len(chunk)) + self.returning_sql
                    cursor.execute(sql, [value for job in chunk for value in self.values(job)])
                    ids.extend(row[0] for row in cursor.fetchall())
        plain = not init_signals_listened()
        return [self.to_model(job, pk, plain) for job, pk in zip(jobs, ids, strict=True)]

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
            "status": Status.PENDING.value,
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
            "claimable": 1,
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
    return pre_init.has_listeners(Job) or post_init.has_listeners(Job)


_inserters: dict[tuple[str, int], Inserter] = {}


def inserter_for(alias: str) -> Inserter:
    """One Inserter per alias and connection object (threads each have their own)."""
    connection = connections[alias]
    key = (alias, id(connection))
    inserter = _inserters.get(key)
    if inserter is None or inserter.connection is not connection:
        inserter = _inserters[key] = Inserter(alias)
    return inserter
