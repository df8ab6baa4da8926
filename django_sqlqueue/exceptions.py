"""Exceptions raised by django-sqlqueue, and the two a handler may raise on purpose."""

from __future__ import annotations

from datetime import timedelta


class SQLQueueError(Exception):
    """Base class for every error django-sqlqueue raises."""


class InvalidJobError(SQLQueueError, ValueError):
    """Bad input at enqueue time: nothing was stored."""


class UnknownJobError(InvalidJobError, LookupError):
    """No handler is registered under this job name."""


class JobAlreadyRegistered(SQLQueueError):
    """Two different functions were registered under one job name."""


class Retry(Exception):
    """Raise from a handler to run the job again after `delay`.

    Recorded as a requested retry, not an error. It still counts as an attempt, so a job that
    always asks for a retry ends `dead` once `max_attempts` is spent.
    """

    def __init__(self, delay: float | timedelta = 0, reason: str = "") -> None:
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        if seconds < 0:
            raise ValueError("Retry delay must not be negative.")
        self.delay = seconds
        self.reason = reason
        super().__init__(reason or f"retry requested in {seconds:g}s")


class Discard(Exception):
    """Raise from a handler to send the job to `dead` at once, whatever attempts are left."""

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason or "discarded by handler")


class WorkerLost(Exception):
    """Names an attempt whose worker died (in a django.tasks TaskError): the job raised nothing."""


class TransactionLeftOpen(Exception):
    """Names an attempt whose handler returned with a transaction still open (an atomic block
    never exited, or autocommit turned off): the worker rolled it back, reset its connection
    and failed the attempt."""


class JobTimeout(BaseException):
    """Raised inside a handler whose attempt ran past its timeout.

    A BaseException so that a handler's `except Exception:` cannot swallow it.
    """


class JobCancelled(BaseException):
    """Raised in a handler whose job was cancelled while it ran: by
    `context.raise_if_cancelled()`, or by the worker once CANCEL_GRACE_SECONDS have passed.

    A BaseException so that a handler's `except Exception:` cannot swallow it; catch it only to
    clean up, then re-raise. The job ends `cancelled` and is not retried.
    """


class WorkerShutdown(BaseException):
    """Raised inside a handler still running when the grace period ran out."""
