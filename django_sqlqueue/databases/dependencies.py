"""Workflows: what happens to the jobs that wait for a job once it has finished.

A waiting job (status `waiting`, one `JobDependency` per job it waits for) is decided once
every job it waits for has finished: READY (pending, due now) when all completed, or when it
was enqueued with `on_dependency_failure="run"`; else ABANDON (cancelled, marked
ABANDONED_OWNER), and the jobs that wait for it are decided in turn.

Each decision is one conditional UPDATE from `waiting`, so two deciders (the worker that
finished the last dependency, another that finished one beside it, a supervisor's sweep)
change a job once. Each runs after the finishing write has committed, on a fresh read: of two
dependencies finished at once, the later decider sees both. A decision lost to a crash, or
never attempted (a job enqueued after a dependency its worker had already claimed), is made by
the supervisors' sweep (`Sweeper`). "Anything left to wait for?" is one index probe: each
edge is marked `done` when its dependency is seen finished, so a job waiting for a thousand
others costs each of their ends a probe, not a read of the thousand.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db import DatabaseError, transaction
from django.db.models import Case, Exists, F, OuterRef, Value, When
from django.utils import timezone

from ..models import Job, JobDependency
from ..states import (
    ABANDON,
    ABANDONED_OWNER,
    FINISHED_VALUES,
    READY,
    REWAIT,
    Status,
)
from . import batches

logger = logging.getLogger("django_sqlqueue")

#: Most waiting jobs decided per statement.
BATCH = 500


class QueueOn(Protocol):
    """The queue database the decisions are written to (a `QueueDatabase`)."""

    alias: str

    def wake(self, queue: str) -> None:
        """Wake idle workers of `queue`: a job of it became due now."""


@dataclass
class Decided:
    """What one pass decided: the jobs made ready and the jobs abandoned."""

    ready: list[int] = field(default_factory=list)
    abandoned: list[int] = field(default_factory=list)

    def add(self, other: Decided) -> None:
        self.ready += other.ready
        self.abandoned += other.abandoned


def release_dependents(
    database: QueueOn, finished: Iterable[int], *, known_finished: bool = False
) -> Decided:
    """Mark the edges of the `finished` jobs done, then decide their waiting dependents that
    have nothing left to wait for, and, for those abandoned, the jobs that wait for them, and
    so on. A job of `finished` that has not in fact finished is left out, unless the caller
    knows they all have (`known_finished`: the door, which just wrote their exits)."""
    alias = database.alias
    decided = Decided()
    ids = list(finished)
    while ids:
        abandoned: list[int] = []
        for start in range(0, len(ids), BATCH):
            chunk = ids[start : start + BATCH]
            edges = JobDependency.objects.using(alias).filter(depends_on_id__in=chunk, done=False)
            if not known_finished:
                edges = edges.filter(depends_on__status__in=FINISHED_VALUES)
            edges.update(done=True)
            step = decide(database, ready_dependents(alias, chunk))
            decided.ready += step.ready
            abandoned += step.abandoned
        decided.abandoned += abandoned
        ids = abandoned
        known_finished = True  # the abandoned: cancelled just now
    return decided


def ready_dependents(alias: str, finished: Sequence[int]) -> list[int]:
    """The waiting jobs that wait for one of `finished` and have no edge left undone, in one
    query: one probe of the (job, done) index per dependent, however many jobs it waits
    for."""
    undone = JobDependency.objects.using(alias).filter(job_id=OuterRef("job_id"), done=False)
    ready = (
        JobDependency.objects.using(alias)
        .filter(depends_on_id__in=finished, job__status=Status.WAITING)
        .filter(~Exists(undone))
        .values_list("job_id", flat=True)
        .distinct()
    )
    return sorted(ready)


def nothing_left(alias: str, waiting: Sequence[int]) -> list[int]:
    """Those of the `waiting` jobs none of whose edges is left undone: one probe of the
    (job, done) index each, whatever the number of jobs they wait for."""
    undone = JobDependency.objects.using(alias).filter(job_id=OuterRef("pk"), done=False)
    ready = (
        Job.objects.using(alias)
        .filter(id__in=waiting, status=Status.WAITING)
        .filter(~Exists(undone))
        .order_by("id")
        .values_list("id", flat=True)
    )
    return list(ready)


def release_dependents_after_commit(database: QueueOn, finished: Sequence[int]) -> None:
    """`release_dependents` once the current transaction commits (at once outside one). An
    error is logged, not raised: the finishing write stands, and the sweep decides later."""

    def release() -> None:
        try:
            release_dependents(database, finished, known_finished=True)
        except DatabaseError as exc:
            logger.warning(
                "Could not release the jobs waiting for %s (%s); the supervisors' sweep will.",
                ", ".join(f"#{job_id}" for job_id in finished),
                exc,
            )

    transaction.on_commit(release, using=database.alias)


def decide(database: QueueOn, waiting: Sequence[int]) -> Decided:
    """READY or ABANDON each of these waiting jobs whose dependencies have all finished."""
    decided = Decided()
    for start in range(0, len(waiting), BATCH):
        decided.add(_decide(database, waiting[start : start + BATCH]))
    return decided


def _decide(database: QueueOn, waiting: Sequence[int]) -> Decided:
    alias = database.alias
    edges: dict[int, list[tuple[int, str, bool]]] = defaultdict(list)
    rows = JobDependency.objects.using(alias).filter(job_id__in=waiting)
    for job_id, depends_on, status, run_on_failure in rows.values_list(
        "job_id", "depends_on_id", "depends_on__status", "run_on_failure"
    ):
        edges[job_id].append((depends_on, status, run_on_failure))
    ready: list[int] = []
    failed_by: dict[int, tuple[int, str]] = {}
    for job_id in waiting:
        links = edges.get(job_id, [])  # none left: each job it waited for was deleted
        if any(status not in FINISHED_VALUES for _, status, _ in links):
            continue
        failed = [
            (depends_on, status)
            for depends_on, status, run_on_failure in links
            if status != Status.COMPLETED and not run_on_failure
        ]
        if failed:
            failed_by[job_id] = min(failed)
        else:
            ready.append(job_id)
    decided = Decided()
    now = timezone.now()
    if ready:
        queues = set(Job.objects.using(alias).filter(id__in=ready).values_list("queue", flat=True))
        # Due now, or at the run_at it was enqueued with if that is later.
        run_at = Case(When(run_at__lt=now, then=Value(now)), default=F("run_at"))
        if (
            Job.objects.using(alias)
            .filter(id__in=ready, status__in=READY.sources)
            .update(status=Status.PENDING, run_at=run_at, updated_at=now)
        ):
            decided.ready = ready
            for queue in sorted(queues):
                database.wake(queue)
    for job_id, (depends_on, status) in sorted(failed_by.items()):
        changed = (
            Job.objects.using(alias)
            .filter(id=job_id, status__in=ABANDON.sources)
            .update(
                status=Status.CANCELLED,
                finished_at=now,
                updated_at=now,
                lease_owner=ABANDONED_OWNER,
                last_error=f"Not run: job #{depends_on}, which it waits for, ended {status}.",
            )
        )
        if changed:
            decided.abandoned.append(job_id)
    if decided.abandoned:
        # A cancelled member may have been the last of its batch.
        in_batches = Job.objects.using(alias).filter(id__in=decided.abandoned, batch__isnull=False)
        batches.note(alias, in_batches.values_list("batch_id", flat=True).distinct())
    return decided


class Sweeper:
    """Finds, a slice per call, what the workers' own releases missed: an edge whose
    dependency finished but was never marked done (a worker that died after the dependency's
    exit; a dependent enqueued after its dependency was claimed, whose worker did not know to
    release it), and a waiting job with no edge left undone (a death between the marking and
    the decision; a dependency deleted). Each call reads at most `limit` undone edges and
    `limit` waiting jobs, going on from where the last call stopped, so its cost stays bounded
    however many jobs wait. Safe beside any other decider."""

    def __init__(self, database: QueueOn, limit: int = BATCH) -> None:
        self.database = database
        self.limit = limit
        self.edge_cursor = 0
        self.job_cursor = 0

    def sweep(self) -> Decided:
        alias = self.database.alias
        edges = list(
            JobDependency.objects.using(alias)
            .filter(done=False, id__gt=self.edge_cursor)
            .order_by("id")
            .values_list("id", "depends_on_id", "depends_on__status")[: self.limit]
        )
        self.edge_cursor = edges[-1][0] if len(edges) == self.limit else 0
        finished = {depends_on for _, depends_on, status in edges if status in FINISHED_VALUES}
        decided = release_dependents(self.database, sorted(finished))
        waiting = list(
            Job.objects.using(alias)
            .filter(status=Status.WAITING, id__gt=self.job_cursor)
            .order_by("id")
            .values_list("id", flat=True)[: self.limit]
        )
        self.job_cursor = waiting[-1] if len(waiting) == self.limit else 0
        step = decide(self.database, nothing_left(alias, waiting))
        decided.add(step)
        if step.abandoned:
            decided.add(release_dependents(self.database, step.abandoned))
        return decided


def rewait_abandoned(alias: str, requeued: Iterable[int]) -> int:
    """REWAIT: the jobs abandoned because one of `requeued` failed wait again (and, in turn,
    those abandoned because of them). A job a person cancelled is left alone."""
    total = 0
    ids = list(requeued)
    now = timezone.now()
    while ids:
        # Their edges are not done any more (those of jobs that did not go back: left).
        JobDependency.objects.using(alias).filter(depends_on_id__in=ids, done=True).exclude(
            depends_on__status__in=FINISHED_VALUES
        ).update(done=False)
        abandoned = list(
            Job.objects.using(alias)
            .filter(
                dependency_links__depends_on_id__in=ids,
                status__in=REWAIT.sources,
                lease_owner=ABANDONED_OWNER,
            )
            .values_list("id", flat=True)
            .distinct()
        )
        if not abandoned:
            break
        total += (
            Job.objects.using(alias)
            .filter(id__in=abandoned, status__in=REWAIT.sources, lease_owner=ABANDONED_OWNER)
            .update(
                status=Status.WAITING,
                finished_at=None,
                updated_at=now,
                lease_owner="",
                last_error="",
            )
        )
        ids = abandoned
    return total


def results_of_dependencies(alias: str, job_id: int) -> dict[int, Any]:
    """What each job `job_id` waited for returned, by id (`context.dependency_results`)."""
    links = JobDependency.objects.using(alias).filter(job_id=job_id).order_by("depends_on_id")
    return dict(links.values_list("depends_on_id", "depends_on__result"))
