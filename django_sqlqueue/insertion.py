"""Write job rows with one plain INSERT (or one per 500 rows), skipping the ORM's per-save work.

Enqueue sits on the request path of every view that uses the queue, so it avoids model
instantiation before the insert, pre-save hooks and per-field compilation: the statement is
built once per connection and only the values change.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections

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
        if self.connection.vendor == "postgresql":
            self.returning_sql += f", pg_notify('{CHANNEL}', queue)"

    def values(self, job: NewJob) -> list[Any]:
        adapt = self.connection.ops.adapt_datetimefield_value
        run_at, created = adapt(job.run_at), adapt(job.created_at)
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
            for start in range(0, len(jobs), ROWS_PER_STATEMENT):
                chunk = jobs[start : start + ROWS_PER_STATEMENT]
                sql = self.prefix + ", ".join([self.row_sql] * len(chunk)) + self.returning_sql
                cursor.execute(sql, [value for job in chunk for value in self.values(job)])
                ids.extend(row[0] for row in cursor.fetchall())
        return [self.to_model(job, pk) for job, pk in zip(jobs, ids, strict=True)]

    def _insert_with_orm(self, jobs: Sequence[NewJob]) -> list[Job]:
        """MySQL (unlike MariaDB) cannot return ids from a multi-row INSERT: save one by one."""
        saved = []
        for job in jobs:
            model = self.to_model(job, None)
            model._state.adding = True
            model.save(using=self.alias, force_insert=True)
            saved.append(model)
        return saved

    def to_model(self, job: NewJob, pk: int | None) -> Job:
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
        return Job.from_db(self.alias, _FIELD_NAMES, [values[name] for name in _FIELD_NAMES])


_inserters: dict[tuple[str, int], Inserter] = {}


def inserter_for(alias: str) -> Inserter:
    """One Inserter per alias and connection object (threads each have their own)."""
    connection = connections[alias]
    key = (alias, id(connection))
    inserter = _inserters.get(key)
    if inserter is None or inserter.connection is not connection:
        inserter = _inserters[key] = Inserter(alias)
    return inserter
