"""Claiming: move up to `limit` ready jobs to `running` under one lease, atomically.

`Claimer` holds the SQL every vendor shares; `UpdateReturningClaimer` is the one-statement
claim of the databases that have UPDATE … RETURNING. Vendor modules add their differences.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from ..exits import Exit, shape_of
from ..models import Job
from ..rows import CLAIM_COLUMNS, ClaimedJob
from ..states import CLAIMABLE, PARK, PARKED_OWNER, UNCLAIM, Status
from .flow_keys import hold_key
from .gate import Admitted, FlowGate, rate_names
from .holdings import HOLDINGS
from .paused import PausedQueues

#: Seconds a job checked against its rate reservation may take to reach its handler.
START_SLACK = 0.01
#: How many times a wake that deadlocked with a claim is tried (MySQL/MariaDB).
WAKE_TRIES = 3

UNCLAIMED = shape_of(UNCLAIM, Status.PENDING)
T = TypeVar("T")
PARKED = shape_of(PARK, Status.PENDING)


class Claimer:
    """Claims jobs atomically: no two workers ever get the same job."""

    #: Job names to claim; empty for all (see names_filter).
    names: Sequence[str] = ()
    #: How many jobs this claimer's worker runs at once: a claim keeps no more
    #: concurrency-limited jobs than that (databases/gate.py).
    slot_count: int = 1
    #: Appended to WAKE's UPDATE (PostgreSQL: a notification, so idle workers claim at once).
    wake_returning = ""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.connection = connections[alias]
        quote = self.connection.ops.quote_name
        self.table = quote(Job._meta.db_table)
        self.columns = ", ".join(quote(column) for column in CLAIM_COLUMNS)
        self.claimable_sql = "status IN ({})".format(", ".join(f"'{s.value}'" for s in CLAIMABLE))
        self.paused = PausedQueues(alias)
        self.gate = FlowGate(alias)
        #: Job id → when its rate limits recorded its start (epoch seconds), for the jobs
        #: this claimer's claims kept and the worker has not started yet.
        self.reserved: dict[int, float] = {}
        #: Job id → the concurrency key whose slot it holds, for the jobs this claimer's
        #: claims kept whose slots were not freed yet (`free_slot`).
        self.slots: dict[int, str] = {}
        #: The QueueDatabase that made this claimer (the gate locks keys through it).
        self.database: Any = None

    def claim(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        lease_seconds: float,
        now: datetime,
        excluded: Sequence[str] = (),
    ) -> list[ClaimedJob]:
        """Claim up to `limit` ready jobs for `worker_id`, with `now` as their `started_at`
        (which each ClaimedJob carries), `lease_seconds` from now. With no `queues`, from every
        queue but the `excluded` ones (those other workers of the supervisor serve). Paused
        queues are left out: named queues are dropped from the list, and a claim across all
        queues excludes them; with none paused the vendor's claim runs exactly as it would
        without pausing."""
        scope = self.scope(queues, excluded)
        if scope is None:
            return []
        queues, excluded = scope
        if self.slots:
            # Jobs of the last batch that never started, or whose slots were not freed when
            # they ended: their slots are free now (the woken jobs due by this claim's `now`).
            self.free_slots(now)
        # The last batch is over: a reservation it did not use stays in its window (it holds
        # its share until the period ends) but is no longer this claimer's to replace.
        self.reserved.clear()
        with HOLDINGS.claiming(worker_id, now) as claim:
            now = claim.started_at
            jobs = self.claim_ready(worker_id, queues, limit, lease_seconds, now, excluded)
            claim.took(jobs)
        if not jobs or self.gate.rules() is None:
            return jobs
        # Some handler or queue has a concurrency or rate limit (databases/gate.py).
        admitted = self.admit(worker_id, jobs, now)
        self.slots.update(admitted.slots)
        self.reserved.update(admitted.reserved)
        return admitted.jobs

    def admit(self, worker_id: str, jobs: list[ClaimedJob], now: datetime) -> Admitted:
        """The gate's decision on claimed `jobs` (`FlowGate.admit`), which runs in one
        transaction of its own: one that deadlocked (MySQL/MariaDB) is tried again. If it
        still fails, the claimed jobs go back unspent before the error is raised: they are
        `running` under this worker's name, and a worker that never starts them would leave
        them to their lease (a --burst run could end first)."""
        for attempt in range(1, WAKE_TRIES + 1):
            try:
                return self.gate.admit(self.database, worker_id, jobs, now, self.slot_count)
            except DatabaseError as exc:
                deadlock = self.database is not None and self.database.is_deadlock(exc)
                if deadlock and attempt < WAKE_TRIES:
                    continue
                # If this fails too, the jobs' leases bring them back (lease recovery).
                with contextlib.suppress(DatabaseError):
                    self.unclaim(worker_id, jobs)
                raise
        raise AssertionError("unreachable")

    def scope(
        self, queues: Sequence[str] | None, excluded: Sequence[str] = ()
    ) -> tuple[Sequence[str] | None, tuple[str, ...]] | None:
        """The queues a claim for `queues` (None: all but `excluded`) takes from now: named
        ones less the paused ones (None if none is left), or all but the excluded and the
        paused ones."""
        excluded = tuple(excluded)
        paused = self.paused.current()
        if paused:
            if queues:
                queues = [queue for queue in queues if queue not in paused]
                if not queues:
                    return None
            else:
                excluded = tuple(sorted(paused | set(excluded)))
        return queues, excluded

    def claimable_condition(self) -> str:
        """The condition the vendor's claim index is led by (MySQL: `claimable = 1`)."""
        return (
            self.database.claimable_condition() if self.database is not None else self.claimable_sql
        )

    def index_hint(self, queues: Sequence[str] | None) -> str:
        """Text after a claim read's table name (SQLite: INDEXED BY)."""
        return ""

    def run_claim(self, sql: str, params: list[Any]) -> list[Any]:
        """Run a statement that reads in claim order (PostgreSQL: under planner settings
        that forbid sorting the backlog)."""
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())

    def next_due(self, limit: int) -> list[tuple[str, str]]:
        """(name, backend) of the next `limit` jobs a claim across every queue would take,
        in claim order, due now or later: the claim index read in its own order, so the cost
        does not grow with the backlog (the system check W031)."""
        sql = (
            f"SELECT name, backend FROM {self.table}{self.index_hint(None)} "
            f"WHERE {self.claimable_condition()} "
            "ORDER BY priority DESC, run_at, id LIMIT %s"
        )
        return [(row[0], row[1]) for row in self.run_claim(sql, [limit])]

    def others_due_sql(
        self, queues: Sequence[str] | None, excluded: Sequence[str], now: datetime
    ) -> tuple[str, list[Any]]:
        """An expression: whether a claim for these queues would find a due job now (an
        EXISTS over the claim's index)."""
        scope = self.scope(queues, excluded)
        if scope is None:
            return "0", []
        queue_sql, queue_params = self.queue_filter(*scope)
        return (
            f"EXISTS (SELECT 1 FROM {self.table} WHERE {self.claimable_condition()}{queue_sql} "
            "AND run_at <= %s)",
            [*queue_params, self.adapt(now)],
        )

    def admit_start(self, worker_id: str, job: ClaimedJob) -> bool:
        """Whether a claimed job may start now. A rate-limited job whose claim recorded its
        start at a time still to come starts at no cost; one that starts later than that is
        counted again under its rate's lock (databases/gate.py), and parked if it no longer
        fits, due when its rate lets one through."""
        reserved = self.reserved.pop(job.id, None)
        if reserved is not None and time.time() + START_SLACK <= reserved:
            return True
        due = self.gate.admit_start(self.database, job, reserved)
        if due is None:
            return True
        self.park(worker_id, [job], due)
        return False

    def holds_back(self, queues: Sequence[str] | None = None, excluded: Sequence[str] = ()) -> bool:
        """True while jobs a flow limit held back wait to be due: work is left, only waiting.
        One indexed read, made only by a `--burst` worker that found nothing to claim (a
        job parked for a slot may be woken, claimed and done long before its due time)."""
        queue_sql, queue_params = self.queue_filter(queues, excluded)
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {self.table} WHERE {self.claimable_sql}{queue_sql} "
                "AND lease_owner = %s LIMIT 1",
                [*queue_params, PARKED_OWNER],
            )
            return cursor.fetchone() is not None

    def claim_ready(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        lease_seconds: float,
        now: datetime,
        excluded: Sequence[str] = (),
    ) -> list[ClaimedJob]:
        """The vendor's claim: up to `limit` due jobs of `queues` (None: every queue but the
        `excluded` ones)."""
        raise NotImplementedError

    # Shared pieces of SQL and parameters.

    def adapt(self, value: datetime) -> Any:
        return self.connection.ops.adapt_datetimefield_value(value)

    def queue_filter(
        self, queues: Sequence[str] | None, excluded: Sequence[str] = ()
    ) -> tuple[str, list[Any]]:
        names_sql, names_params = self.names_filter()
        if not queues:
            paused_sql, paused_params = self.excluded_filter(excluded)
            return paused_sql + names_sql, [*paused_params, *names_params]
        if len(queues) == 1:
            return f" AND queue = %s{names_sql}", [queues[0], *names_params]
        placeholders = ", ".join(["%s"] * len(queues))
        return f" AND queue IN ({placeholders}){names_sql}", [*queues, *names_params]

    @staticmethod
    def excluded_filter(excluded: Sequence[str]) -> tuple[str, list[Any]]:
        """Leave out the paused queues (a claim across all queues while some are paused)."""
        if not excluded:
            return "", []
        marks = ", ".join(["%s"] * len(excluded))
        return f" AND queue NOT IN ({marks})", list(excluded)

    def names_filter(self) -> tuple[str, list[Any]]:
        """Only jobs of `names`, when set: the test helper `run_jobs(name=...)` runs some job
        names and leaves the others; workers claim every name."""
        if not self.names:
            return "", []
        return " AND name IN ({})".format(", ".join(["%s"] * len(self.names))), list(self.names)

    def running_assignments(
        self, worker_id: str, lease_seconds: float, now: datetime
    ) -> tuple[str, list[Any]]:
        sql = (
            f"status = '{Status.RUNNING.value}', attempts = attempts + 1, lease_owner = %s, "
            "lease_expires_at = %s, started_at = %s, finished_at = NULL, updated_at = %s, "
            "progress = NULL, progress_message = '', cancel_requested_at = NULL"
        )
        expires = now + timedelta(seconds=lease_seconds)
        return sql, [worker_id, self.adapt(expires), self.adapt(now), self.adapt(now)]

    @staticmethod
    def ordered(jobs: list[ClaimedJob]) -> list[ClaimedJob]:
        return sorted(jobs, key=lambda job: job.order_key)

    def unclaim(self, worker_id: str, jobs: Sequence[ClaimedJob]) -> int:
        """`states.UNCLAIM`: undo the claim of jobs this worker will not start, as if it never
        took them: back to pending, attempt not spent, their place in the queue (run_at)
        kept, no history entry. Fenced: a job whose lease this worker lost is left alone."""
        return self._hand_back(worker_id, jobs, Exit(UNCLAIMED, timezone.now()))

    def park(self, worker_id: str, jobs: Sequence[ClaimedJob], run_at: datetime) -> int:
        """`states.PARK`: as `unclaim`, but due again at `run_at` (when the limit that held
        the jobs back should let them through)."""
        return self._hand_back(worker_id, jobs, Exit(PARKED, timezone.now(), run_at=run_at))

    def defer(self, full: Mapping[tuple[str, str], datetime], now: datetime) -> int:
        """`states.DEFER`: the due pending jobs of each limit found full (`column = value`:
        a rate-limited job name or queue, or a concurrency key) are parked where they wait,
        due again when the limit should let one through, as the claimed job the gate parked
        (a concurrency key's sooner, when a worker frees a slot: `free_slot`). So
        the next claims take the jobs behind them instead of claiming and parking a limited
        backlog a batch at a time while unlimited jobs wait (one UPDATE per full limit,
        only when a gate pass parked something)."""
        deferred = 0
        with self.connection.cursor() as cursor:
            for (column, value), until in full.items():
                assert column in ("name", "queue", "concurrency_key"), column
                # A key's backlog through `sqlqueue_concurrency_wait` (SQLite matches a
                # partial index only when the query repeats its condition).
                keyed = "concurrency_key IS NOT NULL AND " if column == "concurrency_key" else ""
                cursor.execute(
                    f"UPDATE {self.table} SET run_at = %s, lease_owner = %s "
                    f"WHERE {keyed}status = '{Status.PENDING.value}' AND {column} = %s "
                    "AND run_at <= %s",
                    [self.adapt(until), PARKED_OWNER, value, self.adapt(now)],
                )
                deferred += cursor.rowcount
        return deferred

    def _hand_back(self, worker_id: str, jobs: Sequence[ClaimedJob], exit: Exit) -> int:
        mine = [job for job in jobs if job.lease_owner == worker_id]
        return len(self.database.leave_running(mine, exit)) if mine else 0

    def wake(self, freed: Mapping[str, int], now: datetime) -> int:
        """`states.WAKE`: make up to `freed[key]` parked jobs of each key due now, oldest
        first (through the `sqlqueue_concurrency_wait` index)."""
        woken = 0
        parked = f"status = '{Status.PENDING.value}' AND lease_owner = %s"
        with self.connection.cursor() as cursor:
            for key, count in freed.items():
                # The SELECT repeats the index's condition (SQLite matches a partial index
                # only so). It does not lock: a job it picks may be claimed before the UPDATE,
                # which therefore repeats "still parked", checked on the row's latest version.
                # Without that a claimed job lost its owner, and so its completion. The UPDATE
                # goes by primary key, so it locks only the rows it picked.
                cursor.execute(
                    f"SELECT id FROM {self.table} WHERE concurrency_key IS NOT NULL AND "
                    f"{parked} AND concurrency_key = %s ORDER BY run_at, id LIMIT %s",
                    [PARKED_OWNER, key, count],
                )
                ids = [row[0] for row in cursor.fetchall()]
                if not ids:
                    continue
                marks = ", ".join(["%s"] * len(ids))
                cursor.execute(
                    f"UPDATE {self.table} SET run_at = %s, lease_owner = '' "
                    f"WHERE id IN ({marks}) AND {parked}{self.wake_returning}",
                    [self.adapt(now), *ids, PARKED_OWNER],
                )
                woken += cursor.rowcount
        return woken

    def free_slot(self, job_id: int, now: datetime | None = None) -> bool:
        """The job `job_id` left `running`: wake the next parked job of the concurrency key
        whose slot it held, if any (`wake_key`). False if the wake was left undone."""
        key = self.slots.pop(job_id, None)
        return True if key is None else self.wake_key(key, now=now)

    def wake_key(self, key: str, count: int = 1, now: datetime | None = None) -> bool:
        """`wake` up to `count` parked jobs of concurrency key `key`, for whichever worker
        claims first, under the key's lock: a claim that found the key full and deferred its
        backlog has committed, so the wake finds that backlog (or the claim came after the
        slot freed, and took it). The woken jobs are due at `now` (default: now). A deadlock
        with a concurrent claim (MySQL/MariaDB) is retried a few times, then the parked jobs
        are left to their own due time: False."""

        def locked_wake() -> bool:
            hold_key(self.database, f"concurrency:{key}")
            self.wake({key: count}, now or timezone.now())
            return True

        return self.retried_on_deadlock(locked_wake) is not None

    def retried_on_deadlock(self, body: Callable[[], T]) -> T | None:
        """`body` in one transaction, tried again when MySQL/MariaDB made it a deadlock's
        victim (a concurrent claim), up to WAKE_TRIES times; None if every try deadlocked.
        Any other error is raised."""
        for _ in range(WAKE_TRIES):
            try:
                with transaction.atomic(using=self.alias):
                    return body()
            except DatabaseError as exc:
                if self.database is None or not self.database.is_deadlock(exc):
                    raise
        return None

    def free_slots(self, now: datetime | None = None) -> None:
        """`free_slot` for every slot this claimer still holds."""
        for job_id in list(self.slots):
            self.free_slot(job_id, now)

    def pass_slot(
        self,
        worker_id: str,
        job: ClaimedJob,
        lease_seconds: float,
        queues: Sequence[str] | None = None,
        excluded: Sequence[str] = (),
        unless_others_due: bool = False,
    ) -> ClaimedJob | None:
        """The job `job` held a concurrency slot and left `running`: claim the next parked
        job of its key for `worker_id` itself, in the slot it freed (a handoff), and return
        it; None if there was none to take (then the next one, if any, is woken for any
        worker, as `free_slot` does).

        Under the key's lock, like a wake, and like the gate it counts the key's running
        jobs there (a claim may have taken the slot between `job`'s end and this lock). The
        next job is taken only when this worker may run it (its queue served, not paused,
        not excluded), its own limit has room and no rate limit counts it; otherwise it is
        woken (the claim's gate then decides, as before handoffs).
        With `unless_others_due`, only while no other job waits due for this worker's
        queues: a key's backlog does not keep a worker from other work. A handoff saves the
        wake's notification, a claim and the gate's transaction per job of a busy key, and
        the slot never stands free. A MySQL deadlock is retried as a wake's is."""
        key = self.slots.pop(job.id, None)
        if key is None:
            return None

        def hand_off(now: datetime) -> ClaimedJob | None:
            hold_key(self.database, f"concurrency:{key}")
            taken = self.take_parked(
                worker_id, key, lease_seconds, now, queues, excluded, unless_others_due
            )
            if taken is None:
                self.wake({key: 1}, now)
            return taken

        # The claim is in flight until its transaction has committed (databases/holdings.py).
        with HOLDINGS.claiming(worker_id, timezone.now()) as claim:
            taken = self.retried_on_deadlock(partial(hand_off, claim.started_at))
            if taken is not None:
                claim.took([taken])
        if taken is not None:
            self.slots[taken.id] = key
        return taken

    def take_parked(
        self,
        worker_id: str,
        key: str,
        lease_seconds: float,
        now: datetime,
        queues: Sequence[str] | None,
        excluded: Sequence[str],
        unless_others_due: bool = False,
    ) -> ClaimedJob | None:
        """`states.CLAIM` of the oldest parked job of `key` by `worker_id`, if it may take it
        (see `pass_slot`); the caller holds the key's lock. None if it took none. One read
        finds the job, counts the key's running jobs as the gate does (the freeing job's end
        committed before this lock was taken: a claim may have taken its slot meanwhile)
        and, if asked, looks for other due work; one UPDATE takes the job."""
        others_sql, others_params = (
            self.others_due_sql(queues, excluded, now) if unless_others_due else ("0", [])
        )
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {self.columns}, (SELECT COUNT(*) FROM {self.table} "
                f"WHERE status = '{Status.RUNNING.value}' AND concurrency_key = %s), "
                f"{others_sql} FROM {self.table} WHERE concurrency_key IS NOT NULL "
                f"AND status = '{Status.PENDING.value}' AND lease_owner = %s "
                "AND concurrency_key = %s ORDER BY run_at, id LIMIT 1",
                [key, *others_params, PARKED_OWNER, key],
            )
            row = cursor.fetchone()
            if row is None:
                return None
            *columns, running, others_due = row
            job = ClaimedJob.from_row(tuple(columns), worker_id, now)
            limit = self.concurrency_of(job.name)
            if limit is None or running >= limit or others_due or self.rate_limited(job):
                return None
            if not self.serves(job, queues, excluded):
                return None
            assignments, params = self.running_assignments(worker_id, lease_seconds, now)
            # Still parked on the row's latest version: past its due time a claim may have
            # taken it first.
            cursor.execute(
                f"UPDATE {self.table} SET {assignments} "
                f"WHERE id = %s AND status = '{Status.PENDING.value}' AND lease_owner = %s",
                [*params, job.id, PARKED_OWNER],
            )
            if cursor.rowcount != 1:
                return None
        job.attempts += 1
        return job

    def serves(
        self, job: ClaimedJob, queues: Sequence[str] | None, excluded: Sequence[str]
    ) -> bool:
        """Whether a claim of this claimer for `queues` (None: all but `excluded`) could take
        `job` now: its queue served and not paused, its name among `names` if set."""
        if job.queue in self.paused.current() or (self.names and job.name not in self.names):
            return False
        return job.queue in queues if queues else job.queue not in excluded

    def rate_limited(self, job: ClaimedJob) -> bool:
        """Whether a rate limit counts `job`'s starts (its name's or its queue's). Such a job
        is woken, never taken by a handoff: it may be parked for its rate, not for the slot,
        and taking it again and again while its rate is full would spin."""
        rules = self.gate.rules()
        return rules is not None and bool(rate_names(rules, job))

    def concurrency_of(self, name: str) -> int | None:
        """The concurrency limit the running code declares for job `name`, if any."""
        rules = self.gate.rules()
        spec = rules.specs.get(name) if rules is not None else None
        return spec.concurrency if spec is not None else None


