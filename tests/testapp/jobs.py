"""Jobs the tests enqueue; discovered through the `jobs` autodiscovery like a user's app."""

import os
import threading
import time

from django.db import transaction
from django.db.models import F
from django.dispatch import receiver

from benchmarks.gil import items_for
from django_sqlqueue import Discard, Retry, job, pause_queue
from django_sqlqueue.signals import job_completed, job_dead, job_started

from .models import Counter, Execution, SignalLog


def _record(context, label=""):
    Execution.objects.create(
        job_id=context.job_id, attempt=context.attempt, worker_pid=os.getpid(), label=label
    )


@job("tests.noop")
def noop(*args, **kwargs):
    return None


@job("tests.add")
def add(a, b):
    return a + b


@job("tests.record", takes_context=True)
def record(context, label="", sleep=0.0):
    if sleep:
        time.sleep(sleep)
    _record(context, label)
    return label


@job("tests.fail_always", takes_context=True, max_attempts=3)
def fail_always(context):
    _record(context, "fail")
    raise ValueError(f"boom on attempt {context.attempt}")


@job("tests.fail_once", takes_context=True)
def fail_once(context):
    _record(context, "fail_once")
    if context.attempt == 1:
        raise RuntimeError("first attempt fails")
    return "ok"


@job("tests.sleep", takes_context=True)
def sleep(context, seconds, label="sleep"):
    _record(context, f"{label}-start")
    time.sleep(seconds)
    _record(context, f"{label}-end")
    return seconds


@job("tests.retry", takes_context=True, max_attempts=3)
def retry(context, delay=0.0):
    _record(context, "retry")
    raise Retry(delay=delay, reason="not yet")


@job("tests.discard", takes_context=True)
def discard(context):
    _record(context, "discard")
    raise Discard("payload is obsolete")


# The retry an hour away: the test that runs it checks one attempt's timeout, and with the
# suite's 0.1-0.2 s backoff a loaded machine let run_jobs() claim the retry too (once, on
# MariaDB in a CI rehearsal: 'dead' after two attempts where 'failed' was expected).
@job("tests.timeout", takes_context=True, timeout=1, max_attempts=2, backoff=3600)
def too_slow(context):
    _record(context, "timeout")
    time.sleep(30)


@job("tests.bad_result")
def bad_result():
    return {1, 2, 3}


@job("tests.exit", takes_context=True, max_attempts=1)
def hard_exit(context, warm_up=False):
    """Ends the worker process at once (status 3); with `warm_up`, returns instead, so that a
    worker learns this name's duration before the fatal run."""
    _record(context, "warm-up" if warm_up else "exit")
    if not warm_up:
        os._exit(3)


@job("tests.sys_exit", takes_context=True, max_attempts=1)
def sys_exit(context):
    raise SystemExit(4)


@job("tests.async", takes_context=True)
async def async_job(context, value):
    from asgiref.sync import sync_to_async

    await sync_to_async(_record)(context, "async")
    return value * 2


@job("tests.signal_boom")
def signal_boom():
    return "survived"


# Receivers, connected in every process that imports the jobs (workers included).


@receiver(job_completed, sender=add)
def _add_completed(sender, job, result, **kwargs):
    SignalLog.objects.create(signal="completed", job_id=job.id, detail=str(result))


@receiver(job_dead)
def _dead(sender, job, error, **kwargs):
    SignalLog.objects.create(signal="dead", job_id=job.id, detail=error)


@receiver(job_started, sender=signal_boom)
def _broken_receiver(sender, job, **kwargs):
    raise RuntimeError("a receiver with a bug")


@job("tests.segfault", max_attempts=1)
def segfault():
    import ctypes

    ctypes.string_at(0)  # reads address 0: the process dies with SIGSEGV


@job("tests.increment", atomic=True, takes_context=True)
def increment(context, counter="atomic", sleep=0.0):
    """Adds one to a Counter row in the job's own transaction (exactly once per job)."""
    _record(context, "increment")
    Counter.objects.filter(name=counter).update(value=F("value") + 1)
    if sleep:
        time.sleep(sleep)
    return None


@job("tests.increment_then_fail", atomic=True, takes_context=True, max_attempts=2)
def increment_then_fail(context, counter="atomic"):
    """Writes, then fails: the write must be rolled back with the failed attempt."""
    Counter.objects.filter(name=counter).update(value=F("value") + 1)
    raise RuntimeError("fails after writing")


