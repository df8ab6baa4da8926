"""The shop's background jobs: found at start-up because this module is called `jobs.py`."""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from django_sqlqueue import Backoff, job

logger = logging.getLogger(__name__)

REPORT_STEPS = ("orders", "refunds", "customers", "products", "totals")
PRODUCTS = ("tea", "coffee", "cocoa", "mugs", "grinders")


class SupplierUnavailable(Exception):
    """The (pretend) supplier API did not answer: worth another try later."""


@job("shop.send_welcome_email", queue="mail", max_attempts=5)
def send_welcome_email(to: str, name: str) -> dict[str, Any]:
    """Greet a new customer. The console email backend prints the mail in the worker's log."""
    sent = send_mail(
        subject="Welcome to the tea shop",
        message=f"Hello {name},\n\nThanks for signing up. Your first pot is on us.\n",
        from_email=None,
        recipient_list=[to],
    )
    return {"to": to, "sent": sent}


@job(
    "shop.build_sales_report",
    queue="reports",
    timeout=120,
    max_attempts=2,
    # Also a recurring job: yesterday's figures at 06:00 on weekdays.
    cron="0 6 * * 1-5",
    cron_kwargs={"days": 1},
)
def build_sales_report(days: int = 7) -> dict[str, Any]:
    """A slow job: five steps of a few hundred milliseconds each, then a summary."""
    rng = random.Random(days)  # the same period gives the same figures
    step_seconds = getattr(settings, "SHOP_REPORT_STEP_SECONDS", 0.6)
    for number, step in enumerate(REPORT_STEPS, start=1):
        logger.info("sales report (%d days): step %d/%d, %s", days, number, len(REPORT_STEPS), step)
        time.sleep(step_seconds)
    orders = rng.randint(40, 60) * days
    revenue = round(orders * rng.uniform(18, 32), 2)
    return {
        "days": days,
        "orders": orders,
        "revenue": revenue,
        "average_order": round(revenue / orders, 2),
        "top_product": rng.choice(PRODUCTS),
        "generated_at": timezone.now().isoformat(timespec="seconds"),
    }


@job("shop.sync_inventory", max_attempts=3, backoff=Backoff(base=2.0, cap=10.0))
def sync_inventory(sku: str, failure_rate: float = 0.5) -> dict[str, Any]:
    """Fails at random like a flaky remote API, so retries and dead jobs show in the admin.

    With the default failure rate and three attempts, one job in eight ends `dead`.
    """
    if random.random() < failure_rate:
        raise SupplierUnavailable(f"supplier API timed out while syncing {sku}")
    return {"sku": sku, "in_stock": random.randint(0, 40)}
