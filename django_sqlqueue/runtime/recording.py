"""Write what happened to a worker's jobs, each write fenced by the lease, and tell signals
and the activity log once the row says so.

A success is recorded before the worker starts its next job, so a crash re-runs at most the
job that was running; jobs that opted in to batch completion are recorded together at the end
of their claimed batch instead (one statement per distinct result).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.utils import timezone

from .. import outcomes, signals, transitions
from ..databases.completing import Completer
from ..rows import ClaimedJob
from ..states import Status
from .activity_log import ActivitySummary
from .connections import reset_connection
from .runner import AttemptResult, JobRunner

logger = logging.getLogger("django_sqlqueue")

T = TypeVar("T")

#: A successful attempt waiting to be recorded: the job, its runner, result, duration.
Success = tuple[ClaimedJob, "JobRunner | None", AttemptResult, float]


def job_label(job: ClaimedJob) -> str:
    return f"Job {job.id} {job.name} attempt {job.attempts}/{job.max_attempts}"


class OutcomeRecorder:
    """Records attempts' outcomes for one worker, reconnecting through short outages."""

    def __init__(
        self,
        worker_id: str,
        alias: str,
        completer: Completer,
        activity: ActivitySummary,
        lease_seconds: float,
    ) -> None:
        self.worker_id = worker_id
        self.alias = alias
        self.completer = completer
        self.activity = activity
        self.lease_seconds = lease_seconds
        self.succeeded: list[Success] = []

    def succeeded_ids(self) -> list[int]:
        """Jobs done but not yet recorded (their leases are still held)."""
        return [entry[0].id for entry in list(self.succeeded)]

    def add_success(
        self, job: ClaimedJob, runner: JobRunner | None, result: AttemptResult, duration: float
    ) -> None:
        self.succeeded.append((job, runner, result, duration))

    def record_success(
        self, job: ClaimedJob, runner: JobRunner | None, result: AttemptResult, duration: float
    ) -> None:
        """Record one success now: durable before the worker starts its next job."""
        now = timezone.now()
        try:
            written = self.with_retries(
                lambda: self.completer.complete_one(job, result.result, now)
            )
        except DatabaseError as exc:
            self.results_refused([(job, runner, result, duration)], exc)
            return
        self.report_successes([(job, runner, result, duration)], {job.id} if written else set())

    def flush(self) -> None:
        """Record the successes held back for batching (jobs that opted in)."""
        if self.succeeded:
            batch, self.succeeded = self.succeeded, []
            self.record_successes(batch)

    def record_successes(self, batch: list[Success]) -> None:
        """One statement per distinct result; then signals and the activity log."""
        now = timezone.now()
        try:
            results = [(job, out.result) for job, _, out, _ in batch]
            recorded = self.with_retries(lambda: self.completer.complete(results, now))
        except DatabaseError as exc:
            self.results_refused(batch, exc)
            return
        self.report_successes(batch, recorded or set())

    def report_successes(self, batch: list[Success], recorded: set[int]) -> None:
        """Log, signal and count the successes the database took; warn of the others."""
        debug = logger.isEnabledFor(logging.DEBUG)
        completed = 0
        for job, runner, result, duration in batch:
            if job.id not in recorded:
                logger.warning(
                    "%s finished in %.1f ms but its lease was lost; its result was discarded",
                    job_label(job),
                    duration * 1000,
                )
                continue
            completed += 1
            outcomes.attempt_ended(job, outcomes.COMPLETED, duration)
            if debug:
                logger.debug("%s completed in %.1f ms", job_label(job), duration * 1000)
            signals.send(signals.job_completed, job, result=result.result)
            if runner is not None:
                runner.finished(job, result)
        self.activity.record(completed=completed)

    def results_refused(self, batch: list[Success], exc: DatabaseError) -> None:
        """The database refused to store the batch's results (not an outage): say so on each
        job instead of leaving it running until its lease expires."""
        logger.error("Worker %s: the database refused results: %s", self.worker_id, exc)
        for job, runner, _, duration in batch:
            refused = AttemptResult(
                AttemptResult.BAD_RESULT, error=f"The database refused the result: {exc}"
            )
            self.record_failure(job, runner, refused, job.started_at, duration)

    def record_failure(
        self,
        job: ClaimedJob,
        runner: JobRunner | None,
        result: AttemptResult,
        started_at: Any,
        duration: float,
    ) -> None:
        label = job_label(job)
        try:
            status = self.with_retries(
                lambda: transitions.fail(
                    job,
                    result.error,
                    result.traceback,
                    started_at=started_at,
                    backoff=runner.backoff if runner else None,
                    retry_delay=result.retry_delay,
                    discard=result.gives_up,
                    outcome=result.outcome,
                    exception=result.exception,
                    alias=self.alias,
                )
            )
        except DatabaseError as exc:
            logger.error("%s: could not record its failure (%s); its lease will expire", label, exc)
            return
        millis = duration * 1000
        if status is None:
            logger.warning(
                "%s failed in %.1f ms but its lease was lost; the failure was not recorded",
                label,
                millis,
            )
            return
        self.activity.record(failed=1)
        outcome = outcomes.FAILED if status == Status.FAILED else outcomes.DEAD
        outcomes.attempt_ended(job, outcome, duration, result.error)
        if status == Status.FAILED:
            logger.warning("%s failed in %.1f ms (%s); will retry", label, millis, result.error)
            if result.traceback:
                logger.info("%s traceback:\n%s", label, result.traceback)
            signals.send(signals.job_failed, job, error=result.error)
        else:
            logger.error("%s is dead after %.1f ms: %s", label, millis, result.error)
            if result.traceback:
                logger.error("%s traceback:\n%s", label, result.traceback)
            signals.send(signals.job_dead, job, error=result.error)
        if runner is not None:
            runner.finished(job, result)

    def release(self, job: ClaimedJob, reason: str) -> None:
        """Hand a job back to the queue at once, its attempt not spent."""
        self.with_retries(lambda: transitions.release(job, reason, alias=self.alias))

    def with_retries(self, write: Callable[[], T]) -> T | None:
        """Run a database write, reconnecting through an outage for up to one lease.

        Past that the lease has expired anyway, and the job belongs to whoever recovers it.
        Only connection trouble is retried; an error the database would repeat is raised.
        """
        deadline = time.monotonic() + self.lease_seconds
        delay = 0.2
        while True:
            try:
                return write()
            except (OperationalError, InterfaceError) as exc:
                if time.monotonic() > deadline:
                    logger.error("Worker %s: giving up on a write: %s", self.worker_id, exc)
                    return None
                logger.warning("Worker %s: database error (%s); retrying", self.worker_id, exc)
                reset_connection(connections[self.alias])
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
