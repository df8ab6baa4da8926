"""`manage.py jobstatus`: how many jobs are in each status."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from ...queries import running_jobs, status_summary, status_summary_by_queue, worker_rows
from ...states import format_summary
from ...words import counted
from ..base import QueueCommand


class Command(QueueCommand):
    help = "Print the number of jobs in each status, overall or per queue."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queue", help="Only this queue.")
        parser.add_argument("--by-queue", action="store_true", help="One line per queue.")
        parser.add_argument("--json", action="store_true", help="Machine-readable output.")
        parser.add_argument(
            "--workers", action="store_true", help="Also list live worker processes."
        )
        parser.add_argument(
            "--running",
            action="store_true",
            help="Also list running jobs: worker, start, progress, cancel requests.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.print_counts(options)
        if options["workers"]:
            self.print_workers(options["json"])
        if options["running"]:
            self.print_running(options["json"])

    def print_running(self, as_json: bool) -> None:
        rows = running_jobs()
        if as_json:
            self.stdout.write(json.dumps({"running": rows}, default=str))
            return
        if not rows:
            self.stdout.write("No running jobs.")
            return
        for row in rows:
            progress = f", {row['progress']}%" if row["progress"] is not None else ""
            message = f" ({row['progress_message']})" if row["progress_message"] else ""
            cancel = ", cancel requested" if row["cancel_requested_at"] else ""
            started = f"{row['started_at']:%H:%M:%S}" if row["started_at"] else "?"
            self.stdout.write(
                f"job {row['id']} {row['name']} attempt {row['attempts']} on "
                f"{row['lease_owner']} since {started}{progress}{message}{cancel}"
            )

    def print_workers(self, as_json: bool) -> None:
        rows = worker_rows()
        if as_json:
            self.stdout.write(json.dumps({"workers": rows}, default=str))
            return
        if not rows:
            self.stdout.write("No workers.")
            return
        for row in rows:
            state = " (stale)" if row["stale"] else ""
            job = f"job {row['current_job_id']}" if row["current_job_id"] else "idle"
            if row["held"] > 1:
                job += f" ({row['held']} running jobs held)"
            self.stdout.write(
                f"{row['id']}{state}: pid {row['pid']}, queues {row['queues'] or 'all'}, "
                f"{job}, {counted(row['jobs_done'], 'job')} done, "
                f"last seen {row['last_seen_at']:%H:%M:%S}"
            )

    def print_counts(self, options: dict[str, Any]) -> None:
        if options["by_queue"]:
            summary: Any = status_summary_by_queue()
            if options["json"]:
                self.stdout.write(json.dumps(summary, sort_keys=True))
            elif not summary:
                self.stdout.write("No jobs.")
            else:
                for queue, counts in summary.items():
                    self.stdout.write(f"{queue}: {format_summary(counts)}")
            return
        summary = status_summary(options["queue"])
        if options["json"]:
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write(format_summary(summary))
