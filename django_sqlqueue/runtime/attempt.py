"""One attempt of one job in a worker: run it under its timeout and the watch, then record how
it ended — before the worker starts its next job, unless the job opted in to batching.

An `atomic=True` job runs inside `transaction.atomic()` on the queue database and its
completion is written in that same transaction: its writes commit exactly once, with it.
"""

from __future__ import annotations

import logging
import signal
import time
from typing import Protocol

from django.db import DatabaseError, transaction

from .. import signals, tracing
from ..attempts import AttemptOutcome, exception_path
from ..conf import QueueSettings
from ..context import AttemptControl
from ..exceptions import JobCancelled, JobTimeout, TransactionLeftOpen, WorkerShutdown
from ..rows import ClaimedJob
from . import transitions
from .connections import LeakGuard
from .dispatch import DurationEstimates
from .recording import OutcomeRecorder
from .reporting import job_label
from .runner import AttemptResult, JobRunner, execute, resolve_runner
from .watch import AttemptWatch

logger = logging.getLogger("django_sqlqueue")

#: Seconds past its timeout before a handler that ignores the alarm costs its process.
HARD_TIMEOUT_GRACE = 5.0


class AttemptHost(Protocol):
    """What an attempt needs of its worker (runtime/worker.py's JobWorker)."""

    worker_id: str
    alias: str
    #: 0 in the worker's main thread (timeouts by SIGALRM); a pool slot's number in a slot
    #: thread, which no signal reaches (the watch keeps its timeout: see watch.py).
    slot: int
    conf: QueueSettings
    estimates: DurationEstimates
    recorder: OutcomeRecorder
    watch: AttemptWatch
    in_handler: bool
    jobs_done: int

    def set_current(
        self,
        job: ClaimedJob | None,
        deadline: float | None,
        control: AttemptControl | None = None,
    ) -> None: ...

    def holds_more(self) -> bool: ...

    def use_start(self) -> None: ...

    def observe_duration(self, name: str, seconds: float) -> None: ...

    def batches_completion(self, runner: JobRunner | None) -> bool: ...


class AttemptRunner:
    def __init__(self, worker: AttemptHost) -> None:
        self.worker = worker
        self.guard = LeakGuard()

    def batch_started(self) -> None:
        """Note the connections already in a transaction (a caller's, under run_jobs()):
        the same for every attempt of the batch, since each attempt's check resets any other
        it finds open — one scan per batch instead of one per attempt."""
        self.guard.before()

    def run(self, job: ClaimedJob) -> None:
        worker = self.worker
        runner = resolve_runner(job)
        began = time.monotonic()
        timeout = (runner.timeout if runner else None) or worker.conf.default_timeout
        control = AttemptControl()
        worker.set_current(job, began + timeout + HARD_TIMEOUT_GRACE if timeout else None, control)
        worker.use_start()  # after set_current: the supervisor never sees it idle
        budget_end = began + worker.estimates.budget if worker.holds_more() else None
        worker.watch.begin(job, control, budget_end, slot=worker.slot, timeout=timeout)
        alarm = timeout if timeout and not worker.slot else None
        atomic = runner is not None and runner.atomic
        result: AttemptResult | None = None
        signals.send(signals.job_started, job)
        span = tracing.start_job_span(job)  # OpenTelemetry, when installed: current meanwhile
        leak = ""
        try:
            try:
                if alarm:
                    signal.setitimer(signal.ITIMER_REAL, alarm)
                worker.in_handler = True
                if atomic:
                    result = self.run_atomic(job, runner, timeout, control)
                else:
                    result = self.call(job, runner, timeout, control)
            finally:
                worker.in_handler = False
                if alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                # Before anything is written: the worker's writes must not join a
                # transaction the handler left open.
                leak = self.guard.after()
        except JobTimeout as exc:  # the alarm fired just as the handler returned
            result = result or AttemptResult(
                AttemptOutcome.TIMEOUT,
                error=f"Timed out after {timeout:g} s.",
                exception=exception_path(exc),
            )
        except JobCancelled as exc:  # the interrupt came just as the handler returned
            result = result or AttemptResult(
                AttemptOutcome.ERROR, error=str(exc), exception=exception_path(exc)
            )
        except WorkerShutdown:
            if result is None:
                worker.watch.end(worker.slot)
                worker.set_current(None, None)
                logger.warning(
                    "%s interrupted by shutdown; handed back to the queue", job_label(job)
                )
                worker.recorder.release(job, "The worker shut down before the job finished.")
                return
        except DatabaseError as exc:  # an atomic job's transaction could not commit
            result = AttemptResult(
                AttemptOutcome.ERROR,
                error=f"The job's transaction could not be committed: {exc}",
                exception=exception_path(exc),
            )
        finally:
            worker.watch.end(worker.slot)
            span.finish(result)
        if leak:
            result = left_open(job, leak)
        duration = time.monotonic() - began
        worker.observe_duration(job.name, duration)
        self.record(job, runner, result, duration, control, atomic)
        worker.set_current(None, None)
        worker.jobs_done += 1

    def call(
        self,
        job: ClaimedJob,
        runner: JobRunner | None,
        timeout: float | None,
        control: AttemptControl,
    ) -> AttemptResult:
        """Run the job's code (not `atomic`) and say how it ended."""
        return execute(job, runner, self.worker.worker_id, timeout, control)

    def run_atomic(
        self,
        job: ClaimedJob,
        runner: JobRunner | None,
        timeout: float | None,
        control: AttemptControl,
    ) -> AttemptResult:
        """The handler and the job's completion in one transaction; anything but a recorded
        completion rolls the handler's writes back."""
        worker = self.worker
        alias = worker.alias
        with transaction.atomic(using=alias):
            result = execute(job, runner, worker.worker_id, timeout, control)
            if not result.is_success:
                transaction.set_rollback(True, using=alias)
                return result
            if transitions.complete(job, result.result, alias=alias, in_transaction=True):
                result.recorded = True
            else:
                transaction.set_rollback(True, using=alias)  # the lease was lost
                result.recorded = False
        return result

    def record(
        self,
        job: ClaimedJob,
        runner: JobRunner | None,
        result: AttemptResult,
        duration: float,
        control: AttemptControl,
        atomic: bool,
    ) -> None:
        recorder = self.worker.recorder
        if not result.is_success and control.cancelled.is_set():
            recorder.record_stop(job, result)
        elif not result.is_success:
            recorder.record_failure(job, runner, result, duration)
        elif atomic:
            recorded = {job.id} if result.recorded else set()
            recorder.report_successes([(job, runner, result, duration)], recorded)
        elif self.worker.batches_completion(runner):
            recorder.add_success(job, runner, result, duration)
        else:
            recorder.record_success(job, runner, result, duration)


def left_open(job: ClaimedJob, leak: str) -> AttemptResult:
    """The attempt whose handler left a transaction open: failed, whatever it returned (its
    writes in that transaction, and an atomic job's completion, were rolled back)."""
    error = (
        f"The handler left a transaction open on {leak}; the worker rolled it back (with the "
        "writes made in it) and reset the connection. Exit every transaction.atomic() block "
        "and leave autocommit on."
    )
    logger.error("%s: %s", job_label(job), error)
    return AttemptResult(
        AttemptOutcome.ERROR, error=error, exception=exception_path(TransactionLeftOpen())
    )
