"""Which ticks of a schedule are due now, and what the missed-ticks policy makes of them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone

from .cron import Cron
from .specs import MISSED_ALL, MISSED_ALL_LIMIT, MISSED_SKIP, SKIP_LATE_AFTER


@dataclass(frozen=True)
class Plan:
    """Ticks to enqueue (ascending), the schedule's next tick after them, and how many due
    ticks the policy left out (`missed_exact` False: at least that many)."""

    ticks: list[datetime]
    next_run_at: datetime
    missed: int = 0
    missed_exact: bool = True


def plan_ticks(cron: Cron, next_run_at: datetime | None, now: datetime, missed: str) -> Plan:
    """The ticks due in [next_run_at, now] under policy `missed`.

    On time, one tick is due: it is enqueued whatever the policy. After a gap (every
    supervisor down, or the schedule disabled), several are: `latest` keeps the latest,
    `all` the latest MISSED_ALL_LIMIT, `skip` none but one less than SKIP_LATE_AFTER late.
    """
    if next_run_at is None:
        # A schedule that never ran: it starts with its next tick.
        return Plan([], cron.next_after(now))
    if next_run_at > now:
        return Plan([], next_run_at)
    limit = MISSED_ALL_LIMIT if missed == MISSED_ALL else 1
    ticks, count, exact = cron.ticks_between(next_run_at, now, limit)
    if missed == MISSED_SKIP:
        ticks = [tick for tick in ticks if now - tick <= SKIP_LATE_AFTER]
    return Plan(ticks, cron.next_after(now), count - len(ticks), exact)


def tick_key(schedule_key: str, tick: datetime) -> str:
    """The idempotency key of one tick's job: unique in the job table, so two supervisors
    that both enqueue a tick store one job."""
    return f"schedule:{schedule_key}:{tick.astimezone(dt_timezone.utc):%Y-%m-%dT%H:%M:%SZ}"


def manual_key(schedule_key: str, now: datetime) -> str:
    """The idempotency key of a job started by hand (admin "run now"): never a tick's."""
    return f"schedule:{schedule_key}:manual:{now.astimezone(dt_timezone.utc):%Y-%m-%dT%H:%M:%S.%fZ}"


def jobs_key_prefix(schedule_key: str) -> str:
    """What the idempotency keys of every job of a schedule begin with."""
    return f"schedule:{schedule_key}:"
