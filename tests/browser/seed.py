"""A small, realistic queue of the example project's jobs, for the browser test and the
screenshots in docs/admin.md.

Only the jobs of example_project/shop/jobs.py are registered while it is in use (the test
suite's own jobs, with names such as `tests.segfault`, would fill the name filter), and every
row uses their names, queues and arguments.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.utils import timezone

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.registry import JobHandler, registry
from django_sqlqueue.states import Status

EXAMPLE_JOBS = Path(__file__).resolve().parents[2] / "example_project" / "shop" / "jobs.py"

WELCOME, REPORT, SYNC = "shop.send_welcome_email", "shop.build_sales_report", "shop.sync_inventory"

RUNNER = "/srv/shop/.venv/lib/python3.12/site-packages/django_sqlqueue/runtime/runner.py"
TRACEBACK = """Traceback (most recent call last):
  File "{runner}", line 84, in run
    result = self.handler.func(*args, **job.kwargs)
  File "/srv/shop/shop/jobs.py", line 65, in sync_inventory
    raise SupplierUnavailable(f"supplier API timed out while syncing {{sku}}")
shop.jobs.SupplierUnavailable: supplier API timed out while syncing {sku}
"""
CUSTOMERS = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia")
SKUS = ("TEA-EARLGREY-250", "TEA-SENCHA-100", "COF-ETHIOPIA-500", "MUG-STONE-01")
#: The failed job's error: longer than the job list can show in a narrow column.
FAILED_ERROR = (
    "smtplib.SMTPServerDisconnected: Connection unexpectedly closed by mail.example.org:587 "
    "while sending the welcome email to linus@example.org"
)


@contextmanager
def example_jobs_only() -> Iterator[list[str]]:
    """Register the example project's jobs instead of the test suite's, for the duration."""
    saved = {name: registry.get(name) for name in registry.names()}
    for name in saved:
        registry.unregister(name)
    try:
        spec = importlib.util.spec_from_file_location("example_shop_jobs", EXAMPLE_JOBS)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # its @job decorators register the shop's jobs
        names = registry.names()
        assert names == sorted(
            h.name for h in vars(module).values() if isinstance(h, JobHandler)
        ), names
        yield names
    finally:
        for name in registry.names():
            registry.unregister(name)
        for handler in saved.values():
            registry.register(handler)


def attempt(
    number: int, worker: str, start: datetime, seconds: float, outcome: str, sku: str = ""
) -> dict[str, Any]:
    error = {
        "error": f"shop.jobs.SupplierUnavailable: supplier API timed out while syncing {sku}",
        "lost": f"Worker {worker} stopped renewing its lease (it crashed, was killed or hung); "
        "the attempt is counted as failed.",
        "timeout": "TimeoutError: job ran longer than its 120s timeout",
    }.get(outcome, "")
    return {
        "attempt": number,
        "worker": worker,
        "started_at": start.isoformat(),
        "finished_at": (start + timedelta(seconds=seconds)).isoformat(),
        "outcome": outcome,
        "error": error,
        "traceback": TRACEBACK.format(runner=RUNNER, sku=sku) if outcome == "error" else "",
        "exception": "shop.jobs.SupplierUnavailable" if outcome == "error" else "",
    }


@dataclass
class Seeded:
    dead_recent: Job  # sync_inventory: dead, requeued once, dead again (two runs)
    dead_recent_other: Job  # build_sales_report: dead on a timeout
    dead_old: Job
    failed: Job
    running: Job
    pending: list[Job]
    retried: Job  # welcome email: failed once, then completed in 4.2 ms


def seed_queue(now: datetime | None = None) -> Seeded:
    now = now or timezone.now()

    def add(status: str, name: str, queue: str, age: timedelta, **fields: Any) -> Job:
        created = now - age
        values: dict[str, Any] = {
            "name": name,
            "queue": queue,
            "status": status,
            "created_at": created,
            "run_at": created,
            "updated_at": created,
        }
        if status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED):
            took = fields.pop("took", 0.4)
            values.update(started_at=created + timedelta(seconds=1), attempts=1)
            values.update(finished_at=created + timedelta(seconds=1 + took))
        values.update(fields)
        return Job.objects.create(**values)

    for i, customer in enumerate(CUSTOMERS):
        add(
            Status.COMPLETED,
            WELCOME,
            "mail",
            timedelta(minutes=58 - i * 5),
            kwargs={"to": f"{customer.lower()}@example.org", "name": customer},
            result={"to": f"{customer.lower()}@example.org", "sent": 1},
            took=0.15 + i / 50,
        )
    for i, days in enumerate((1, 7, 30)):
        add(
            Status.COMPLETED,
            REPORT,
            "reports",
            timedelta(minutes=52 - i * 11),
            kwargs={"days": days},
            max_attempts=2,
            result={"days": days, "orders": 48 * days, "revenue": 1187.5 * days},
            took=3.1 + i,
        )
    for i, sku in enumerate(SKUS):
        add(
            Status.COMPLETED,
            SYNC,
            "default",
            timedelta(minutes=45 - i * 7),
            kwargs={"sku": sku},
            max_attempts=3,
            result={"sku": sku, "in_stock": 12 + i * 7},
            took=0.6 + i / 10,
        )
    dead_old = add(
        Status.DEAD,
        SYNC,
        "default",
        timedelta(days=12),
        kwargs={"sku": "MUG-STONE-02"},
        attempts=3,
        max_attempts=3,
        last_error="shop.jobs.SupplierUnavailable: supplier API timed out while syncing "
        "MUG-STONE-02",
    )
    sku = "TEA-EARLGREY-250"
    workers = ("web-1:3121:w0", "web-1:3121:w1", "web-2:877:w0")
    history = [
        attempt(1, workers[0], now - timedelta(minutes=39), 30.2, "error", sku),
        attempt(2, workers[1], now - timedelta(minutes=38), 30.1, "error", sku),
        attempt(3, workers[2], now - timedelta(minutes=37), 60.0, "lost", sku),
        # Requeued from the admin: a new run, its attempts counted from 1 again.
        attempt(1, workers[0], now - timedelta(minutes=29), 30.4, "error", sku),
        attempt(2, workers[1], now - timedelta(minutes=28), 30.2, "error", sku),
        attempt(3, workers[0], now - timedelta(minutes=27), 30.3, "error", sku),
    ]
    dead_recent = add(
        Status.DEAD,
        SYNC,
        "default",
        timedelta(minutes=40),
        kwargs={"sku": sku, "failure_rate": 0.5},
        attempts=3,
        max_attempts=3,
        history=history,
        started_at=now - timedelta(minutes=27),
        finished_at=now - timedelta(minutes=27) + timedelta(seconds=30.3),
        last_error=history[-1]["error"],
        idempotency_key=f"sync-{sku}-2026-11",
    )
    dead_recent_other = add(
        Status.DEAD,
        REPORT,
        "reports",
        timedelta(minutes=24),
        kwargs={"days": 365},
        attempts=2,
        max_attempts=2,
        took=120.0,
        last_error="TimeoutError: job ran longer than its 120s timeout",
        history=[
            attempt(1, workers[0], now - timedelta(minutes=24), 120.0, "timeout"),
            attempt(2, workers[1], now - timedelta(minutes=21), 120.0, "timeout"),
        ],
    )
    retried = add(
        Status.COMPLETED,
        WELCOME,
        "mail",
        timedelta(minutes=8),
        kwargs={"to": "grace@example.org", "name": "Grace"},
        attempts=2,
        took=0.0042,
        last_error="SMTPServerDisconnected: Connection unexpectedly closed",
    )
    failed = add(
        Status.FAILED,
        WELCOME,
        "mail",
        timedelta(minutes=6),
        kwargs={"to": "linus@example.org", "name": "Linus"},
        attempts=1,
        run_at=now + timedelta(minutes=2),
        last_error=FAILED_ERROR,
    )
    running = add(
        Status.RUNNING,
        REPORT,
        "reports",
        timedelta(minutes=3),
        kwargs={"days": 90},
        attempts=1,
        max_attempts=2,
        started_at=now - timedelta(minutes=2),
        lease_owner=workers[0],
        lease_expires_at=now + timedelta(seconds=50),
    )
    stuck = add(
        Status.RUNNING,
        SYNC,
        "default",
        timedelta(minutes=9),
        kwargs={"sku": "COF-KENYA-250"},
        attempts=1,
        max_attempts=3,
        started_at=now - timedelta(minutes=8),
        lease_owner=workers[2],
        lease_expires_at=now - timedelta(minutes=6),
    )
    pending = [
        add(
            Status.PENDING,
            WELCOME,
            "mail",
            timedelta(minutes=4 - i),
            kwargs={"to": f"{name.lower()}@example.org", "name": name},
        )
        for i, name in enumerate(("Margaret", "John", "Sophie"))
    ]
    add(
        Status.PENDING,
        REPORT,
        "reports",
        timedelta(minutes=1),
        kwargs={"days": 7},
        max_attempts=2,
        priority=5,
        run_at=now + timedelta(days=2),
    )
    add(Status.CANCELLED, SYNC, "default", timedelta(hours=3), kwargs={"sku": "MUG-STONE-01"})

    Worker.objects.create(
        id=workers[0],
        hostname="web-1",
        pid=3121,
        queues="reports,mail",
        started_at=now - timedelta(hours=5),
        last_seen_at=now - timedelta(seconds=1),
        current_job_id=running.pk,
        jobs_done=1532,
    )
    Worker.objects.create(
        id=workers[1],
        hostname="web-1",
        pid=3122,
        queues="mail,default",
        started_at=now - timedelta(hours=5),
        last_seen_at=now - timedelta(seconds=2),
        jobs_done=1490,
    )
    Worker.objects.create(
        id=workers[2],
        hostname="web-2",
        pid=877,
        queues="",
        started_at=now - timedelta(days=1),
        last_seen_at=now - timedelta(minutes=6),
        jobs_done=88,
        current_job_id=stuck.pk,
    )
    return Seeded(dead_recent, dead_recent_other, dead_old, failed, running, pending, retried)
