"""Schedules in the database: declarations synced to rows, and each tick enqueued once.

A tick is enqueued by whichever supervisor gets there first, with no leader: it moves the
row's `next_run_at` on with a conditional UPDATE (one winner per tick) and, in the same
transaction, inserts the tick's job under an idempotency key made of the schedule and the
tick's time. The key is unique in the job table, so even a supervisor working from a stale
row (an admin edit racing a tick, a sync) can never store a tick twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from ..enqueueing.options import EnqueueOptions, JobDefaults, build_job
from ..enqueueing.store import store
from ..exceptions import InvalidJobError
from ..models import Job, Schedule
from .cron import Cron, CronError
from .declarations import Declared
from .plan import Plan, manual_key, tick_key
from .specs import ScheduleSpec


def to_db(value: datetime) -> datetime:
    """A datetime as the project stores it (naive local time when USE_TZ is off)."""
    if settings.USE_TZ:
        return value
    return timezone.make_naive(value)


def from_db(value: datetime | None) -> datetime | None:
    """A stored datetime as an aware one, whatever USE_TZ says."""
    if value is None or timezone.is_aware(value):
        return value
    return timezone.make_aware(value)


def cron_of(schedule: Schedule) -> Cron:
    return Cron(schedule.cron, schedule.timezone, hash_id=schedule.key)


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        parts = [
            f"{label} {', '.join(keys)}"
            for label, keys in (
                ("created", self.created),
                ("updated", self.updated),
                ("disabled as removed from code", self.removed),
            )
            if keys
        ]
        return "; ".join(parts) or "nothing changed"


def sync(declared: Declared, alias: str, now: datetime | None = None) -> SyncReport:
    """Make the rows say what code and settings declare.

    A new schedule gets a row; a changed one its new values. The cron in force is the
    declared one, except after an admin's edit: that stays until the declared cron itself
    changes (the later change wins). A row whose key is declared nowhere any more is
    disabled and marked `removed_at`, not deleted; declared again, it comes back enabled.
    Safe to run from several supervisors at once.
    """
    now = now or timezone.now()
    report = SyncReport()
    for spec in declared.specs:
        sync_one(spec, alias, now, report)
    gone = Schedule.objects.using(alias).filter(removed_at__isnull=True)
    gone = gone.exclude(key__in=sorted(declared.keys))
    report.removed = sorted(gone.values_list("key", flat=True))
    if report.removed:
        Schedule.objects.using(alias).filter(key__in=report.removed).update(
            enabled=False, removed_at=to_db(now), updated_at=to_db(now)
        )
    return report


def sync_one(spec: ScheduleSpec, alias: str, now: datetime, report: SyncReport) -> None:
    declared_values: dict[str, Any] = {
        "job_name": spec.job_name,
        "kwargs": dict(spec.kwargs),
        "timezone": spec.zone_name,
        "queue": spec.queue or "",
        "priority": spec.priority,
        "missed": spec.missed,
        "source": spec.source,
    }
    for attempt in range(2):
        try:
            with transaction.atomic(using=alias):
                row = Schedule.objects.using(alias).select_for_update().filter(key=spec.key)
                existing = row.first()
                if existing is None:
                    cron = Cron(spec.cron, spec.zone_name, hash_id=spec.key)
                    Schedule.objects.using(alias).create(
                        key=spec.key,
                        cron=spec.cron,
                        declared_cron=spec.cron,
                        next_run_at=to_db(cron.next_after(now)),
                        created_at=to_db(now),
                        updated_at=to_db(now),
                        **declared_values,
                    )
                    report.created.append(spec.key)
                elif update_row(existing, spec, declared_values, now):
                    report.updated.append(spec.key)
            return
        except IntegrityError:
            if attempt:  # created by another supervisor meanwhile: update it instead
                raise


def update_row(row: Schedule, spec: ScheduleSpec, values: dict[str, Any], now: datetime) -> bool:
    changed = [name for name, value in values.items() if getattr(row, name) != value]
    for name in changed:
        setattr(row, name, values[name])
    if row.declared_cron != spec.cron:
        # The cron in code changed since the last sync: it replaces the one in force, even
        # one an admin set (the later change wins).
        row.declared_cron = spec.cron
        changed.append("declared_cron")
        if row.cron != spec.cron:
            row.cron = spec.cron
            changed.append("cron")
    if row.removed_at is not None:
        row.removed_at, row.enabled = None, True
        changed += ["removed_at", "enabled"]
    if {"cron", "timezone"} & set(changed) or row.next_run_at is None:
        try:
            row.next_run_at = to_db(cron_of(row).next_after(now))
        except CronError:
            # The cron in force (an admin's) cannot run here: the declared one takes over.
            row.cron = spec.cron
            row.next_run_at = to_db(cron_of(row).next_after(now))
            changed.append("cron")
        changed.append("next_run_at")
    if not changed:
        return False
    row.updated_at = to_db(now)
    row.save(update_fields=sorted({*changed, "updated_at"}))
    return True


def fire(
    schedule: Schedule, plan: Plan, handler: JobDefaults, now: datetime, alias: str
) -> list[Job] | None:
    """Enqueue the plan's ticks and move the schedule on, if it is still as `schedule` saw
    it (enabled, same cron and next tick): the list of jobs, or None when another supervisor
    got there first, or an admin changed or disabled the schedule meanwhile."""
    with transaction.atomic(using=alias):
        claimed = Schedule.objects.using(alias).filter(
            pk=schedule.pk,
            enabled=True,
            cron=schedule.cron,
            timezone=schedule.timezone,
        )
        if schedule.next_run_at is None:
            claimed = claimed.filter(next_run_at__isnull=True)
        else:
            claimed = claimed.filter(next_run_at=to_db(schedule.next_run_at))
        if not claimed.update(next_run_at=to_db(plan.next_run_at)):
            return None
        jobs = [
            enqueue(schedule, handler, tick_key(schedule.key, tick), tick, now, alias)
            for tick in plan.ticks
        ]
        if jobs:
            Schedule.objects.using(alias).filter(pk=schedule.pk).update(
                last_run_at=to_db(plan.ticks[-1]), last_job_id=jobs[-1].pk
            )
    return jobs


def enqueue(
    schedule: Schedule,
    handler: JobDefaults,
    key: str,
    run_at: datetime,
    now: datetime,
    alias: str,
) -> Job:
    """One job of the schedule, run at `run_at` (its tick), its options over the job's."""
    if not isinstance(schedule.kwargs, dict):
        raise InvalidJobError(
            f"its kwargs must be a JSON object (keyword arguments of {handler.options.name}), "
            f"not {type(schedule.kwargs).__name__}: {schedule.kwargs!r:.80}"
        )
    options = EnqueueOptions(
        queue=schedule.queue or None,
        priority=schedule.priority,
        run_at=run_at,
        idempotency_key=key,
    )
    return store(build_job(handler, (), schedule.kwargs, options, now=now), alias)


def run_now(schedule: Schedule, handler: JobDefaults, alias: str) -> Job:
    """A job of the schedule to run at once, outside its ticks (the admin's "run now")."""
    now = timezone.now()
    with transaction.atomic(using=alias):
        job = enqueue(schedule, handler, manual_key(schedule.key, now), now, now, alias)
        Schedule.objects.using(alias).filter(pk=schedule.pk).update(
            last_run_at=to_db(now), last_job_id=job.pk
        )
    return job


def set_enabled(keys: Iterable[int], enabled: bool, alias: str) -> int:
    """Enable or disable schedules by id; a disabled one stops before its next tick."""
    return (
        Schedule.objects.using(alias)
        .filter(pk__in=list(keys))
        .exclude(enabled=enabled)
        .update(enabled=enabled, updated_at=to_db(timezone.now()))
    )


def retime(schedule: Schedule, now: datetime | None = None) -> None:
    """After an edit of the cron or time zone: the next tick is the new cron's next one."""
    schedule.next_run_at = to_db(cron_of(schedule).next_after(now or timezone.now()))
