"""`manage.py enqueue_demo_jobs`: put some of each of the shop's jobs on the queue."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ...enqueuers import enqueue_batch, enqueue_email, enqueue_report, enqueue_sync


class Command(BaseCommand):
    help = "Enqueue welcome emails, sales reports and flaky inventory syncs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--emails", type=int, default=3)
        parser.add_argument("--reports", type=int, default=1)
        parser.add_argument("--syncs", type=int, default=4)
        parser.add_argument("--batch", type=int, default=0, help="Also a mixed batch of N.")

    def handle(self, *args: Any, **options: Any) -> None:
        jobs = []
        for count, enqueuer in (
            (options["emails"], enqueue_email),
            (options["reports"], enqueue_report),
            (options["syncs"], enqueue_sync),
        ):
            for _ in range(count):
                jobs.extend(enqueuer())
        if options["batch"]:
            jobs.extend(enqueue_batch(options["batch"]))
        self.stdout.write(f"Enqueued {len(jobs)} jobs.")
