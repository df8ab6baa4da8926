"""The handlers of the chaos run. Each records its start and end in the Execution table.
Under `runworkers --concurrency C` they run in a worker process's slot threads, C at once,
each on its own database connection.

The start row is written before any work, in autocommit, so a handler killed halfway still
leaves its trace: that is how the checks count real executions, including the ones the queue
never heard the end of. Writes retry through a database outage (the harness cuts connections
on purpose), as a careful handler would.

The atomic job is the exception: its handler runs inside the transaction that records its
completion, where a row would roll back with a failed attempt, so it notes its executions in
files (ledger.py); and it does not retry its write, which would only fail again in a broken
transaction: the attempt fails, rolls back, and the job is retried.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DatabaseError, connection, transaction
from django.db.models import F

from benchmarks.gil import items_for
from django_sqlqueue import job
from django_sqlqueue.context import JobContext

from .. import ledger
from ..misbehave import MISBEHAVING
from ..mix import BATCH_CALLBACK, HANG_SECONDS, KINDS, expected_outcome
from .models import ATOMIC_COUNTER, Counter, Execution

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
    # A cut connection can lose the reply to an INSERT that committed: the retry looks for
    # the row by this call's own key first, so one execution is never recorded twice.
    call = uuid.uuid4().hex
    row = _write(
        lambda: (
            Execution.objects.filter(call=call).first()
            or Execution.objects.create(
                call=call,
                job_id=context.job_id,
                token=token,
                kind=kind,
                attempt=context.attempt,
                worker_pid=os.getpid(),
                worker_id=context.worker_id,
                started=time.time(),
            )
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


@job(BATCH_CALLBACK, takes_context=True, max_attempts=KINDS["fast"].max_attempts)
def batch_done(context: JobContext, token: str, kind: str = "fast") -> dict[str, Any] | None:
    """A batch's callback: a fast job that returns what `context.batch` says of its batch
    (the checks compare it with its members' ends). The read retries through an outage, as
    the bookkeeping does: a fast job does not fail."""

    def body() -> dict[str, Any] | None:
        seen = _write(lambda: context.batch)
        if seen is None:
            return None
        return {
            "id": seen.id,
            "total": seen.total,
            "completed": seen.completed,
            "dead": seen.dead,
            "cancelled": seen.cancelled,
            "state": seen.state,
        }

    return _run(context, token, kind, body)


@job("chaos.slow", takes_context=True, max_attempts=KINDS["slow"].max_attempts)
def slow(context: JobContext, token: str, seconds: float, kind: str = "slow") -> float:
    return _run(context, token, kind, lambda: time.sleep(seconds) or seconds)


@job("chaos.io", takes_context=True, max_attempts=KINDS["io"].max_attempts)
def io(context: JobContext, token: str, seconds: float, kind: str = "io") -> float:
    """Waits, as a call to another service does, with the GIL released: enqueued only under
    --concurrency, so that a worker process has many jobs in flight when a kill lands."""
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


@job(
    "chaos.atomic",
    takes_context=True,
    atomic=True,
    max_attempts=KINDS["atomic"].max_attempts,
)
def atomic(context: JobContext, token: str, hold: float, kind: str = "atomic") -> None:
    """Add one to the counter, then keep the transaction open a moment: a kill or a cut
    connection in between must roll the increment back with the attempt."""
    key = ledger.started(context.job_id, token, kind, context.attempt, context.worker_id)
    try:
        Counter.objects.filter(name=ATOMIC_COUNTER).update(value=F("value") + 1)
        time.sleep(hold)
    finally:
        ledger.finished(key)


# Misbehaving handlers (`--misbehave`, misbehave.py): each may cost its own attempt, never its
# worker, a slot, or a second run of another job. Each records its start like the others.


@job("chaos.leak", takes_context=True, max_attempts=MISBEHAVING["leak_atomic"].max_attempts)
def leak(context: JobContext, token: str, how: str, kind: str = "leak") -> str:
    """Returns with a transaction open: an atomic block entered and never left, or autocommit
    turned off. The attempt must fail with TransactionLeftOpen; the worker goes on."""
    _run(context, token, kind, lambda: None)
    if how == "atomic":
        transaction.atomic().__enter__()
    else:
        transaction.set_autocommit(False)
    return "leaked"


@job("chaos.fork", takes_context=True, max_attempts=MISBEHAVING["fork"].max_attempts)
def fork(context: JobContext, token: str, kind: str = "fork") -> int:
    """Forks; the child returns into the worker's code as the parent does, and is ended there."""
    _run(context, token, kind, lambda: None)
    return os.fork()


@job("chaos.exit0", takes_context=True, max_attempts=MISBEHAVING["exit0"].max_attempts)
def exit_zero(context: JobContext, token: str, kind: str = "exit0") -> None:
    """Ends its worker process with status 0 in the middle of the job."""
    _run(context, token, kind, lambda: None)
    os._exit(0)


@job("chaos.linger", takes_context=True, max_attempts=MISBEHAVING["linger"].max_attempts)
def linger(context: JobContext, token: str, seconds: float, kind: str = "linger") -> None:
    """Leaves a non-daemon thread sleeping behind: the process cannot exit normally while it
    lives (the run's supervisor B recycles its workers with --max-jobs)."""
    _run(context, token, kind, lambda: None)
    threading.Thread(target=time.sleep, args=(seconds,), name="chaos-lingering").start()


@job("chaos.big_result", takes_context=True, max_attempts=MISBEHAVING["big_result"].max_attempts)
def big_result(context: JobContext, token: str, size: int, kind: str = "big_result") -> str:
    """A result over MAX_RESULT_BYTES: refused before the write, the job dead at once."""
    return _run(context, token, kind, lambda: "x" * size)


@job("chaos.gil", takes_context=True, max_attempts=MISBEHAVING["gil"].max_attempts)
def gil(context: JobContext, token: str, seconds: float, kind: str = "gil") -> int:
    """Holds the GIL for about `seconds` (longer than the lease) in one C call, sum(range(n)):
    the worker's heartbeat thread cannot run; the supervisor must keep the lease alive."""

    def body() -> int:
        return sum(range(items_for(seconds))) % 1000

    return _run(context, token, kind, body)


@job("chaos.raise", takes_context=True, max_attempts=MISBEHAVING["raise"].max_attempts)
def raise_(context: JobContext, token: str, kind: str = "raise") -> None:
    """Raises something other than the harness's own HandlerFailure."""

    def body() -> None:
        raise LookupError(f"misbehaving on purpose on attempt {context.attempt}")

    _run(context, token, kind, body)
