"""`manage.py runworkers -n 4`: the supervisor and its worker processes."""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import OperationalError, connections

from ...conf import get_settings
from ...models import Job, Worker
from ...supervisor import Supervisor
from ...worker import WorkerOptions


def _queues(value: str) -> list[str]:
    queues = [q.strip() for q in value.split(",") if q.strip()]
    if not queues:
        raise ValueError("empty queue list")
    return queues


class Command(BaseCommand):
    help = "Run a supervisor with N worker processes that claim and run jobs."
    # Checks run in handle(): some of Django's read database features, and a database that
    # is not up yet must not stop the supervisor from starting and waiting for it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-n", "--workers", type=int, default=1, help="Worker processes.")
        parser.add_argument(
            "--queues", type=_queues, default=None, help="Comma-separated queues (default: all)."
        )
        parser.add_argument(
            "--burst", action="store_true", help="Exit 0 once no job is ready to run."
        )
        parser.add_argument(
            "--max-jobs", type=int, default=None, help="Replace a worker process after N jobs."
        )
        parser.add_argument(
            "--grace-period",
            type=float,
            default=None,
            help="Seconds running jobs get to finish after SIGTERM (default: GRACE_PERIOD).",
        )
        parser.add_argument(
            "--batch-size", type=int, default=None, help="Jobs claimed per round trip."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["workers"] < 1:
            raise CommandError("-n/--workers must be at least 1.")
        if options["max_jobs"] is not None and options["max_jobs"] < 1:
            raise CommandError("--max-jobs must be at least 1.")
        if options["grace_period"] is not None and options["grace_period"] < 0:
            raise CommandError("--grace-period must not be negative.")
        if options["batch_size"] is not None and options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        self.configure_logging(options["verbosity"])
        if not options.get("skip_checks"):
            try:
                self.check()
            except OperationalError as exc:
                logging.getLogger("django_sqlqueue").warning(
                    "System checks could not reach the database (%s); starting anyway", exc
                )
        conf = get_settings()
        self.check_tables(conf.database)
        supervisor = Supervisor(
            options["workers"],
            WorkerOptions(
                queues=tuple(options["queues"] or ()),
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                batch_size=options["batch_size"],
            ),
            grace_period=options["grace_period"],
            conf=conf,
        )
        code = supervisor.run()
        if code:
            sys.exit(code)

    def check_tables(self, alias: str) -> None:
        """Fail at once when the tables are missing; an unreachable database is waited for."""
        try:
            with connections[alias].cursor() as cursor:
                tables = connections[alias].introspection.table_names(cursor)
        except OperationalError as exc:
            logging.getLogger("django_sqlqueue").warning(
                "Database %r is not reachable yet (%s); workers will keep trying", alias, exc
            )
            return
        missing = {Job._meta.db_table, Worker._meta.db_table} - set(tables)
        if missing:
            raise CommandError(
                f"The job tables ({', '.join(sorted(missing))}) do not exist in database "
                f"{alias!r}. Run `manage.py migrate` first."
            )

    def configure_logging(self, verbosity: int) -> None:
        """Log to stderr unless the project's LOGGING already handles our logger."""
        logger = logging.getLogger("django_sqlqueue")
        if not logger.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(
                logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(message)s")
            )
            logger.addHandler(handler)
        if logger.level == logging.NOTSET or verbosity > 1:
            logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
