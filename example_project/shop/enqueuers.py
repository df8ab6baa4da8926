"""What the page's buttons and `manage.py enqueue_demo_jobs` put on the queue."""

from __future__ import annotations

import random
from collections.abc import Callable

from django.db import transaction

from django_sqlqueue import Job

from .jobs import build_sales_report, send_welcome_email, sync_inventory

NAMES = ("Ada", "Grace", "Linus", "Guido", "Barbara", "Ken", "Margaret", "Dennis")


def _customer() -> dict[str, str]:
    name = random.choice(NAMES)
    return {"to": f"{name.lower()}{random.randint(1, 999)}@example.com", "name": name}


def _sku() -> dict[str, str]:
    return {"sku": f"SKU-{random.randint(1, 9999):04d}"}


def enqueue_email() -> list[Job]:
    return [send_welcome_email.enqueue(**_customer())]


def enqueue_report() -> list[Job]:
    # Reports are not urgent: let emails and syncs go first.
    return [build_sales_report.using(priority=-10).enqueue(days=random.choice((7, 30, 90)))]


def enqueue_sync() -> list[Job]:
    return [sync_inventory.enqueue(**_sku())]


def enqueue_batch(size: int = 20) -> list[Job]:
    """A mix of jobs, stored in one transaction: all of them or none."""
    reports = max(1, size // 10)
    emails = (size - reports) // 2
    syncs = size - reports - emails
    with transaction.atomic():
        return [
            *send_welcome_email.enqueue_many([_customer() for _ in range(emails)]),
            *sync_inventory.enqueue_many([_sku() for _ in range(syncs)]),
            *build_sales_report.using(priority=-10).enqueue_many(
                [{"days": 7} for _ in range(reports)]
            ),
        ]


ENQUEUERS: dict[str, Callable[[], list[Job]]] = {
    "email": enqueue_email,
    "report": enqueue_report,
    "flaky": enqueue_sync,
    "batch": enqueue_batch,
}
