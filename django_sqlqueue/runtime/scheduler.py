"""The supervisor's scheduler: enqueue each recurring job's ticks when they come due.

Every supervisor runs one (unless started with --no-scheduler); none is in charge. Each keeps
the enabled schedules in memory, read again every REFRESH_SECONDS and whenever another
supervisor turns out to have moved one on, and asks the supervisor to wake it at the next
tick, so a tick is enqueued within milliseconds of its time without polling in between.
Which supervisor enqueues a tick is settled by the database (scheduling/store.py): one
conditional UPDATE wins, and the tick's job has a unique idempotency key.

Nothing here may stop the supervisor: a database error ends the round and the next retries;
a schedule that cannot run (a cron made invalid by hand, a job this code lacks) is logged
once and skipped, and the others go on.
"""

from __future__ import annotations

import logging
import math
import time
from datetime import datetime

from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.db.models import QuerySet

from ..conf import QueueSettings
from ..exceptions import InvalidJobError
from ..models import Schedule
from ..probes import probe
from ..registry import registry
from ..scheduling.cron import Cron, CronError
from ..scheduling.declarations import declared_schedules
from ..scheduling.plan import plan_ticks
from ..scheduling.specs import MISSED_ALL
from ..scheduling.store import fire, from_db, sync
from .scheduler_clock import SchedulerClock

logger = logging.getLogger("django_sqlqueue")

#: Seconds between two reads of the schedules: how soon an admin's edit is seen. A disabled
#: schedule never runs after the edit whatever this says (the enqueue checks the row).
REFRESH_SECONDS = 1.0
#: Schedules named in the banner line before the rest are only counted.
NAMES_SHOWN = 10
#: Seconds between attempts while the database does not answer.
RETRY_SECONDS = 1.0