class UpdateReturningClaimer(Claimer):
    """One `UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING` statement.

    The LIMIT sits inside the subquery, so the planner cannot update more rows than asked.
    Subclasses add what their database needs around the subquery.
    """

    #: Appended to the subquery (PostgreSQL: FOR UPDATE SKIP LOCKED).
    lock_clause = ""
    #: The UPDATE's WHERE, around the subquery (PostgreSQL finds the rows by ctid).
    claimed_rows = "id IN ({candidates})"

    def claim_ready(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        lease_seconds: float,
        now: datetime,
        excluded: Sequence[str] = (),
    ) -> list[ClaimedJob]:
        sql, params = self.claim_statement(worker_id, queues, limit, lease_seconds, now, excluded)
        rows = self.run_claim(sql, params)
        return self.ordered([ClaimedJob.from_row(row, worker_id, now) for row in rows])

    def claim_statement(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        lease_seconds: float,
        now: datetime,
        excluded: Sequence[str] = (),
    ) -> tuple[str, list[Any]]:
        """The claim's UPDATE … RETURNING and its parameters."""
        assignments, assign_params = self.running_assignments(worker_id, lease_seconds, now)
        candidates, candidate_params = self.candidates(queues, limit, now, excluded)
        sql = (
            f"UPDATE {self.table} SET {assignments} "
            f"WHERE {self.claimed_rows.format(candidates=candidates)} RETURNING {self.columns}"
        )
        return sql, [*assign_params, *candidate_params]

    def candidates(
        self,
        queues: Sequence[str] | None,
        limit: int,
        now: datetime,
        excluded: Sequence[str] = (),
    ) -> tuple[str, list[Any]]:
        """The subquery that picks (and, where the vendor can, locks) the ids to claim."""
        queue_sql, queue_params = self.queue_filter(queues, excluded)
        sql = (
            f"SELECT id FROM {self.table}{self.index_hint(queues)} "
            f"WHERE {self.claimable_sql}{queue_sql} "
            f"AND run_at <= %s ORDER BY priority DESC, run_at, id LIMIT %s{self.lock_clause}"
        )
        return sql, [*queue_params, self.adapt(now), limit]
