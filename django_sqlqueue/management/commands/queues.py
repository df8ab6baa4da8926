"""`manage.py queues [list]|pause|resume`: see the queues, stop and restart claims from one."""

from __future__ import annotations

import getpass
import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...conf import get_settings
from ...metrics.queues import queue_rows
from ...operations import pause_queue, resume_queue
from ..base import QueueCommand


class Command(QueueCommand):
    help = (
        "List the queues (jobs per status, paused or not), or pause and resume one: once "
        "`queues pause` has returned, no job of the queue starts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        # `queues` alone lists them, as `queues list` does.
        actions = parser.add_subparsers(dest="action")
        listing = actions.add_parser("list", help="Every queue with jobs or a paused state.")
        listing.add_argument("--json", action="store_true", help="Machine-readable output.")
        pause = actions.add_parser("pause", help="Stop workers claiming from these queues.")
        pause.add_argument("names", nargs="+", metavar="QUEUE")
        pause.add_argument("--reason", default="", help="Shown in `queues list` and the admin.")
        resume = actions.add_parser("resume", help="Let workers claim from these queues again.")
        resume.add_argument("names", nargs="+", metavar="QUEUE")

    def handle(self, *args: Any, **options: Any) -> None:
        alias = get_settings().database
        action = options.get("action") or "list"
        if action == "list":
            self.list(alias, options.get("json", False))
            return
        for name in options["names"]:
            try:
                if action == "pause":
                    changed = pause_queue(name, by=_user(), reason=options["reason"], using=alias)
                    self.report(
                        f"Paused queue {name!r}." if changed else f"Queue {name!r} was paused."
                    )
                else:
                    changed = resume_queue(name, using=alias)
                    self.report(
                        f"Resumed queue {name!r}." if changed else f"Queue {name!r} was not paused."
                    )
            except ValueError as exc:  # InvalidJobError too: a bad name, a reason too long
                raise CommandError(str(exc)) from exc

    def list(self, alias: str, as_json: bool) -> None:
        rows = queue_rows(alias)
        if as_json:
            self.stdout.write(json.dumps({"queues": [row.as_dict() for row in rows]}))
            return
        if not rows:
            self.stdout.write("No queues.")
            return
        for row in rows:
            counts = ", ".join(f"{status}: {n}" for status, n in row.counts.items() if n)
            state = "active"
            if row.paused_at is not None:
                state = f"PAUSED since {row.paused_at:%Y-%m-%d %H:%M:%S}"
                if row.paused_by:
                    state += f" by {row.paused_by}"
                if row.reason:
                    state += f" ({row.reason})"
            self.stdout.write(f"{row.queue}: {state}; {counts or 'no jobs'}")


def _user() -> str:
    try:
        return f"{getpass.getuser()} (manage.py)"
    except (KeyError, OSError):
        return "manage.py"
