"""MySQL 8 and MariaDB 10.6+: every way the queue's SQL differs on them.

- Claim: a locking read (FOR UPDATE SKIP LOCKED) and an UPDATE by primary key.
- Exits from running: no UPDATE … RETURNING; row counts, and a read-back when a batch was
  written in part.
- Idempotency keys: a named lock serialises the inserts of one key.
- Waiting: adaptive polling (no notification mechanism).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from django.core import checks
from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..exits import Exit
from ..models import Job
from ..rows import ClaimedJob
from .base import QueueDatabase, skip_locked_check
from .claiming import Claimer
from .exits import ExitWriter, zone_suffix

#: Seconds to wait for another enqueue of the same key before going on without the lock.
KEY_LOCK_TIMEOUT = 2
#: MySQL's error number for a deadlock victim.
ER_LOCK_DEADLOCK = 1213


class MySQLClaimer(Claimer):
    """MySQL has no UPDATE … RETURNING and no LIMIT inside IN (subquery), so the claim is a
    locking read and an update by primary key. The read walks the index led by the generated
    `claimable` column in claim order, so InnoDB locks only the rows it hands out instead of
    every claimable row a sort would have to read first.
    """

    def claim_ready(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        lease_seconds: float,
        now: datetime,
        excluded: Sequence[str] = (),
    ) -> list[ClaimedJob]:
        queue_sql, queue_params = self.queue_filter(queues, excluded)
        select = (
            f"SELECT {self.columns} FROM {self.table} WHERE claimable = 1{queue_sql} "
            f"AND run_at <= %s ORDER BY priority DESC, run_at, id LIMIT %s "
            f"FOR UPDATE SKIP LOCKED"
        )
        assignments, assign_params = self.running_assignments(worker_id, lease_seconds, now)
        with transaction.atomic(using=self.alias), self.connection.cursor() as cursor:
            cursor.execute(select, [*queue_params, self.adapt(now), limit])
            rows = cursor.fetchall()
            if not rows:
                return []
            ids = [row[0] for row in rows]
            placeholders = ", ".join(["%s"] * len(ids))
            cursor.execute(
                f"UPDATE {self.table} SET {assignments} WHERE id IN ({placeholders})",
                [*assign_params, *ids],
            )
        jobs = [ClaimedJob.from_row(row, worker_id, now) for row in rows]
        for job in jobs:
            job.attempts += 1
        return self.ordered(jobs)


class MySQLExitWriter(ExitWriter):
    """No UPDATE … RETURNING: the row count says whether one job was written, and whether a
    batch was written whole (the common case: one statement, as on the other databases).
    Only when some of a batch's rows were fenced out are the rows read back to tell which
    are this writer's (`written_by`)."""

    returning = False
    append_entry = "JSON_ARRAY_APPEND(history, '$', {entry})"
    json_object = "JSON_OBJECT"

    def timestamp_text(self, column: str) -> str:
        return f"CONCAT(REPLACE(CAST({column} AS CHAR), ' ', 'T'), '{zone_suffix()}')"

    def write_chunk(self, jobs: Sequence[ClaimedJob], exit: Exit, in_transaction: bool) -> set[int]:
        sql = self.statement(exit.shape, len(jobs), in_transaction)
        written = self.execute(sql, self.parameters(exit, jobs))
        if written == len(jobs):
            return {job.id for job in jobs}
        if not written:
            return set()
        rows = Job.objects.using(self.alias).filter(id__in=[job.id for job in jobs])
        found = {row[0]: row for row in rows.values_list("id", "status", "lease_owner", "history")}
        return {job.id for job in jobs if job.id in found and written_by(found[job.id], job, exit)}


def written_by(row: tuple[Any, ...], job: ClaimedJob, exit: Exit) -> bool:
    """Whether `row` (id, status, lease owner, history, read after the write) is what `exit`
    made of `job`'s claim. With a history entry, the entry names the claim's worker and
    attempt, which no other writer can; without one (unclaim, park), the row is back to its
    claim's history, which any other way out of `running` (recovery, a release) would have
    added to."""
    _, status, owner, history = row
    shape = exit.shape
    if status != shape.status.value or owner != shape.owner_after:
        return False
    history = json.loads(history) if isinstance(history, str) else history or []
    if not shape.entry:
        return len(history) == len(job.history)
    last = history[-1] if history else {}
    return last.get("worker") == job.lease_owner and last.get("attempt") == job.attempts


