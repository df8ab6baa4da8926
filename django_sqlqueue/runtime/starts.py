"""Around each attempt, what a worker asks its claimer: may this job start now (a rate limit
counts starts), and, once it left `running`, wake the next job of its concurrency key.

Shared by the worker's main thread and its slot threads (runworkers --concurrency), each
with its own claimer: a claimer holds its thread's database connection.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, connections

from ..databases import queue_database
from ..databases.claiming import Claimer
from ..rows import ClaimedJob
from .connections import reset_connection
from .recording import OutcomeRecorder

logger = logging.getLogger("django_sqlqueue")


class JobStarts:
    worker_id: str
    alias: str
    claimer: Claimer
    recorder: OutcomeRecorder

    def give_back(self, starts: int) -> None:
        """Return unused starts to the --stop-after budget (none without it)."""

    def may_start(self, job: ClaimedJob) -> bool:
        """Ask the flow gate whether `job` may start now (a rate limit counts starts); a job
        that may not is parked by it. If the database cannot answer, the job is handed back."""
        try:
            if self.claimer.admit_start(self.worker_id, job):
                return True
            self.give_back(1)
            return False
        except DatabaseError as exc:
            logger.warning(
                "Worker %s: could not count job %s's start (%s); handing it back",
                self.worker_id,
                job.id,
                exc,
            )
            reset_connection(connections[self.alias])
            self.give_back(1)
            self.unclaim_quietly([job])
            return False

    def free_slot(self, job: ClaimedJob) -> None:
        """`job` held a concurrency slot and left `running`: wake the next job of its key for
        any worker. A success recorded with its batch frees its slot at the next claim. If
        the database cannot answer, the next job waits for its own due time (a few seconds)."""
        if job.id not in self.claimer.slots or job.id in self.recorder.succeeded_ids():
            return
        try:
            self.claimer.free_slot(job.id)
        except DatabaseError as exc:
            logger.warning(
                "Worker %s: could not wake the next job of job %s's concurrency key (%s)",
                self.worker_id,
                job.id,
                exc,
            )
            reset_connection(connections[self.alias])

    def unclaim_quietly(self, jobs: list[ClaimedJob]) -> int:
        """Hand back jobs this worker will not start (fenced: those it lost stay with their
        new owner). When the database cannot be written, lease recovery takes them once
        this worker's heartbeat runs past their lease without renewing it."""
        try:
            return queue_database(self.alias).claimer().unclaim(self.worker_id, jobs)
        except DatabaseError as exc:
            logger.warning("Worker %s: could not hand back jobs (%s)", self.worker_id, exc)
            connections[self.alias].close()
            return 0
