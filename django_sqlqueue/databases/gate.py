"""The claim's gate for concurrency and rate limits, and the start's gate for rate limits.

A claim takes due jobs as it always does; then, only if some claimed job has a limit (its
handler declares `concurrency` or `rate_limit`, or its queue is in QUEUE_RATE_LIMITS), one
short transaction locks the `FlowKey` row of each key involved (sorted, so deciders never
deadlock), counts the other running jobs of each concurrency key and the starts of each rate
key within its period, keeps the jobs that fit in claim order, and parks the rest: back to
pending, attempt not spent (`states.PARK`), due again when a slot or the allowance should
free. The decisions on one key take turns, so no two workers can both take its last slot.

A claim keeps no more concurrency-limited jobs than its worker runs at once (`slots`): a
worker runs its batch one job after another, and a slot held by a job waiting behind another
is a slot no one uses. The limited jobs over that number whose keys still have room are
handed back as if never claimed (`states.UNCLAIM`), due for the next worker. When a key is
full, the jobs of it the claim took are parked and its whole due backlog is deferred with
them (`states.DEFER`), so claims reach the jobs behind it; the worker that frees a slot of
the key wakes the next one (`Claimer.free_slot`, under the key's lock).

A rate limit counts handler starts, not claims: a worker runs its batch one job after
another, so a job claimed now may start much later. The claim records each kept job's start
a little ahead (`rate_window.START_MARGIN`), as a reservation; a job whose handler starts
before its reservation's time costs nothing more, and one that starts later (behind a long
job of its batch) is counted again by `admit_start`, just before its handler is called, under
the key's lock: its reservation is replaced by its real start, or, if the window has no room
left, it is parked then. With no limit declared anywhere this module does nothing at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from ..conf import get_settings
from ..flow.spec import GATED
from ..models import Job
from ..options import JobOptions, RateLimit
from ..rows import ClaimedJob
from ..states import Status
from .flow_keys import QueueDatabase, hold_key, lock_key, save_key
from .rate_window import RateWindow

#: Seconds a job held back by its concurrency limit waits at most. The worker that frees a slot
#: of its key wakes the next one at once (`states.WAKE`, `Claimer.free_slot`); this is for a
#: wake that never comes (its worker died between the job's end and the wake). Every time it
#: passes, a full key's backlog is deferred again in one UPDATE: it bounds that cost too.
CONCURRENCY_RETRY_SECONDS = 5.0


@dataclass
class Rules:
    #: The options of the registered jobs that have a limit, by name.
    specs: dict[str, JobOptions]
    queue_rates: dict[str, RateLimit]

    def gates(self, job: ClaimedJob) -> bool:
        return job.name in self.specs or job.queue in self.queue_rates


@dataclass
class Admitted:
    """What a claim may start: `jobs`, the ones holding a concurrency slot first; job id →
    the concurrency key whose slot it holds (the slot frees when the job leaves `running`)."""

    jobs: list[ClaimedJob]
    slots: dict[int, str] = field(default_factory=dict)
    #: Job id → the time (epoch seconds) its rate limits recorded its start at.
    reserved: dict[int, float] = field(default_factory=dict)


@dataclass
class Decision:
    """What one gate pass decided: jobs kept, and jobs parked with the time they are due."""

    kept: list[ClaimedJob] = field(default_factory=list)
    parked: dict[datetime, list[ClaimedJob]] = field(default_factory=lambda: defaultdict(list))
    #: Limited jobs whose keys have room, over the slots of the claiming worker: handed back.
    returned: list[ClaimedJob] = field(default_factory=list)
    #: Job id → the concurrency key whose slot it takes.
    slots: dict[int, str] = field(default_factory=dict)
    #: The limits found full: (column, value) → when they should let a job through: a rate
    #: ("name" or "queue") or a concurrency key ("concurrency_key"). The other due jobs
    #: behind them are deferred to then (`states.DEFER`).
    full: dict[tuple[str, str], datetime] = field(default_factory=dict)
    #: Job id → the time (epoch seconds) its rate limits recorded its start at.
    reserved: dict[int, float] = field(default_factory=dict)

    def hold(self, column: str, value: str, until: datetime) -> None:
        self.full[column, value] = max(until, self.full.get((column, value), until))

    def hold_if_full(self, name: str, window: RateWindow, now: datetime) -> datetime | None:
        """When rate key `name` lets one more start through, if its window is full (and
        its backlog is then held until that time); None while it has room."""
        if window.free():
            return None
        frees = datetime.fromtimestamp(window.frees_at(), now.tzinfo)
        self.hold(*rate_subject(name), frees)
        return frees


class FlowGate:
    """One claimer's gate. Its rules come from the registered handlers (`GATED`) and the
    settings, read again only when a handler was (un)registered."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._version = -1
        self._conf: Any = None
        self._rules: Rules | None = None

    def rules(self) -> Rules | None:
        conf = get_settings()
        if GATED.version != self._version or conf is not self._conf:
            specs = dict(GATED.specs)
            queue_rates = dict(conf.queue_rate_limits)
            self._rules = Rules(specs, queue_rates) if specs or queue_rates else None
            self._version, self._conf = GATED.version, conf
        return self._rules

    def admit(
        self,
        database: QueueDatabase,
        worker_id: str,
        jobs: list[ClaimedJob],
        now: datetime,
        slots: int = 1,
    ) -> Admitted:
        """The claimed jobs this worker may start, holding at most `slots` concurrency slots;
        the others are parked, or handed back."""
        rules = self.rules()
        if rules is None or not jobs:
            return Admitted(jobs)
        gated = [job for job in jobs if rules.gates(job)]
        if not gated:
            return Admitted(jobs)
        decision = self.decide(database, worker_id, rules, gated, now, slots)
        held_back = {job.id for job in decision.returned}
        held_back.update(job.id for parked in decision.parked.values() for job in parked)
        kept = [job for job in jobs if job.id not in held_back]
        # A job holding a slot runs first: the jobs of its batch would keep the slot idle.
        kept.sort(key=lambda job: job.id not in decision.slots)
        return Admitted(kept, decision.slots, decision.reserved)

    def decide(
        self,
        database: QueueDatabase,
        worker_id: str,
        rules: Rules,
        gated: list[ClaimedJob],
        now: datetime,
        slots: int = 1,
    ) -> Decision:
        keys = concurrency_keys(self.alias, [job.id for job in gated])
        decision = Decision()
        with transaction.atomic(using=self.alias):
            wanted: set[str] = set()
            for job in gated:
                wanted.update(lock_names(rules, job, keys.get(job.id)))
            rows = {}
            for name in sorted(wanted):
                if name.startswith("rate:"):
                    rows[name] = lock_key(database, name)  # its window is on the row
                else:
                    hold_key(database, name)
            running = running_counts(self.alias, {k for k in keys.values() if k}, gated)
            windows = rate_windows(rules, rows, now)
            moment = timezone.now().timestamp()  # after the locks: no start comes earlier
            for job in gated:
                spec = rules.specs.get(job.name)
                limit = spec.concurrency if spec is not None else None
                key = keys.get(job.id) if limit is not None else None
                due = now
                if key is not None and limit is not None and running.get(key, 0) >= limit:
                    due = now + timedelta(seconds=CONCURRENCY_RETRY_SECONDS)
                    decision.hold("concurrency_key", key, due)
                for name in rate_names(rules, job):
                    frees = decision.hold_if_full(name, windows[name], now)
                    if frees is not None:
                        due = max(due, frees)
                if due > now:
                    decision.parked[due].append(job)
                    continue
                if key is not None and len(decision.slots) >= slots:
                    decision.returned.append(job)
                    continue
                decision.kept.append(job)
                if key is not None:
                    running[key] = running.get(key, 0) + 1
                    decision.slots[job.id] = key
                for name in rate_names(rules, job):
                    decision.reserved[job.id] = windows[name].start(moment)
            save_windows(database, rows, windows)
            # Under the keys' locks, so two workers never defer one backlog at once, and a
            # worker that frees a slot (it takes the key's lock to wake the next job) finds
            # this claim's jobs of the key parked and its backlog deferred, or the slot
            # taken, never neither (parked after the locks were let go, such a job waited
            # out its due time with a slot free).
            claimer = database.claimer()
            for run_at, parked in decision.parked.items():
                claimer.park(worker_id, parked, run_at)
            if decision.returned:
                claimer.unclaim(worker_id, decision.returned)
            if decision.full:
                claimer.defer(decision.full, now)
        return decision

    def admit_start(
        self, database: QueueDatabase, job: ClaimedJob, reserved: float | None
    ) -> datetime | None:
        """Count again the start of a claimed job under its rate limits (it starts after the
        time its claim `reserved`, or was claimed without one): None if it may start now (its
        start replaces the reservation), else when it should be due again (the reservation
        is given up, and the job is to be parked)."""
        rules = self.rules()
        names = rate_names(rules, job) if rules is not None else []
        if rules is None or not names:
            return None
        decision = Decision()
        with transaction.atomic(using=self.alias):
            rows = {name: lock_key(database, name) for name in sorted(names)}
            moment = timezone.now()  # after the locks: the start is as late as this or later
            windows = rate_windows(rules, rows, moment)
            due: datetime | None = None
            for name, window in windows.items():
                if reserved is not None:
                    window.forget_start(reserved)
                frees = decision.hold_if_full(name, window, moment)
                if frees is not None:
                    due = frees if due is None else max(due, frees)
            if due is None:
                for window in windows.values():
                    window.start(moment.timestamp())
            save_windows(database, rows, windows)
            if due is not None:
                database.claimer().defer(decision.full, moment)  # as the claim's gate does
        return due


