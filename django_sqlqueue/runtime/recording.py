"""Write what happened to a worker's jobs, each through the fenced door out of `running`
(transitions.py), and tell it once the row says so (reporting.py).

A success is recorded before the worker starts its next job, so a crash re-runs at most the
job that was running; jobs that opted in to batch completion are recorded together at the end
of their claimed batch instead (one statement per distinct result).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.utils import timezone

from ..rows import ClaimedJob
from ..states import Status
from . import transitions
from .activity_log import ActivitySummary
from .connections import reset_connection
from .reporting import job_label, tell, tell_lease_lost
from .runner import AttemptResult, JobRunner

logger = logging.getLogger("django_sqlqueue")

T = TypeVar("T")

#: A successful attempt waiting to be recorded: the job, its runner, result, duration.
Success = tuple[ClaimedJob, "JobRunner | None", AttemptResult, float]

__all__ = ["OutcomeRecorder", "Success", "job_label"]


class OutcomeRecorder:
    """Records attempts' outcomes for one worker, reconnecting through short outages."""

    def __init__(self, worker_id: str, alias: str, activity: ActivitySummary, lease_seconds: float):
        self.worker_id = worker_id
        self.alias = alias
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
                lambda: transitions.complete(job, result.result, now=now, alias=self.alias)
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
        """One statement per distinct result; then each success is told."""
        now = timezone.now()
        results = [(job, out.result) for job, _, out, _ in batch]
        try:
            recorded = self.with_retries(
                lambda: transitions.complete_many(results, now=now, alias=self.alias)
            )
        except DatabaseError as exc:
            self.results_refused(batch, exc)
            return
        self.report_successes(batch, recorded or set())

    def report_successes(self, batch: list[Success], recorded: set[int]) -> None:
        """Tell the successes the database took; warn of the others."""
        completed = 0
        for job, runner, result, duration in batch:
            if job.id not in recorded:
                tell_lease_lost(job, "completed", duration)
                continue
            completed += 1
            tell(job, "completed", duration, result=result.result)
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
            self.record_failure(job, runner, refused, duration)

    def record_failure(
        self,
        job: ClaimedJob,
        runner: JobRunner | None,
        result: AttemptResult,
        duration: float,
    ) -> None:
        try:
            status = self.with_retries(
                lambda: transitions.fail(
                    job,
                    result.error,
                    result.traceback,
                    backoff=runner.backoff if runner else None,
                    retry_delay=result.retry_delay,
                    discard=result.gives_up,
                    outcome=result.outcome,
                    exception=result.exception,
                    alias=self.alias,
                )
            )
        except DatabaseError as exc:
            logger.error(
                "%s: could not record its failure (%s); its lease will expire", job_label(job), exc
            )
            return
        if status is None:
            tell_lease_lost(job, "failed", duration)
            return
        self.activity.record(failed=1)
        ended = "failed" if status == Status.FAILED else "dead"
        tell(job, ended, duration, error=result.error, traceback=result.traceback)
        if runner is not None:
            runner.finished(job, result)

    def record_stop(self, job: ClaimedJob, result: AttemptResult) -> None:
        """The job was cancelled while it ran and its handler stopped: cancelled, no retry."""
        reason = f"Cancelled while running ({result.error or 'stopped'})."
        stopped = self.with_retries(
            lambda: transitions.stop(job, reason, exception=result.exception, alias=self.alias)
        )
        if not stopped:
            tell_lease_lost(job, "cancelled")
            return
        self.activity.record(failed=1)
        tell(job, "cancelled", error=reason)

    def release(self, job: ClaimedJob, reason: str) -> None:
        """Hand a job back to the queue at once, its attempt not spent."""
        self.with_retries(lambda: transitions.release(job, reason, alias=self.alias))

    def release_many(self, jobs: list[ClaimedJob], reason: str) -> None:
        """Hand jobs back to the queue at once, in one statement."""
        if jobs:
            self.with_retries(lambda: transitions.release_many(jobs, reason, alias=self.alias))

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
