"""What the queue needs from a database, with the behaviour most vendors share.

A vendor module (postgresql.py, mysql.py, sqlite.py) subclasses `QueueDatabase` and declares
its differences as class attributes and overrides, as Django's own database backends do:
which claimer, exit writer (the one door out of `running`), inserter and waiter it uses, how
it keeps planner statistics, tunes new connections, estimates a table's size, serialises
inserts of one idempotency key, and which system checks it needs. Nothing outside
`databases/` asks which vendor it talks to.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from datetime import timezone as dt_timezone
from functools import partial
from typing import Any, ClassVar

from django.conf import settings
from django.core import checks
from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from ..exits import Exit
from ..models import Job
from ..rows import ClaimedJob
from ..states import CLAIMABLE
from . import batches
from .claiming import Claimer
from .dependencies import release_dependents_after_commit
from .exits import ExitWriter
from .holdings import HOLDINGS
from .inserting import Inserter
from .polling import Waiter


class StatisticsKeeper:
    """Keeps the planner's picture of the job table honest; most vendors need nothing."""

    def refresh_if_stale(self) -> bool:
        """Refresh statistics a burst made misleading; True if it did something."""
        return False


class QueueDatabase:
    """The queue on one database alias. Subclasses declare one vendor's differences."""

    vendor: ClassVar[str] = ""
    claimer_class: ClassVar[type[Claimer]]
    exit_writer_class: ClassVar[type[ExitWriter]]
    inserter_class: ClassVar[type[Inserter]] = Inserter
    waiter_class: ClassVar[type[Waiter]] = Waiter

    def __init__(self, alias: str, connection: BaseDatabaseWrapper) -> None:
        self.alias = alias
        self.connection = connection
        self._inserter: Inserter | None = None
        self._exits: ExitWriter | None = None

    # The hot paths -------------------------------------------------------------------------

    def claimer(self) -> Claimer:
        claimer = self.claimer_class(self.alias)
        claimer.database = self
        return claimer

    def exits(self) -> ExitWriter:
        """The one door out of `running`, its statements built once per connection."""
        if self._exits is None:
            self._exits = self.exit_writer_class(self.alias)
        return self._exits

    def leave_running(
        self, jobs: Sequence[ClaimedJob], exit: Exit, *, in_transaction: bool = False
    ) -> set[int]:
        """Every exit from `running`: move `jobs` (one worker's) out as `exit` says, fenced
        by lease owner and attempt; the ids written (databases/exits.py). A job that finished
        and has jobs waiting for it releases them once the write commits (dependencies.py); a
        member of a batch notes the batch, looked at by `check_batches` (batches.py)."""
        written = self.exits().write(jobs, exit, in_transaction=in_transaction)
        # Written or fenced out, the jobs are no longer their owner's once this commits
        # (holdings.py); a rolled-back exit leaves them held, as they still are. Outside an
        # atomic block it has committed already (or the handler turned autocommit off, and
        # the worker rolls that back: the heartbeat then hands the jobs back).
        if self.connection.in_atomic_block:
            transaction.on_commit(partial(let_go, jobs), using=self.alias)
        else:
            let_go(jobs)
        if exit.shape.writes_finished_at:
            waited_for = [job.id for job in jobs if job.has_dependents and job.id in written]
            if waited_for:
                release_dependents_after_commit(self, waited_for)
            in_batches = {j.batch_id for j in jobs if j.batch_id is not None and j.id in written}
            if in_batches:
                batches.note(self.alias, in_batches)
        return written

    def check_batches(self) -> list[int]:
        """Finish the batches whose members this process finished since the last call, if
        nothing is left in them (their callbacks stored); the ids finished. A worker calls it
        once per claimed round: one probe per batch, not per member."""
        return batches.check_noted(self)

    def renew_leases(
        self, held: Sequence[tuple[int, str]], lease_seconds: float, now: datetime
    ) -> int:
        """Push forward the leases of (job id, lease owner) pairs still running so."""
        return self.exits().renew(held, lease_seconds, now)

    def inserter(self) -> Inserter:
        """The INSERT statements, built once per connection."""
        if self._inserter is None:
            self._inserter = self.inserter_class(self.alias)
        return self._inserter

    def waiter(self, max_interval: float, stop: threading.Event) -> Waiter:
        return self.waiter_class(self.alias, max_interval, stop)

    @contextlib.contextmanager
    def key_lock(self, key: str) -> Iterator[None]:
        """Held around the insert of a job with an idempotency key (see mysql.py)."""
        yield

    #: Look for the holder of a key before inserting a job with it (see mysql.py).
    reads_key_before_insert: ClassVar[bool] = False

    def key_holder(self, **lookup: object) -> Job | None:
        """The job that holds a key our insert just met (None: it no longer does). A locking
        read, which sees the row another transaction just committed even inside a transaction
        whose snapshot is older."""
        with transaction.atomic(using=self.alias):
            return Job.objects.using(self.alias).select_for_update().filter(**lookup).first()

    #: The statement that reads how many connections the server accepts (None: no limit to
    #: speak of, as SQLite's).
    max_connections_sql: ClassVar[str | None] = None

    def max_connections(self) -> int | None:
        """How many connections the server accepts in all, if it says."""
        if self.max_connections_sql is None:
            return None
        with self.connection.cursor() as cursor:
            cursor.execute(self.max_connections_sql)
            row = cursor.fetchone()
        return int(row[0]) if row else None

    #: The statement that reads the database server's clock, as a UTC time (None: the
    #: database has no clock of its own, as SQLite, a file on this host).
    clock_sql: ClassVar[str | None] = None

    def current_time(self) -> datetime:
        """The time on the database's clock: the one clock every supervisor of this queue
        shares, whatever their hosts' clocks say (the scheduler decides ticks on it)."""
        if self.clock_sql is None:
            return timezone.now()
        with self.connection.cursor() as cursor:
            cursor.execute(self.clock_sql)
            (value,) = cursor.fetchone()
        value = value.replace(tzinfo=dt_timezone.utc) if value.tzinfo is None else value
        return value if settings.USE_TZ else timezone.make_naive(value)

    def flow_key_upsert(self) -> str:
        """Insert a FlowKey row, or lock the existing one (parameters: key, starts, now)."""
        flow_table, key_column = self.flow_key_names()
        return (
            f"INSERT INTO {flow_table} ({key_column}, starts, updated_at) VALUES (%s, %s, %s) "
            f"ON CONFLICT ({key_column}) DO UPDATE SET updated_at = excluded.updated_at"
        )

    def flow_key_names(self) -> tuple[str, str]:
        """The FlowKey table's and key column's names, quoted."""
        quote = self.connection.ops.quote_name
        return quote("django_sqlqueue_flowkey"), quote("key")

    def wake(self, queue: str) -> None:
        """Wake idle workers of `queue` (a resumed queue); polling vendors need nothing."""
        return None

    def is_deadlock(self, exc: DatabaseError) -> bool:
        """True for a deadlock that cost only the failed statement (a retry may succeed)."""
        return False

    # Housekeeping and reporting -----------------------------------------------------------

    def statistics_keeper(self) -> StatisticsKeeper:
        return StatisticsKeeper()

    def adding_upsert(
        self, table: str, keys: Sequence[str], columns: Sequence[str], rows: int
    ) -> str:
        """INSERT `rows` rows of `keys + columns`; a row whose keys exist adds its `columns`
        to the stored ones instead (the rollup's counters). PostgreSQL and SQLite 3.24+."""
        quote = self.connection.ops.quote_name
        names = ", ".join(quote(name) for name in (*keys, *columns))
        values = ", ".join(["(" + ", ".join(["%s"] * (len(keys) + len(columns))) + ")"] * rows)
        sums = ", ".join(
            f"{quote(c)} = {quote(table)}.{quote(c)} + excluded.{quote(c)}" for c in columns
        )
        conflict = ", ".join(quote(key) for key in keys)
        return (
            f"INSERT INTO {quote(table)} ({names}) VALUES {values} "
            f"ON CONFLICT ({conflict}) DO UPDATE SET {sums}"
        )

    def claimable_condition(self) -> str:
        """A WHERE condition for the claimable rows that the claim indexes serve: their own
        partial-index condition, with literals (SQLite matches a partial index only to a WHERE
        that repeats its condition, which a bound parameter does not)."""
        return "status IN ({})".format(", ".join(f"'{s.value}'" for s in CLAIMABLE))

    def estimated_rows(self, table: str) -> int | None:
        """The database's own estimate of a table's row count, or None where it has none."""
        return None

    def estimate_from(self, sql: str, params: list[Any]) -> int | None:
        """Run a one-value statistics query; None when there is no usable estimate."""
        try:
            with self.connection.cursor() as cursor:
                cursor.execute(sql, params)
                row = cursor.fetchone()
        except DatabaseError:
            # Only SQLite gets here (no ANALYZE yet, so no sqlite_stat1); a failed read does
            # not end its transaction.
            return None
        if not row or row[0] is None:
            return None
        try:
            value = int(str(row[0]).split()[0])
        except ValueError:
            return None
        return value if value >= 0 else None

    # Start-up --------------------------------------------------------------------------------

    @classmethod
    def tune_connection(cls, connection: BaseDatabaseWrapper) -> None:
        """Called for every new connection of this vendor (SQLite sets WAL and a timeout)."""
        return None

    @classmethod
    def check(cls, alias: str, connection: BaseDatabaseWrapper) -> list[checks.CheckMessage]:
        """System check errors for the queue database (`migrate`, `check --database`)."""
        return []


def skip_locked_check(alias: str, connection: BaseDatabaseWrapper) -> list[checks.CheckMessage]:
    """Workers claim with SELECT … FOR UPDATE SKIP LOCKED (PostgreSQL 9.5+, MySQL 8.0.1+,
    MariaDB 10.6+)."""
    if connection.features.has_select_for_update_skip_locked:
        return []
    return [
        checks.Error(
            f"{connection.display_name} on database {alias!r} has no "
            "SELECT … FOR UPDATE SKIP LOCKED, which workers need to claim jobs "
            "without blocking each other.",
            hint="Use MySQL 8.0.1+, MariaDB 10.6+ or PostgreSQL 9.5+.",
            id="django_sqlqueue.E011",
        )
    ]


def let_go(jobs: Sequence[ClaimedJob]) -> None:
    """The jobs left `running` (their exit committed): out of their owners' holdings."""
    owners: dict[str, list[tuple[int, int]]] = {}
    for job in jobs:
        owners.setdefault(job.lease_owner, []).append((job.id, job.attempts))
    for owner, ids in owners.items():
        HOLDINGS.discard(owner, ids)