@job("tests.cooperative", takes_context=True, max_attempts=3)
def cooperative(context, seconds=30.0):
    """Works in small steps, stopping at the first safe point after a cancel."""
    _record(context, "cooperative-start")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        context.raise_if_cancelled()
        time.sleep(0.05)
    return "finished"


@job("tests.deaf", takes_context=True, max_attempts=3)
def deaf(context, seconds=30.0, swallow=False):
    """Ignores cancel requests; with `swallow`, even the interrupt (a handler stuck for good)."""
    _record(context, "deaf-start")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            time.sleep(0.5)
        except BaseException:
            if not swallow:
                raise
    return "finished"


@job("tests.progress", takes_context=True)
def progress(context, steps=4, pause=0.6):
    for step in range(1, steps + 1):
        time.sleep(pause)
        context.progress(100 * step / steps, f"step {step} of {steps}")
    return steps


# Misbehaving handlers (tests/workers/test_misbehaving_handlers.py): each must cost its own
# attempt at most, never its worker, a slot or another job's run.


@job("tests.leak", takes_context=True, max_attempts=2)
def leak(context, how="atomic", label="leak"):
    """Returns with a transaction open: an atomic block entered and never exited, or
    autocommit turned off. Its write inside that transaction must be rolled back."""
    _record(context, f"{label}-start")
    if how == "atomic":
        transaction.atomic().__enter__()
    else:
        transaction.set_autocommit(False)
    _record(context, f"{label}-inside")
    return "leaked"


@job("tests.fork", takes_context=True)
def fork_and_return(context):
    """Forks, and the child returns into the worker's code as the parent does."""
    pid = os.fork()
    _record(context, "fork-child" if pid == 0 else "fork-parent")
    return pid


@job("tests.exit_zero", takes_context=True, max_attempts=2)
def exit_zero(context):
    _record(context, "exit0")
    os._exit(0)


@job("tests.hold_gil", takes_context=True)
def hold_gil(context, seconds):
    """Long C code that never releases the GIL for about `seconds`: no other thread of the
    process runs (its length sized to this machine: benchmarks/gil.py)."""
    n = items_for(seconds)
    _record(context, "gil-start")
    total = sum(range(n))
    _record(context, "gil-end")
    return total % 1000


@job("tests.linger", takes_context=True)
def linger(context, seconds=3600.0):
    """Leaves a non-daemon thread behind: the process cannot exit normally while it lives."""
    threading.Thread(target=time.sleep, args=(seconds,), name="lingering").start()
    _record(context, "linger")


@job("tests.big_result", max_attempts=3)
def big_result(size):
    return "x" * size


@job("tests.leak_in_atomic_job", atomic=True, takes_context=True, max_attempts=1)
def leak_in_atomic_job(context, counter="atomic"):
    """An atomic job whose handler leaves an inner atomic block open: its completion, written
    in its transaction, must be rolled back with its write, and the attempt fail."""
    Counter.objects.filter(name=counter).update(value=F("value") + 1)
    transaction.atomic().__enter__()
    return "leaked"


@job("tests.unique_record", takes_context=True, unique=True)
def unique_record(context, label="", sleep=0.0):
    if sleep:
        time.sleep(sleep)
    _record(context, label)
    return label


@job("tests.unique_window", takes_context=True, unique_for=60)
def unique_window(context, label=""):
    _record(context, label)
    return label


@job("tests.limited", takes_context=True, concurrency=2, concurrency_key="account:{account}")
def limited(context, account, seconds=0.3):
    """Records its start and end, so tests can check that intervals never overlap too much."""
    _record(context, f"{account}-start")
    time.sleep(seconds)
    _record(context, f"{account}-end")


@job("tests.rated", takes_context=True, rate_limit="5/s")
def rated(context, label="rated"):
    _record(context, label)


@job("tests.rated_slow", takes_context=True, rate_limit="5/s")
def rated_slow(context, label="rated-slow", seconds=0.9):
    """Records its start as its handler begins, then works: a rate counts handler starts."""
    _record(context, label)
    time.sleep(seconds)


@job("tests.rendezvous", takes_context=True)
def rendezvous(context, quorum, label="meet", patience=60.0):
    """Starts, then waits until `quorum` jobs of its label have started: it finishes only if
    that many run at once (or ran before it), so a worker that overlaps fewer fails it."""
    _record(context, f"{label}-start")
    deadline = time.monotonic() + patience
    while Execution.objects.filter(label=f"{label}-start").count() < quorum:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {quorum} {label} jobs started within {patience} s")
        time.sleep(0.02)
    _record(context, f"{label}-end")
    return label


