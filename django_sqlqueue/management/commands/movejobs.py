"""`manage.py movejobs --from old_sqlite`: move waiting jobs to the queue database."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from ...conf import get_settings
from ...states import FINISHED
from ...words import counted
from ..base import QueueCommand, bounded_int, require_tables
from ..moving import WAITING, MoveRefused, move_jobs


class Command(QueueCommand):
    help = (
        "Move jobs from another database (an old SQLite queue, say) to the queue database, "
        "ids kept: pending and failed ones, and with --include-finished the finished ones "
        "too. Refuses while workers run on the source."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--from", dest="source", required=True, help="DATABASES alias to move jobs from."
        )
        parser.add_argument(
            "--to",
            dest="destination",
            default=None,
            help="DATABASES alias to move them to (default: SQLQUEUE['DATABASE']).",
        )
        parser.add_argument(
            "--include-finished",
            action="store_true",
            help="Move completed, dead and cancelled jobs too (their history).",
        )
        parser.add_argument(
            "--renumber",
            action="store_true",
            help="Give the moved jobs new ids (when the destination already uses theirs).",
        )
        parser.add_argument("--batch-size", type=bounded_int(100_000), default=500)
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be moved; move nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["source"]
        destination = options["destination"] or get_settings().database
        for alias in (source, destination):
            if alias not in settings.DATABASES:
                raise CommandError(
                    f"{alias!r} is not in DATABASES; use one of: {', '.join(settings.DATABASES)}."
                )
        require_tables(destination)
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        statuses = [*WAITING, *(FINISHED if options["include_finished"] else ())]
        try:
            report = move_jobs(
                source,
                destination,
                statuses=statuses,
                renumber=options["renumber"],
                batch_size=options["batch_size"],
                dry_run=options["dry_run"],
            )
        except MoveRefused as exc:
            raise CommandError(str(exc)) from None
        counts = ", ".join(
            f"{status} {report.moved[status]}" for status in statuses if report.moved.get(status)
        )
        ids = "new ids" if options["renumber"] else "ids kept"
        verb = "Would move" if options["dry_run"] else "Moved"
        self.report(
            f"{verb} {counted(report.total, 'job')} from {source!r} to {destination!r}"
            f"{f' ({counts})' if counts else ''}, {ids}."
        )
        if report.already_moved:
            self.report(
                f"{report.already_moved} jobs had been copied by an earlier run; removed from "
                f"{source!r}."
            )
        if report.key_taken:
            self.stderr.write(
                f"{len(report.key_taken)} jobs left in {source!r}: {destination!r} already "
                "holds a job with the same idempotency key (an enqueue there would have "
                f"returned that job). Their ids: {', '.join(map(str, report.key_taken[:20]))}"
                f"{' …' if len(report.key_taken) > 20 else ''}."
            )