def rate_windows(rules: Rules, rows: dict[str, Any], now: datetime) -> dict[str, RateWindow]:
    """The window of each rate key among the locked `rows`."""
    return {
        name: RateWindow.load(row.starts, rate_of(rules, name), now.timestamp())
        for name, row in rows.items()
        if name.startswith("rate:")
    }


def save_windows(
    database: QueueDatabase, rows: dict[str, Any], windows: dict[str, RateWindow]
) -> None:
    """Write back the windows a decision changed, on their locked rows."""
    for name, window in windows.items():
        if window.changed:
            rows[name].starts = window.stored()
            save_key(database, rows[name], "starts")


def lock_names(rules: Rules, job: ClaimedJob, key: str | None) -> list[str]:
    names = list(rate_names(rules, job))
    spec = rules.specs.get(job.name)
    if spec is not None and spec.concurrency is not None and key is not None:
        names.append(f"concurrency:{key}")
    return names


def rate_names(rules: Rules, job: ClaimedJob) -> list[str]:
    names = []
    spec = rules.specs.get(job.name)
    if spec is not None and spec.rate is not None:
        names.append(f"rate:job:{job.name}")
    if job.queue in rules.queue_rates:
        names.append(f"rate:queue:{job.queue}")
    return names


def rate_subject(name: str) -> tuple[str, str]:
    """The column and value of the jobs a rate key counts: ("name", job) or ("queue", queue)
    (the key is "rate:job:<name>" or "rate:queue:<queue>", as `rate_names` spells it)."""
    kind, _, subject = name.removeprefix("rate:").partition(":")
    return ("name" if kind == "job" else "queue"), subject


def rate_of(rules: Rules, name: str) -> RateLimit:
    column, subject = rate_subject(name)
    if column == "name":
        rate = rules.specs[subject].rate
        assert rate is not None
        return rate
    return rules.queue_rates[subject]


def concurrency_keys(alias: str, ids: Sequence[int]) -> dict[int, str | None]:
    """The stored concurrency key of each claimed job (as enqueued, whatever the code says now)."""
    rows = Job.objects.using(alias).filter(pk__in=list(ids)).values_list("pk", "concurrency_key")
    return dict(rows)


def running_counts(alias: str, keys: set[str], mine: list[ClaimedJob]) -> dict[str, int]:
    """Running jobs per concurrency key, this claim's own jobs left out. Read after the keys'
    rows were locked: every job another worker admitted before us has committed."""
    if not keys:
        return {}
    counts = (
        Job.objects.using(alias)
        .filter(status=Status.RUNNING, concurrency_key__in=sorted(keys))
        .exclude(pk__in=[job.id for job in mine])
        .order_by()
        .values("concurrency_key")
        .annotate(running=Count("id"))
    )
    return {str(row["concurrency_key"]): int(row["running"]) for row in counts}