class Scheduler:
    def __init__(self, conf: QueueSettings) -> None:
        self.alias = conf.database
        self.synced = False
        self.schedules: list[Schedule] = []
        self.next_refresh = 0.0
        self.crons: dict[tuple[str, str, str], Cron] = {}
        #: Schedules that cannot run, by key: the reason last logged (logged once).
        self.broken: dict[str, str] = {}
        #: While the database fails: when to try again (monotonic), 0 when it answers.
        self.retry_at = 0.0
        #: Ticks are decided on the database's clock, not this host's.
        self.clock = SchedulerClock(self.alias)

    # The supervisor's interface ---------------------------------------------------------

    def run(self, now: datetime | None = None) -> None:
        """Sync once, read the schedules when due, and enqueue every tick that is due."""
        if self.retry_at and time.monotonic() < self.retry_at:
            return
        try:
            if not self.synced:
                self.sync(now or self.clock.read())
            refreshed = time.monotonic() >= self.next_refresh
            if refreshed:
                self.refresh()
            if now is None:
                # The database's clock: read with each refresh and before any enqueue.
                now = self.clock.read() if refreshed else self.clock.estimate()
                if not refreshed and self.any_due(now):
                    now = self.clock.read()
            # Ticks a step forward jumped over did not go by unseen: enqueue each of them.
            catch_up = self.clock.take_step() > 0
            for schedule in self.schedules:
                if schedule.key in self.broken and not refreshed:
                    continue  # tried again once per read of the rows, not at every turn
                due = from_db(schedule.next_run_at)
                if due is None or due <= now:
                    self.fire(schedule, now, catch_up)
            probe("scheduler-tick", now=now.timestamp(), refreshed=refreshed)
        except DatabaseError as exc:
            if not self.retry_at:
                logger.warning("Scheduler could not reach the database (%s); retrying", exc)
            self.retry_at = time.monotonic() + RETRY_SECONDS
            self.next_refresh = 0.0
            connections[self.alias].close()
            return
        if self.retry_at:
            logger.info("Scheduler reached the database again")
            self.retry_at = 0.0

    def seconds_until_due(self, now: datetime | None = None) -> float:
        """How long the supervisor may sleep before the next tick (inf: none known)."""
        if self.retry_at:
            return max(0.0, self.retry_at - time.monotonic())
        now = now or self.clock.estimate()
        due = [from_db(s.next_run_at) for s in self.schedules if s.key not in self.broken]
        if any(d is None for d in due):
            return 0.0
        times = [d for d in due if d is not None]
        if not times:
            return math.inf
        return max(0.0, (min(times) - now).total_seconds())

    def any_due(self, now: datetime) -> bool:
        return any(
            (due := from_db(s.next_run_at)) is None or due <= now
            for s in self.schedules
            if s.key not in self.broken
        )

    # Steps ------------------------------------------------------------------------------

    def sync(self, now: datetime | None = None) -> None:
        declared = declared_schedules(now)
        for problem in declared.problems:
            # The system checks refuse to start with these; here only with --skip-checks.
            logger.error("%s (%s) Not scheduled.", problem.message, problem.id)
        report = sync(declared, self.alias, now)
        self.synced = True
        names = [spec.key for spec in declared.specs]
        if not names and not (report.created or report.updated or report.removed):
            return
        shown = ", ".join(names[:NAMES_SHOWN]) + (", ..." if len(names) > NAMES_SHOWN else "")
        logger.info(
            "Scheduler: %d schedule(s) declared%s; sync: %s",
            len(names),
            f" ({shown})" if names else "",
            report,
        )

    def refresh(self) -> None:
        enabled = Schedule.objects.using(self.alias).filter(enabled=True)
        try:
            self.schedules = list(enabled)
        except (OperationalError, InterfaceError):
            raise
        except Exception:
            # A row that cannot even be read (a column written by hand that Django cannot
            # convert): read them one by one and leave out the ones that fail.
            self.schedules = self.readable(enabled)
        self.next_refresh = time.monotonic() + REFRESH_SECONDS

    def readable(self, enabled: QuerySet[Schedule]) -> list[Schedule]:
        schedules: list[Schedule] = []
        for pk, key in enabled.values_list("pk", "key"):
            try:
                schedules.extend(enabled.filter(pk=pk))
            except (OperationalError, InterfaceError):
                raise
            except Exception as exc:
                self.report_broken(Schedule(pk=pk, key=key), f"{type(exc).__name__}: {exc}", exc)
        return schedules

    def fire(self, schedule: Schedule, now: datetime, catch_up: bool = False) -> None:
        """Enqueue the schedule's due ticks (`catch_up`: every one, up to the limit of
        `missed="all"`, whatever its policy: the clock stepped over them)."""
        try:
            handler = registry.get(schedule.job_name)
            missed = MISSED_ALL if catch_up else schedule.missed
            plan = plan_ticks(self.cron_of(schedule), from_db(schedule.next_run_at), now, missed)
            jobs = fire(schedule, plan, handler, now, self.alias)
        except (CronError, InvalidJobError) as exc:  # UnknownJobError is an InvalidJobError
            self.report_broken(schedule, str(exc))
            return
        except (OperationalError, InterfaceError):
            raise  # the database, not the row: run() retries the round
        except Exception as exc:
            # Whatever else a row edited by hand can hold (a value the job's INSERT refuses,
            # a type nothing here expected): this schedule is skipped, the others go on.
            self.report_broken(schedule, f"{type(exc).__name__}: {exc}", exc)
            return
        self.broken.pop(schedule.key, None)
        if jobs is None:
            # Moved on by another supervisor, or changed in the admin: read it again.
            self.next_refresh = 0.0
            return
        schedule.next_run_at = plan.next_run_at
        probe("schedule-fired", key=schedule.key, jobs=[job.pk for job in jobs])
        for job in jobs:
            logger.debug(
                "Schedule %s: job %s for %s%s",
                schedule.key,
                job.pk,
                job.run_at.isoformat(),
                " (already enqueued)" if job.deduplicated else "",
            )
        if plan.missed:
            logger.warning(
                "Schedule %s: %s%d missed tick(s) not enqueued (missed=%r)",
                schedule.key,
                "" if plan.missed_exact else "at least ",
                plan.missed,
                schedule.missed,
            )

    def cron_of(self, schedule: Schedule) -> Cron:
        key = (schedule.cron, schedule.timezone, schedule.key)
        cron = self.crons.get(key)
        if cron is None:
            cron = self.crons[key] = Cron(schedule.cron, schedule.timezone, hash_id=schedule.key)
        return cron

    def report_broken(
        self, schedule: Schedule, reason: str, unexpected: Exception | None = None
    ) -> None:
        """Log once why a schedule cannot run (with the traceback of an unexpected error)."""
        if self.broken.get(schedule.key) != reason:
            logger.error("Schedule %s cannot run: %s", schedule.key, reason, exc_info=unexpected)
        self.broken[schedule.key] = reason
