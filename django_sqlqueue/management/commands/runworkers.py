"""`manage.py runworkers -n 4`: the supervisor and its worker processes."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import OperationalError, connections

from ...checks import check_database, check_job_handlers
from ...conf import MAX_CONCURRENCY, get_settings
from ...logs import JSONFormatter
from ...metrics import prometheus
from ...metrics.server import PortUnavailable
from ...runtime.supervisor import Supervisor
from ...runtime.worker import WorkerOptions
from ...tasks import tasks_summary
from ..base import (
    MAX_COUNT,
    MAX_SECONDS,
    bounded_float,
    bounded_int,
    missing_tables,
    tables_missing_error,
)
from ..reload import reloadable, run_with_reload


def _queues(value: str) -> list[tuple[str, int | None]]:
    """`mail,default`, or `webhooks:50,reports:1`: queue names, each perhaps with the slots of
    worker processes of its own (runtime/worker_plans.py)."""
    queues: list[tuple[str, int | None]] = []
    for item in value.split(","):
        name, colon, slots = (part.strip() for part in item.partition(":"))
        if not name:
            if colon:
                raise argparse.ArgumentTypeError(f"{item.strip()!r} names no queue")
            continue
        if not colon:
            queues.append((name, None))
            continue
        try:
            count = int(slots)
        except ValueError:
            count = 0
        if not 1 <= count <= MAX_CONCURRENCY:
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r}: a queue's slots must be an integer from 1 to "
                f"{MAX_CONCURRENCY}, as in webhooks:50"
            )
        queues.append((name, count))
    if not queues:
        raise argparse.ArgumentTypeError("empty queue list")
    return queues


def _queue_names(value: str) -> list[str]:
    """`reports,exports`: queue names (no slots)."""
    names = list(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))
    if not names:
        raise argparse.ArgumentTypeError("empty queue list")
    if any(":" in name for name in names):
        raise argparse.ArgumentTypeError("queues left out take no slots (no ':N')")
    return names


def _setting(name: str) -> str:
    """A setting's value as --help shows it: the project's, or '?' if the settings are wrong
    (the command then says why; its help must still print)."""
    try:
        return f"{getattr(get_settings(), name):g}"
    except Exception:
        return "?"


class Command(BaseCommand):
    help = "Run a supervisor with N worker processes that claim and run jobs."
    # Checks run in handle(): some of Django's read database features, and a database that
    # is not up yet must not stop the supervisor from starting and waiting for it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        # Django adds --skip-checks only to commands whose checks it runs itself.
        parser.add_argument(
            "--skip-checks",
            action="store_true",
            help="Do not run the system checks before starting (the database may not be up yet).",
        )
        parser.add_argument(
            "-n",
            "--workers",
            type=bounded_int(1000),
            default=1,
            help="Worker processes (default: 1).",
        )
        parser.add_argument(
            "--queues",
            type=_queues,
            default=None,
            help="Comma-separated queues (default: all); queue:N gives a queue worker processes "
            "of its own with N slots each.",
        )
        parser.add_argument(
            "--exclude-queues",
            type=_queue_names,
            default=None,
            metavar="QUEUES",
            help="Comma-separated queues not to serve: every other queue is (not with --queues).",
        )
        parser.add_argument(
            "--burst", action="store_true", help="Exit 0 once no job is ready to run."
        )
        parser.add_argument(
            "--max-jobs",
            type=bounded_int(MAX_COUNT),
            default=None,
            help="Replace a worker process after N jobs.",
        )
        parser.add_argument(
            "--stop-after",
            type=bounded_int(MAX_COUNT),
            default=None,
            metavar="N",
            help="Exit 0 once the workers have run N jobs in all (not one more).",
        )
        parser.add_argument(
            "--grace-period",
            type=bounded_float(MAX_SECONDS),
            default=None,
            help="Seconds running jobs get to finish after SIGTERM (default: GRACE_PERIOD, "
            f"{_setting('grace_period')} s).",
        )
        parser.add_argument(
            "--batch-size",
            type=bounded_int(10_000),
            default=None,
            help=f"Jobs claimed per round trip (default: BATCH_SIZE, {_setting('batch_size')}).",
        )
        parser.add_argument(
            "-c",
            "--concurrency",
            type=bounded_int(MAX_CONCURRENCY),
            default=None,
            help="Jobs each worker process runs at once, in threads (default: CONCURRENCY, "
            f"{_setting('concurrency')}).",
        )
        parser.add_argument(
            "--reload",
            action="store_true",
            help="Development only: restart the supervisor and its workers when code changes.",
        )
        parser.add_argument(
            "--no-scheduler",
            action="store_true",
            help="Do not enqueue recurring jobs (schedules) from this supervisor.",
        )
        parser.add_argument(
            "--metrics-port",
            type=bounded_int(65535),
            default=None,
            metavar="PORT",
            help="Serve Prometheus /metrics and /healthz on this port (needs the metrics extra).",
        )
        parser.add_argument(
            "--metrics-host",
            default="127.0.0.1",
            metavar="HOST",
            help="Address the metrics port listens on (default: 127.0.0.1; 0.0.0.0 for all).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["workers"] < 1:
            raise CommandError("-n/--workers must be at least 1.")
        if options["max_jobs"] is not None and options["max_jobs"] < 1:
            raise CommandError("--max-jobs must be at least 1.")
        if options["stop_after"] is not None and options["stop_after"] < 1:
            raise CommandError("--stop-after must be at least 1.")
        if options["grace_period"] is not None and options["grace_period"] < 0:
            raise CommandError("--grace-period must not be negative.")
        if options["batch_size"] is not None and options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        if options["concurrency"] is not None and options["concurrency"] < 1:
            raise CommandError("-c/--concurrency must be at least 1.")
        if options["reload"] and (options["burst"] or options["stop_after"] is not None):
            raise CommandError("--reload runs until stopped: drop --burst and --stop-after.")
        if options["reload"] and not reloadable():
            raise CommandError("--reload works from the command line: manage.py runworkers.")
        if options["queues"] and options["exclude_queues"]:
            raise CommandError(
                "--queues and --exclude-queues do not combine: name the queues to serve, or "
                "the queues to leave out."
            )
        metrics_address = self.metrics_address(options)
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
        self.report_database_checks(conf.database)
        named = options["queues"] or []
        excluded = tuple(options["exclude_queues"] or ())
        # A queue's own slots: the command line's, else the QUEUES setting's (for the queues
        # served: worker_plans.py leaves out the others).
        queue_slots = {**conf.queues, **{name: n for name, n in named if n is not None}}
        supervisor = Supervisor(
            options["workers"],
            WorkerOptions(
                queues=tuple(dict.fromkeys(name for name, _ in named)),
                excluded=excluded,
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                batch_size=options["batch_size"],
                concurrency=options["concurrency"] or conf.concurrency,
            ),
            grace_period=options["grace_period"],
            conf=conf,
            stop_after=options["stop_after"],
            tasks_line=tasks_summary(getattr(settings, "TASKS", None)),
            scheduler=not options["no_scheduler"],
            metrics_address=metrics_address,
            queue_slots=queue_slots,
        )
        try:
            if options["reload"]:
                connections.close_all()  # the child opens its own; this process only waits
                code = run_with_reload(supervisor.run)
            else:
                code = supervisor.run()
        except PortUnavailable as exc:
            raise CommandError(str(exc)) from None
        if code:
            sys.exit(code)

    def metrics_address(self, options: dict[str, Any]) -> tuple[str, int] | None:
        port = options["metrics_port"]
        if port is None:
            return None
        if not 0 <= port <= 65535:
            raise CommandError("--metrics-port must be from 0 to 65535.")
        if not prometheus.available():
            raise CommandError(
                "--metrics-port needs prometheus-client: pip install 'django-sqlqueue[metrics]'."
            )
        return options["metrics_host"], port

    def check_tables(self, alias: str) -> None:
        """Fail at once when the tables are missing; an unreachable database is waited for."""
        try:
            missing = missing_tables(alias)
        except OperationalError as exc:
            logging.getLogger("django_sqlqueue").warning(
                "Database %r is not reachable yet (%s); workers will keep trying", alias, exc
            )
            return
        if missing:
            raise tables_missing_error(alias, missing)

    def report_database_checks(self, alias: str) -> None:
        """Log what the queue database's own checks say (a connection pooler that would swallow
        the wake-ups, say): Django runs them only with `check --database` and `migrate`."""
        logger = logging.getLogger("django_sqlqueue")
        for message in [
            *check_database(databases=[alias]),
            *check_job_handlers(databases=[alias]),
        ]:
            hint = f" ({message.hint})" if message.hint else ""
            logger.warning("%s: %s%s", message.id, message.msg, hint)

    def configure_logging(self, verbosity: int) -> None:
        """Log to stderr unless the project's LOGGING already handles our logger."""
        logger = logging.getLogger("django_sqlqueue")
        if not logger.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(
                JSONFormatter()
                if get_settings().json_logs
                else logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(message)s")
            )
            logger.addHandler(handler)
        if logger.level == logging.NOTSET or verbosity > 1:
            logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
