"""`manage.py schedules`: the recurring jobs, their cron in words, next and last runs."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.core.management.base import CommandParser
from django.db.models import F

from ...conf import get_settings
from ...models import Schedule
from ...scheduling.cron import CronError, parse_zone
from ...scheduling.declarations import declared_schedules
from ...scheduling.describe import describe
from ...scheduling.store import sync
from ..base import QueueCommand


def schedule_rows(alias: str) -> list[dict[str, Any]]:
    """One dict per schedule, as --json prints it."""
    schedules = Schedule.objects.using(alias).annotate(last_status=F("last_job__status"))
    return [
        {
            "key": s.key,
            "job": s.job_name,
            "cron": s.cron,
            "cron_in_words": describe(s.cron),
            "declared_cron": s.declared_cron,
            "timezone": s.timezone,
            "kwargs": s.kwargs,
            "queue": s.queue or None,
            "priority": s.priority,
            "missed": s.missed,
            "enabled": s.enabled,
            "source": s.source,
            "removed_at": s.removed_at,
            "next_run_at": s.next_run_at if s.enabled else None,
            "last_run_at": s.last_run_at,
            "last_job_id": s.last_job_id,
            "last_job_status": getattr(s, "last_status", None),
            "synced": True,
        }
        for s in schedules
    ]


def unsynced_rows(synced: set[str]) -> list[dict[str, Any]]:
    """The schedules declared in code or settings that no supervisor has synced to the table
    yet: listed, so that `@job(cron=...)` shows up before the first supervisor starts."""
    rows = []
    for spec in declared_schedules().specs:
        if spec.key in synced:
            continue
        rows.append(
            {
                "key": spec.key,
                "job": spec.job_name,
                "cron": spec.cron,
                "cron_in_words": describe(spec.cron),
                "timezone": spec.zone_name,
                "kwargs": spec.kwargs,
                "source": spec.source,
                "synced": False,
            }
        )
    return rows


def shown(moment: datetime | None, zone: str) -> str:
    """A time as the schedule's own clock shows it: cron times are wall-clock times there."""
    if moment is None:
        return "-"
    try:
        tz: ZoneInfo | None = parse_zone(zone)
    except CronError:
        tz = None
    local = moment.astimezone(tz) if tz and moment.tzinfo else moment
    return f"{local:%Y-%m-%d %H:%M:%S %Z}".strip()


class Command(QueueCommand):
    help = "List the recurring jobs (schedules): cron, time zone, next and last run."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Machine-readable output.")
        parser.add_argument(
            "--sync",
            action="store_true",
            help="First sync code and settings to the table, as a starting supervisor does.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        alias = get_settings().database
        if options["sync"]:
            declared = declared_schedules()
            for problem in declared.problems:
                self.stderr.write(f"{problem.message} ({problem.id}) Not synced.")
            report = sync(declared, alias)
            if not options["json"]:
                self.report(f"Sync: {report}")
        rows = schedule_rows(alias)
        unsynced = unsynced_rows({row["key"] for row in rows})
        if options["json"]:
            self.stdout.write(json.dumps({"schedules": rows + unsynced}, default=str))
            return
        if not rows and not unsynced:
            self.stdout.write("No schedules.")
            return
        for row in rows + unsynced:
            self.stdout.write(self.line(row))

    def line(self, row: dict[str, Any]) -> str:
        words = f" ({row['cron_in_words']})" if row["cron_in_words"] else ""
        if not row["synced"]:
            return (
                f"{row['key']}: {row['job']} at '{row['cron']}'{words} {row['timezone']}; "
                "declared, not synced yet: a starting supervisor syncs it (or run "
                "`schedules --sync`)"
            )
        if row["removed_at"]:
            state = "disabled: removed from code"
        elif not row["enabled"]:
            state = "disabled"
        else:
            state = f"next {shown(row['next_run_at'], row['timezone'])}"
        last = "never run"
        if row["last_run_at"]:
            status = row["last_job_status"] or "deleted"
            when = shown(row["last_run_at"], row["timezone"])
            last = f"last {when} job {row['last_job_id']} ({status})"
        return (
            f"{row['key']}: {row['job']} at '{row['cron']}'{words} {row['timezone']}; "
            f"{state}; {last}"
        )
