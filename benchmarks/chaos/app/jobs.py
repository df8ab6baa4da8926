"""The handlers of the chaos run. Each records its start and end in the Execution table.

The start row is written before any work, in autocommit, so a handler killed halfway still
leaves its trace: that is how the checks count real executions, including the ones the queue
never heard the end of. Writes retry through a database outage (the harness cuts connections
on purpose), as a careful handler would.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DatabaseError, connection

from django_sqlqueue import job
from django_sqlqueue.context import JobContext

from ..mix import HANG_SECONDS, KINDS, expected_outcome
from .models import Execution

T = TypeVar("T")
#: Seconds a handler keeps retrying its own bookkeeping through a database outage.
RECORD_PATIENCE = 20.0


class HandlerFailure(RuntimeError):
    """The failure a handler raises on purpose (flaky and doomed jobs)."""


def _write(action: Callable[[], T]) -> T:
    deadline = time.monotonic() + RECORD_PATIENCE
    while True:
        try:
            return action()
        except DatabaseError:
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _run(context: JobContext, token: str, kind: str, body: Callable[[], Any]) -> Any:
    row = _write(
        lambda: Execution.objects.create(
            job_id=context.job_id,
            token=token,
            kind=kind,
            attempt=context.attempt,
            worker_pid=os.getpid(),
            worker_id=context.worker_id,
            started=time.time(),
        )
    )
    try:
        return body()
    finally:
        # Best effort: a missing end only makes the overlap check skip this execution.
        with contextlib.suppress(DatabaseError):
            _write(lambda: Execution.objects.filter(pk=row.pk).update(finished=time.time()))


def _fail(context: JobContext) -> None:
    raise HandlerFailure(f"failing on purpose on attempt {context.attempt}")


@job("chaos.fast", takes_context=True, max_attempts=KINDS["fast"].max_attempts)
def fast(context: JobContext, token: str, kind: str = "fast") -> None:
    _run(context, token, kind, lambda: None)


@job("chaos.slow", takes_context=True, max_attempts=KINDS["slow"].max_attempts)
def slow(context: JobContext, token: str, seconds: float, kind: str = "slow") -> float:
    return _run(context, token, kind, lambda: time.sleep(seconds) or seconds)


@job("chaos.flaky", takes_context=True, max_attempts=KINDS["flaky"].max_attempts)
def flaky(context: JobContext, token: str, fail_first: int, kind: str = "flaky") -> str:
    def body() -> str:
        if expected_outcome("flaky", context.attempt, {"fail_first": fail_first}) != "completed":
            _fail(context)
        return "ok"

    return _run(context, token, kind, body)


@job("chaos.doomed", takes_context=True, max_attempts=KINDS["doomed"].max_attempts)
def doomed(context: JobContext, token: str, kind: str = "doomed") -> None:
    _run(context, token, kind, lambda: _fail(context))


@job(
    "chaos.hang",
    takes_context=True,
    max_attempts=KINDS["hang"].max_attempts,
    timeout=KINDS["hang"].timeout,
)
def hang(context: JobContext, token: str, kind: str = "hang") -> None:
    _run(context, token, kind, lambda: time.sleep(HANG_SECONDS))
