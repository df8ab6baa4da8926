"""Signals sent by workers, for metrics, alerts and dead-letter hooks.

Each is sent with `sender` = the job's handler (the object `@job` returned, so
`@receiver(job_dead, sender=send_email)` works; None when no handler is registered) and
`job` = the ClaimedJob (id, name, queue, attempts, args, kwargs ...). Receivers run in the
worker process, after the outcome is recorded; one that raises is logged and does not
disturb the worker or the job.
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("django_sqlqueue")

#: A worker is about to run an attempt.
job_started = Signal()
#: An attempt returned; `result` is its return value.
job_completed = Signal()
#: An attempt failed and a retry is scheduled; `error` is the message.
job_failed = Signal()
#: A job reached the dead letter: attempts spent, discarded, no handler, or its worker was
#: lost with no attempt left; `error` says why.
job_dead = Signal()


def send(signal: Signal, job: Any, **kwargs: Any) -> None:
    """Send robustly: a broken receiver is logged, never allowed to take down a worker."""
    if not signal.receivers:
        return  # the common case, on the hot path of every job
    from .registry import registry

    sender = registry.get(job.name) if job.name in registry else None
    for receiver, response in signal.send_robust(sender=sender, job=job, **kwargs):
        if isinstance(response, Exception):
            logger.error(
                "Signal receiver %r failed for job %s: %r",
                receiver,
                job.id,
                response,
                exc_info=(type(response), response, response.__traceback__),
            )
