"""`manage.py wagtail_it STEP...` drives the integration site, one Django start for many
steps: a phase name runs that phase of editor actions, `snapshot` prints the state Wagtail's
tasks maintain as one line of JSON, `wait` waits until workers running beside it are idle,
`admin` opens the queue's pages in the Django admin."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_sqlqueue.models import Job

from ...editor import PHASES, editor_client, visit_queue_admin
from ...snapshot import snapshot

UNFINISHED = ["pending", "running", "failed"]
WAIT_SECONDS = 60


def wait_for_workers(timeout: float = WAIT_SECONDS) -> None:
    """Wait until running workers have finished every job, as an editor pauses between tasks."""
    deadline = time.monotonic() + timeout
    while Job.objects.filter(status__in=UNFINISHED).exists():
        if time.monotonic() > deadline:
            left = list(Job.objects.filter(status__in=UNFINISHED).values_list("name", "status"))
            raise CommandError(f"workers left jobs unfinished after {timeout}s: {left}")
        time.sleep(0.1)


class Command(BaseCommand):
    help = "Drive the Wagtail integration site: editor actions, waits and snapshots."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("steps", nargs="+", choices=[*PHASES, "snapshot", "wait", "admin"])

    def handle(self, *args: Any, steps: list[str], **options: Any) -> None:
        client = None
        for step in steps:
            if step == "snapshot":
                self.stdout.write(json.dumps(snapshot()))
            elif step == "wait":
                wait_for_workers()
            elif step == "admin":
                client = client or editor_client()
                visit_queue_admin(client)
            else:
                client = client or editor_client()
                PHASES[step](client)
