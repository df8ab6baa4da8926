"""`manage.py purgejobs --days 7`: delete finished jobs, in batches."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from ...conf import get_settings
from ...databases.flow_keys import prune_keys
from ...operations import purge, purge_batches, purgeable
from ...states import FINISHED
from ..base import MAX_DAYS, QueueCommand, bounded_float, bounded_int


class Command(QueueCommand):
    help = (
        "Delete finished jobs (completed, dead, cancelled) that finished more than --days ago, "
        "in batches so a large purge never holds a long lock."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=bounded_float(MAX_DAYS),
            required=True,
            help="Age in days of the jobs to delete.",
        )
        parser.add_argument(
            "--status",
            action="append",
            choices=[s.value for s in FINISHED],
            help="Only this status (repeatable). Default: all finished statuses.",
        )
        parser.add_argument("--queue", help="Only jobs of this queue.")
        parser.add_argument("--batch-size", type=bounded_int(100_000), default=1000)
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be deleted; delete nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["days"] < 0:
            raise CommandError("--days must not be negative.")
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        statuses = options["status"] or [s.value for s in FINISHED]
        cutoff = timezone.now() - timedelta(days=options["days"])
        queryset = purgeable(older_than=cutoff, statuses=statuses, queue=options["queue"])
        scope = f"{'/'.join(statuses)} jobs finished before {cutoff:%Y-%m-%d %H:%M:%S %Z}"
        if options["queue"]:
            scope += f" in queue {options['queue']!r}"
        if options["dry_run"]:
            self.report(f"Would delete {queryset.count()} {scope}.")
            return
        deleted = purge(queryset, batch_size=options["batch_size"])
        self.report(f"Deleted {deleted} {scope}.")
        keys = prune_keys(get_settings().database, cutoff)
        if keys:
            self.report(f"Deleted {keys} flow-control key rows unused since the cutoff.")
        batches = purge_batches(cutoff)
        if batches:
            self.report(f"Deleted {batches} finished batches with no job left.")
