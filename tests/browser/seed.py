"""A small, realistic queue for the browser test and the screenshots in docs/admin.md."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status

TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/django_sqlqueue/execution.py", line 88, in run_handler
    return handler(*job.args, **job.kwargs)
  File "/srv/app/billing/jobs.py", line 41, in charge_card
    receipt = gateway.charge(customer_id, amount_cents)
  File "/srv/app/billing/gateway.py", line 17, in charge
    raise GatewayError(f"card declined for customer {customer_id}: {code}")
billing.gateway.GatewayError: card declined for customer 4711: insufficient_funds
"""


def attempt(number: int, worker: str, start: datetime, seconds: float, outcome: str, error: str):
    return {
        "attempt": number,
        "worker": worker,
        "started_at": start.isoformat(),
        "finished_at": (start + timedelta(seconds=seconds)).isoformat(),
        "outcome": outcome,
        "error": error,
        "traceback": TRACEBACK if outcome == "error" else "",
    }


@dataclass
class Seeded:
    dead_recent: Job
    dead_recent_other: Job
    dead_old: Job
    running: Job
    pending: list[Job]


def seed_queue(now: datetime | None = None) -> Seeded:
    now = now or timezone.now()
    jobs: list[Job] = []

    def add(status: str, name: str, queue: str, age: timedelta, **fields) -> Job:
        created = now - age
        values = {
            "name": name,
            "queue": queue,
            "status": status,
            "created_at": created,
            "run_at": created,
            "updated_at": created,
        }
        if status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED):
            values.update(started_at=created + timedelta(seconds=1), attempts=1)
            values.update(finished_at=created + timedelta(seconds=1 + fields.pop("took", 0.4)))
        values.update(fields)
        job = Job.objects.create(**values)
        jobs.append(job)
        return job

    for i in range(12):
        add(
            Status.COMPLETED,
            "mail.send_welcome",
            "mail",
            timedelta(minutes=50 - i * 3),
            kwargs={"user_id": 1000 + i, "template": "welcome"},
            result={"message_id": f"<{9000 + i}@mail.example.org>"},
            took=0.2 + i / 10,
        )
    for i in range(4):
        add(
            Status.COMPLETED,
            "images.thumbnail",
            "default",
            timedelta(minutes=40 - i * 5),
            args=[f"uploads/2026/photo-{i}.jpg", 320],
            took=1.5 + i,
        )
    dead_old = add(
        Status.DEAD,
        "billing.charge_card",
        "billing",
        timedelta(days=12),
        kwargs={"customer_id": 4650, "amount_cents": 1999},
        attempts=5,
        last_error="billing.gateway.GatewayError: card expired for customer 4650",
    )
    history = [
        attempt(
            1,
            "web-1:3121:w0",
            now - timedelta(minutes=30),
            0.8,
            "error",
            "GatewayError: card declined for customer 4711: insufficient_funds",
        ),
        attempt(
            2,
            "web-1:3121:w1",
            now - timedelta(minutes=29),
            0.7,
            "error",
            "GatewayError: card declined for customer 4711: insufficient_funds",
        ),
        attempt(
            3,
            "web-2:877:w0",
            now - timedelta(minutes=26),
            60.0,
            "lost",
            "Worker web-2:877:w0 stopped renewing its lease (it crashed, was killed or hung); "
            "the attempt is counted as failed.",
        ),
    ]
    dead_recent = add(
        Status.DEAD,
        "billing.charge_card",
        "billing",
        timedelta(minutes=31),
        kwargs={"customer_id": 4711, "amount_cents": 4900, "currency": "EUR"},
        attempts=3,
        max_attempts=3,
        history=history,
        started_at=now - timedelta(minutes=26),
        finished_at=now - timedelta(minutes=25),
        last_error=history[-1]["error"],
        idempotency_key="charge-order-88213",
    )
    dead_recent_other = add(
        Status.DEAD,
        "reports.nightly",
        "reports",
        timedelta(minutes=20),
        kwargs={"day": "2026-11-28"},
        attempts=3,
        max_attempts=3,
        last_error="TimeoutError: job ran longer than its 600s timeout",
        history=[
            attempt(
                1,
                "web-1:3121:w0",
                now - timedelta(minutes=19),
                600,
                "timeout",
                "TimeoutError: job ran longer than its 600s timeout",
            )
        ],
    )
    add(
        Status.FAILED,
        "mail.send_welcome",
        "mail",
        timedelta(minutes=6),
        kwargs={"user_id": 1042, "template": "welcome"},
        attempts=1,
        run_at=now + timedelta(minutes=2),
        last_error="SMTPServerDisconnected: Connection unexpectedly closed",
    )
    running = add(
        Status.RUNNING,
        "reports.nightly",
        "reports",
        timedelta(minutes=3),
        kwargs={"day": "2026-11-29"},
        attempts=1,
        started_at=now - timedelta(minutes=2),
        lease_owner="web-1:3121:w0",
        lease_expires_at=now + timedelta(seconds=50),
    )
    stuck = add(
        Status.RUNNING,
        "images.thumbnail",
        "default",
        timedelta(minutes=9),
        args=["uploads/2026/huge.tiff", 320],
        attempts=1,
        started_at=now - timedelta(minutes=8),
        lease_owner="web-2:877:w0",
        lease_expires_at=now - timedelta(minutes=6),
    )
    pending = [
        add(
            Status.PENDING,
            "mail.send_welcome",
            "mail",
            timedelta(minutes=4 - i),
            kwargs={"user_id": 1100 + i},
        )
        for i in range(3)
    ]
    add(
        Status.PENDING,
        "reports.weekly",
        "reports",
        timedelta(minutes=1),
        run_at=now + timedelta(days=2),
    )
    add(Status.CANCELLED, "mail.send_digest", "mail", timedelta(hours=3))

    Worker.objects.create(
        id="web-1:3121:w0",
        hostname="web-1",
        pid=3121,
        queues="reports,mail",
        started_at=now - timedelta(hours=5),
        last_seen_at=now - timedelta(seconds=1),
        current_job_id=running.pk,
        jobs_done=1532,
    )
    Worker.objects.create(
        id="web-1:3121:w1",
        hostname="web-1",
        pid=3122,
        queues="mail,billing",
        started_at=now - timedelta(hours=5),
        last_seen_at=now - timedelta(seconds=2),
        jobs_done=1490,
    )
    Worker.objects.create(
        id="web-2:877:w0",
        hostname="web-2",
        pid=877,
        queues="",
        started_at=now - timedelta(days=1),
        last_seen_at=now - timedelta(minutes=6),
        jobs_done=88,
        current_job_id=stuck.pk,
    )
    return Seeded(dead_recent, dead_recent_other, dead_old, running, pending)
