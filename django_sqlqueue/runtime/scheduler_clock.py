"""The scheduler's clock: the database's, so supervisors whose hosts disagree agree on ticks.

Deciding ticks on each host's clock let a supervisor 30 s fast enqueue ticks early and move
every schedule past the ticks in between, for all supervisors at once. The database's clock is
the one they share (on SQLite, a file on this host, it is this host's). It is read about once
a second and before anything is enqueued; in between it is carried forward by the time since
boot, which no clock setting changes.

So a step of the clock the ticks are decided on shows as a disagreement between the two: it is
logged, and the scheduler makes up for it (scheduler.py): a step forward enqueues the ticks it
jumped over, as if they had come one by one; a step back enqueues nothing twice (each tick's
job has a unique key) and waits until the clock is back at the next tick.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.utils import timezone

from ..databases import queue_database

logger = logging.getLogger("django_sqlqueue")

#: A disagreement past this many seconds between the database's clock and the time since
#: boot is a step, not the drift of a clock being slewed.
STEP_SECONDS = 2.0


def since_boot() -> float:
    """Seconds on a clock that only moves forward, and counts a suspended machine's sleep
    (CLOCK_BOOTTIME on Linux; elsewhere the monotonic clock)."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return time.monotonic()


class SchedulerClock:
    def __init__(self, alias: str) -> None:
        self.alias = alias
        #: The last reading: the database's time, and the time since boot when it was read.
        self.base: tuple[datetime, float] | None = None
        #: Seconds the last reading found the clock stepped (positive: forward), until taken.
        self.step = 0.0

    def read(self) -> datetime:
        """The database's time now (a query); notes a step since the last reading."""
        database = queue_database(self.alias)
        now = database.current_time()
        boot = since_boot()
        if self.base is not None:
            expected = self.base[0] + timedelta(seconds=boot - self.base[1])
            moved = (now - expected).total_seconds()
            if abs(moved) > STEP_SECONDS:
                self.step += moved
                logger.warning(
                    "Scheduler: the database's clock%s stepped %s by %.1f s; %s",
                    "" if database.clock_sql else " (this host's)",
                    "forward" if moved > 0 else "back",
                    abs(moved),
                    "the ticks it jumped over are enqueued now"
                    if moved > 0
                    else "no tick is enqueued twice; the next ones come when it is back at them",
                )
        self.base = (now, boot)
        return now

    def estimate(self) -> datetime:
        """The database's time now, carried forward from the last reading without a query."""
        if self.base is None:
            return timezone.now()
        return self.base[0] + timedelta(seconds=since_boot() - self.base[1])

    def take_step(self) -> float:
        """The step found since the last call (0.0: none)."""
        step, self.step = self.step, 0.0
        return step
