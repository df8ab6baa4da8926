"""`manage.py jobs list|show|requeue|cancel|run-now|purge`: find jobs, read one, and act on
many from the command line, with the admin actions' operations and status rules."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...conf import get_settings
from ...queries import COUNT_CAP, bounded_count, jobs
from ...references import format_reference
from ...words import counted
from ..base import QueueCommand, bounded_int
from ..job_display import dumps, job_document, list_lines, listing, show_lines
from ..job_filters import JobFilters, add_filter_arguments, job_id
from ..job_operations import CANCEL_JOBS, OPERATIONS, PURGE, STOP_VALUES, BulkOperation, run

MAX_LIMIT = 10_000


class Command(QueueCommand):
    help = (
        "List jobs, show one, or requeue, cancel, run now or purge the jobs that match "
        "filters, in chunks of 1,000: the admin's actions from the command line."
    )
    # call_command(..., stdin=...): where the confirmation is read from (tests).
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        listing_ = actions.add_parser("list", help="The newest jobs that match the filters.")
        add_filter_arguments(listing_)
        listing_.add_argument(
            "--limit",
            type=bounded_int(MAX_LIMIT),
            default=50,
            help=f"Jobs listed at most (default 50, at most {MAX_LIMIT:,}).",
        )
        listing_.add_argument("--json", action="store_true", help="Machine-readable output.")
        show = actions.add_parser("show", help="Every field of one job, its dependencies.")
        show.add_argument("id", type=job_id, metavar="ID")
        show.add_argument("--json", action="store_true", help="Machine-readable output.")
        helps = {
            "requeue": "Back to pending, due now, attempts reset (dead, cancelled, failed, "
            "completed jobs).",
            "cancel": "Cancel waiting, pending and failed jobs; ask running ones to stop.",
            "run-now": "Make pending and failed jobs due now (attempts kept).",
            "purge": "Delete finished jobs (completed, dead, cancelled) for good.",
        }
        for key, text in helps.items():
            sub = actions.add_parser(key, help=text)
            add_filter_arguments(sub, age="finished" if key == "purge" else "created")
            sub.add_argument(
                "--dry-run", action="store_true", help="Count what would change; change nothing."
            )
            sub.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")

    def handle(self, *args: Any, **options: Any) -> None:
        alias = get_settings().database
        action = options["action"]
        if action == "show":
            self.show(alias, options)
            return
        try:
            filters = JobFilters.from_options(options)
            if action == "list":
                self.list(alias, filters, options)
            else:
                self.act(OPERATIONS[action], alias, filters, options)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc

    def list(self, alias: str, filters: JobFilters, options: dict[str, Any]) -> None:
        if options["limit"] < 1:
            raise CommandError("--limit must be at least 1.")
        rows, count, capped = listing(filters.apply(jobs(alias)), options["limit"])
        if options["json"]:
            self.stdout.write(dumps({"jobs": rows, "count": count, "capped": capped}))
        elif not rows:
            self.stdout.write("No jobs match." if filters else "No jobs.")
        else:
            self.stdout.write("\n".join(list_lines(rows, count, capped)))

    def show(self, alias: str, options: dict[str, Any]) -> None:
        wanted = JobFilters(ids=(options["id"],))
        job = wanted.apply(jobs(alias)).first()
        if job is None:
            raise CommandError(f"No job {format_reference(*options['id'])}.")
        document = job_document(job, alias)
        if options["json"]:
            self.stdout.write(dumps(document))
        else:
            self.stdout.write("\n".join(show_lines(document, tracebacks=self.verbosity > 1)))

    def act(
        self, operation: BulkOperation, alias: str, filters: JobFilters, options: dict[str, Any]
    ) -> None:
        if not filters:
            raise CommandError(
                f"`jobs {operation.key}` needs at least one filter (--status, --queue, --name, "
                "--older-than, --id): it does not act on every job at once."
            )
        selection = operation.selection(filters, alias)
        age = "finished" if operation is PURGE else "created"
        scope = f"status {'/'.join(operation.statuses(filters))}"
        scope = ", ".join(filter(None, [scope, filters.describe(age=age)]))
        # Only the jobs there are now: one enqueued meanwhile is not what was counted.
        newest = selection.order_by("-id").values_list("id", flat=True).first()
        if newest is None:
            self.report(f"No jobs to {operation.key} ({scope}).")
            return
        selection = selection.filter(id__lte=newest)
        counted_ = selection
        running = ""
        if operation is CANCEL_JOBS:
            # Cancelled at once, and asked to stop: counted apart, as the outcome says them.
            counted_ = selection.exclude(status__in=STOP_VALUES)
            stopping = bounded_count(selection.filter(status__in=STOP_VALUES), COUNT_CAP)
            if stopping:
                running = f"; {_number(stopping, 'running job')} would be asked to stop"
        total = _number(bounded_count(counted_, COUNT_CAP))
        if options["dry_run"]:
            self.report(f"{operation.would.format(jobs=total)}{running} ({scope}).")
            return
        question = f"{operation.ask.format(jobs=total)}{running} ({scope})"
        if not options["yes"] and not self.confirm(question, options):
            self.report("Nothing changed.")
            return
        outcome = run(operation, selection)
        done = operation.done.format(jobs=counted(outcome.changed, "job"))
        if operation is CANCEL_JOBS and outcome.stopping:
            done = f"{done[:-1]}; {counted(outcome.stopping, 'running job')} asked to stop."
        if outcome.raced:
            # Read as matching, changed before its UPDATE: a worker came first, or (cancel)
            # it was cancelled with a job it waited for.
            them = "it" if outcome.raced == 1 else "them"
            done += (
                f" Skipped {counted(outcome.raced, 'job')} whose status changed meanwhile; "
                f"nothing was done to {them}."
            )
        self.report(done)

    def confirm(self, question: str, options: dict[str, Any]) -> bool:
        stdin = options.get("stdin") or sys.stdin
        if not getattr(stdin, "isatty", lambda: False)():
            raise CommandError(
                f"{question}? Not asked: standard input is not a terminal. Add --yes to go "
                "ahead, or --dry-run to only count."
            )
        self.stdout.write(f"{question}? [y/N] ", ending="")
        self.stdout.flush()
        return stdin.readline().strip().lower() in ("y", "yes")


def _number(count: int, noun: str = "job") -> str:
    """`12 jobs`, or `more than 10,000 jobs` past the bounded count's cap."""
    if count > COUNT_CAP:
        return f"more than {COUNT_CAP:,} {noun}s"
    return counted(count, noun)
