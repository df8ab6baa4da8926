"""Jobs the tests enqueue; discovered through the `jobs` autodiscovery like a user's app."""

import os
import time

from django.dispatch import receiver

from django_sqlqueue import Discard, Retry, job
from django_sqlqueue.signals import job_completed, job_dead, job_started

from .models import Execution, SignalLog


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


@job("tests.timeout", takes_context=True, timeout=1, max_attempts=2)
def too_slow(context):
    _record(context, "timeout")
    time.sleep(30)


@job("tests.bad_result")
def bad_result():
    return {1, 2, 3}


@job("tests.exit", takes_context=True, max_attempts=1)
def hard_exit(context):
    _record(context, "exit")
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
