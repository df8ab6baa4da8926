"""`manage.py jobhealth`: exit 0 when the queue is being worked, non-zero with one line saying
why not. Meant for probes and cron checks (docs/deployment.md#health-probes)."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import CommandParser
from django.db import DatabaseError, connections

from ...conf import get_settings
from ...metrics.state import oldest_waiting
from ...models import Worker
from ...queries import stale_before
from ..base import (
    MAX_SECONDS,
    ReportingCommand,
    bounded_float,
    missing_tables,
    tables_missing_error,
)

#: Exit statuses, one per reason (documented in docs/commands.md).
NO_WORKER = 1
DATABASE_DOWN = 2
BACKLOG_TOO_OLD = 3


class Command(ReportingCommand):
    help = (
        "Exit 0 if the database answers, a live worker takes the queue's jobs and no due job "
        "has waited too long; otherwise exit non-zero with the reason."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--max-pending-age",
            type=bounded_float(MAX_SECONDS),
            default=None,
            metavar="S",
            help="Unhealthy when a due job has waited longer than S seconds to start.",
        )
        parser.add_argument(
            "--queue", default=None, help="Only this queue (its workers and its jobs)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        code, line = self.verdict(options["queue"], options["max_pending_age"])
        if code:
            self.stderr.write(f"unhealthy: {line}")
            sys.exit(code)
        self.report(f"healthy: {line}")

    def verdict(self, queue: str | None, max_age: float | None) -> tuple[int, str]:
        alias = get_settings().database
        try:
            if missing := missing_tables(alias):
                return DATABASE_DOWN, tables_missing_error(alias, missing).args[0]
            workers = self.live_workers(alias, queue)
            waited = oldest_waiting(alias, queue=queue)
        except DatabaseError as exc:
            connections[alias].close()
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return DATABASE_DOWN, f"database {alias!r} does not answer: {reason}"
        where = f" for queue {queue!r}" if queue else ""
        if not workers:
            return NO_WORKER, f"no live worker heartbeat{where}"
        oldest = max(waited.values(), default=None)
        if max_age is not None and oldest is not None and oldest > max_age:
            slowest = max(waited, key=lambda name: waited[name])
            return BACKLOG_TOO_OLD, (
                f"a due job in queue {slowest!r} has waited {oldest:.0f} s (more than "
                f"{max_age:g} s)"
            )
        backlog = f"oldest due job waited {oldest:.0f} s" if oldest is not None else "no backlog"
        return 0, f"{workers} live worker(s){where}, {backlog}"

    @staticmethod
    def live_workers(alias: str, queue: str | None) -> int:
        rows = Worker.objects.using(alias).filter(last_seen_at__gte=stale_before())
        if queue is None:
            return rows.count()
        served = rows.values_list("queues", flat=True)
        return sum(1 for queues in served if not queues or queue in queues.split(","))