@job("tests.stall_first", takes_context=True, max_attempts=3)
def stall_first(context, seconds=600.0):
    """Its first attempt waits for `seconds` (long enough to be killed in); later ones return."""
    _record(context, f"stall-{context.attempt}")
    if context.attempt == 1:
        time.sleep(seconds)
    return context.attempt


@job("tests.deaf_to_timeout", takes_context=True, timeout=1, max_attempts=2)
def deaf_to_timeout(context, seconds=60.0):
    """Its first attempt ignores its time limit (a slot thread is only asked to stop); the
    second returns at once."""
    _record(context, f"deaf-{context.attempt}")
    if context.attempt == 1:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.1)
    return context.attempt


@job("tests.polite_to_timeout", takes_context=True, timeout=1, max_attempts=1)
def polite_to_timeout(context):
    """Stops at the first safe point past its time limit."""
    _record(context, "polite-start")
    while True:
        context.raise_if_cancelled()
        time.sleep(0.05)


@job("tests.async_rendezvous", takes_context=True)
async def async_rendezvous(context, quorum, label="async-meet", patience=60.0):
    """`rendezvous` as an `async def` handler, waiting with asyncio.sleep."""
    import asyncio

    from asgiref.sync import sync_to_async

    await sync_to_async(_record)(context, f"{label}-start")
    deadline = time.monotonic() + patience
    while await Execution.objects.filter(label=f"{label}-start").acount() < quorum:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {quorum} {label} jobs started within {patience} s")
        await asyncio.sleep(0.02)
    await sync_to_async(_record)(context, f"{label}-end")
    return label


@job("tests.behind_gate", takes_context=True)
def behind_gate(context, gate="gate", label="gated", patience=120.0):
    """Waits until the Counter row `gate` is at least 1: jobs that hold their slots for as
    long as the test wants."""
    _record(context, f"{label}-start")
    deadline = time.monotonic() + patience
    while not Counter.objects.filter(name=gate, value__gte=1).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {gate!r} stayed shut for {patience} s")
        time.sleep(0.02)
    _record(context, f"{label}-end")
    return label


@job("tests.async_overrun", takes_context=True, timeout=1, max_attempts=1)
async def async_overrun(context, seconds=60.0):
    """Awaits far past its time limit: in a worker slot its task is cancelled at the limit."""
    import asyncio

    from asgiref.sync import sync_to_async

    await sync_to_async(_record)(context, "overrun-start")
    await asyncio.sleep(seconds)
    return "finished"


@job("tests.async_deaf_to_cancel", takes_context=True, max_attempts=3)
async def async_deaf_to_cancel(context, seconds=60.0):
    """Ignores `cancel_requested`: in a worker slot its task is cancelled after the grace."""
    import asyncio

    from asgiref.sync import sync_to_async

    await sync_to_async(_record)(context, "async-deaf-start")
    await asyncio.sleep(seconds)
    return "finished"


@job("tests.gather", takes_context=True)
def gather(context, label=""):
    """Records its label and returns it with what the jobs it waited for returned."""
    _record(context, label)
    inputs = {str(job_id): result for job_id, result in context.dependency_results.items()}
    return {"label": label, "after": inputs}


@job("tests.batch_report", takes_context=True)
def batch_report(context, label="report"):
    """A batch's callback: records its label and returns what `context.batch` says."""
    _record(context, label)
    batch = context.batch
    if batch is None:
        return None
    return {
        "id": batch.id,
        "total": batch.total,
        "completed": batch.completed,
        "dead": batch.dead,
        "cancelled": batch.cancelled,
        "state": batch.state,
    }


@job("tests.open_batch", takes_context=True)
def open_batch(context, size=3, label="inner"):
    """A callback that opens a batch of its own (nested workflows)."""
    from django_sqlqueue import batch

    _record(context, label)
    with batch(on_complete=batch_report.prepare(label=f"{label}-report")) as opened:
        for index in range(size):
            record.enqueue(label=f"{label}-{index}")
    return opened.id


@job("tests.pause_own_queue")
def pause_own_queue(queue, wait=True):
    """Pauses `queue` from inside a job: the jobs claimed with it must not start after."""
    pause_queue(queue, wait=wait)


@job("tests.note_run", takes_context=True)
def note_run(context, n=0):
    """Appends its reference to SQLQUEUE_TEST_RUNS_FILE: a file outlives a failover that
    loses the database's last writes (tests/workers/test_failover.py counts re-runs)."""
    with open(os.environ["SQLQUEUE_TEST_RUNS_FILE"], "a") as runs:
        runs.write(f"{context.reference}\n")