class MySQLDatabase(QueueDatabase):
    vendor = "mysql"
    claimer_class = MySQLClaimer
    exit_writer_class = MySQLExitWriter
    clock_sql = "SELECT UTC_TIMESTAMP(6)"
    max_connections_sql = "SELECT @@max_connections"

    @contextlib.contextmanager
    def key_lock(self, key: str) -> Iterator[None]:
        """Let one session at a time try to insert a given idempotency key.

        InnoDB checks a duplicate key with a shared lock that it must then upgrade; when several
        sessions wait on a key held by a transaction that rolls back, they all hold the shared
        lock and deadlock on the upgrade. A named lock around the insert makes them queue one by
        one instead.
        """
        name = "sqlqueue:" + hashlib.sha1(key.encode()).hexdigest()
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(%s, %s)", [name, KEY_LOCK_TIMEOUT])
            locked = cursor.fetchone()[0] == 1
        if not locked:
            # The holder may be waiting on a row this very transaction inserted (it enqueued
            # the key before): a cycle InnoDB cannot see. Go on without the named lock; the
            # insert then meets our own row at once, or waits on the row lock as it would.
            yield
            return
        try:
            yield
        finally:
            # A named lock belongs to the session, not to the transaction: release it even
            # when the insert broke the caller's transaction (a deadlock victim), through the
            # driver's own cursor, which Django would refuse until the atomic block ends.
            # Otherwise the error raised here would hide the one the caller must see.
            with self.connection.connection.cursor() as cursor:
                cursor.execute("SELECT RELEASE_LOCK(%s)", [name])

    #: An insert that meets a key's holder takes shared next-key locks on the key's index
    #: entries until the transaction ends (a savepoint's rollback keeps them), and a worker
    #: finishing that holder must insert into those gaps: inside a caller's transaction that
    #: was a deadlock (2 in 1,200 enqueues racing completions). A plain read finds a holder
    #: without a lock; only when none is seen does the insert run.
    reads_key_before_insert = True

    def key_holder(self, **lookup: object) -> Job | None:
        """A locking read of the holder would lock the key's unique index entry, then the row;
        a worker finishing that job locks the row, then the entry, to clear the key: InnoDB
        breaks that deadlock by rolling back one side, maybe the caller's whole transaction.
        Outside a transaction a plain read takes no lock and, as a new snapshot, sees the
        holder (committed before our insert could meet it). Inside one, its snapshot may be
        older than the holder: a plain read first (it sees our own rows), then the locking
        read."""
        found = Job.objects.using(self.alias).filter(**lookup).first()
        if found is not None or not self.connection.in_atomic_block:
            return found
        return super().key_holder(**lookup)

    def flow_key_upsert(self) -> str:
        # ON DUPLICATE KEY UPDATE takes the row's exclusive lock at once (INSERT IGNORE would
        # take a shared one that two sessions could not both upgrade).
        flow_table, key_column = self.flow_key_names()
        return (
            f"INSERT INTO {flow_table} ({key_column}, starts, updated_at) VALUES (%s, %s, %s) "
            "ON DUPLICATE KEY UPDATE updated_at = VALUES(updated_at)"
        )

    def is_deadlock(self, exc: DatabaseError) -> bool:
        return bool(exc.args) and exc.args[0] == ER_LOCK_DEADLOCK

    def claimable_condition(self) -> str:
        # No partial indexes: the claim indexes lead with the generated `claimable` column.
        return "claimable = 1"

    def adding_upsert(
        self, table: str, keys: Sequence[str], columns: Sequence[str], rows: int
    ) -> str:
        """MySQL and MariaDB have no ON CONFLICT: ON DUPLICATE KEY UPDATE, with VALUES()
        (MariaDB has no row alias)."""
        quote = self.connection.ops.quote_name
        names = ", ".join(quote(name) for name in (*keys, *columns))
        values = ", ".join(["(" + ", ".join(["%s"] * (len(keys) + len(columns))) + ")"] * rows)
        sums = ", ".join(f"{quote(c)} = {quote(c)} + VALUES({quote(c)})" for c in columns)
        return (
            f"INSERT INTO {quote(table)} ({names}) VALUES {values} ON DUPLICATE KEY UPDATE {sums}"
        )

    def estimated_rows(self, table: str) -> int | None:
        return self.estimate_from(
            "SELECT table_rows FROM information_schema.tables "
            "WHERE table_schema = DATABASE() AND table_name = %s",
            [table],
        )

    @classmethod
    def check(cls, alias: str, connection: BaseDatabaseWrapper) -> list[checks.CheckMessage]:
        return skip_locked_check(alias, connection)
