"""Around each attempt, what a worker asks its claimer: may this job start now (a rate limit
counts starts), and, once it left `running`, wake the next job of its concurrency key.

Shared by the worker's main thread and its slot threads (runworkers --concurrency), each
with its own claimer: a claimer holds its thread's database connection.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from django.db import DatabaseError, connections

from ..conf import QueueSettings
from ..databases import queue_database
from ..databases.claiming import Claimer
from ..probes import probe
from ..rows import ClaimedJob
from .connections import reset_connection
from .recording import OutcomeRecorder

logger = logging.getLogger("django_sqlqueue")

#: Whether a freed slot's next job may be taken into it (`JobStarts.may_take_next`).
Taking = Literal["yes", "if alone"] | None


class JobStarts:
    worker_id: str
    conf: QueueSettings
    alias: str
    claimer: Claimer
    recorder: OutcomeRecorder

    def give_back(self, starts: int) -> None:
        """Return unused starts to the --stop-after budget (none without it)."""

    def may_start(self, job: ClaimedJob) -> bool:
        """Whether `job` may start now: not if its queue was paused since it was claimed
        (handed back, unspent: what `pause_queue` promises once it returns); else ask the
        flow gate (a rate limit counts starts; a job that may not start is parked by it). If
        the database cannot answer, the job is handed back."""
        try:
            if job.queue in self.claimer.paused.current():
                probe("paused-hand-back", queue=job.queue, job=job.id)
                self.give_back(1)
                self.unclaim_quietly([job])
                return False
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

    def free_slot(self, job: ClaimedJob) -> ClaimedJob | None:
        """`job` held a concurrency slot and left `running`: take the next job of its key
        into the slot it freed, if this worker may (`may_take_next`), and return it, to run
        next; otherwise wake it for any worker. A success recorded with its batch frees its
        slot at the next claim. If the database cannot answer, the next job waits for its
        own due time (a few seconds)."""
        if job.id not in self.claimer.slots or job.id in self.recorder.succeeded_ids():
            return None
        taking = self.may_take_next()
        try:
            if taking is None:
                self.claimer.free_slot(job.id)
                return None
            queues, excluded = self.served()
            taken = self.claimer.pass_slot(
                self.worker_id, job, self.conf.lease_seconds, queues, excluded, taking == "if alone"
            )
            if taken is None:
                self.give_back(1)
            return taken
        except DatabaseError as exc:
            if taking is not None:
                self.give_back(1)
            logger.warning(
                "Worker %s: could not wake the next job of job %s's concurrency key (%s)",
                self.worker_id,
                job.id,
                exc,
            )
            reset_connection(connections[self.alias])
            return None

    def may_take_next(self) -> Taking:
        """Whether the next job of a freed slot's key may be taken into it (then one start
        of the --stop-after budget is reserved for it): "yes", "if alone" (only while no
        other job is due for this worker), or None (it is woken for any worker instead)."""
        return None

    def served(self) -> tuple[Sequence[str] | None, Sequence[str]]:
        """The queues this worker claims from: named ones, or None and the excluded ones."""
        return None, ()

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
