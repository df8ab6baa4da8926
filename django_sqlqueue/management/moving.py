"""Moving jobs from one database to another: a project leaving SQLite for PostgreSQL keeps the
jobs still waiting to run (`manage.py movejobs`, docs/deployment.md).

Each batch is inserted into the destination in one transaction, then deleted from the source.
Nothing is moved while a worker runs on the source, so no job changes under the copy. With
the ids kept (the default), an interrupted move is resumed by running it again: a job already
copied is recognised by its id, name and creation time, and only deleted from the source.
With new ids (`renumber`), a move interrupted between a batch's two commits copies that batch
again when resumed, except its jobs with an idempotency key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from django.core.management.color import no_style
from django.db import connections, transaction
from django.utils import timezone

from ..conf import get_settings
from ..models import Job, Worker
from ..references import draw_nonce
from ..runtime import transitions
from ..runtime.runner import backoff_for
from ..states import FINISHED, Status

#: What a move takes unless told otherwise: the jobs that will still run.
WAITING = (Status.PENDING, Status.FAILED)
#: Ids checked against the destination per query.
CHUNK = 500


class MoveRefused(Exception):
    """The move would lose or duplicate jobs; the message says why and what to do."""


@dataclass
class MoveReport:
    moved: dict[str, int] = field(default_factory=dict)
    #: Copied by an earlier, interrupted run: only deleted from the source this time.
    already_moved: int = 0
    #: Left in the source: the destination holds a job with the same idempotency key.
    key_taken: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.moved.values())


def copy_of(job: Job, *, renumber: bool) -> Job:
    """An unsaved copy of `job` with every stored column (not the generated one)."""
    values = {
        f.attname: getattr(job, f.attname)
        for f in Job._meta.concrete_fields
        if not getattr(f, "generated", False)
    }
    if renumber:
        # A new id makes a new reference: one without a nonce could name a job of the
        # destination that has the same id.
        values["id"] = None
        if values["ref_nonce"] is None:
            values["ref_nonce"] = draw_nonce()
    return Job(**values)


def check_source_is_idle(source: str) -> None:
    """Refuse while workers run on the source; recover the jobs of crashed ones first."""
    lease = get_settings().lease_seconds
    now = timezone.now()
    alive = list(
        Worker.objects.using(source).filter(last_seen_at__gte=now - timedelta(seconds=lease))
    )
    if alive:
        names = ", ".join(worker.id for worker in alive[:5])
        raise MoveRefused(
            f"{len(alive)} worker(s) reported in on {source!r} within the last {lease:g} s "
            f"({names}{', …' if len(alive) > 5 else ''}). Stop the workers that use "
            f"{source!r} (SIGTERM hands their running jobs back), then move."
        )
    # Running jobs whose worker is gone: recovered as the supervisors' housekeeping would.
    transitions.recover_expired_leases(alias=source, now=now, backoff_for=backoff_for)
    running = Job.objects.using(source).filter(status=Status.RUNNING).count()
    if running:
        raise MoveRefused(
            f"{running} job(s) are running on {source!r} under a lease that has not expired. "
            "Wait for their workers to finish (or for the leases to expire), then move."
        )


def check_no_workflows(source: str) -> None:
    """Jobs waiting for others are not moved yet (their dependencies would be split between
    two databases): refuse while any is waiting."""
    waiting = Job.objects.using(source).filter(status=Status.WAITING).count()
    if waiting:
        raise MoveRefused(
            f"{waiting} job(s) of {source!r} wait for other jobs (docs/workflows.md), which "
            "movejobs cannot move: run workers on it until they have run, or cancel them."
        )


def colliding_ids(source_jobs: Iterable[Job], destination: str) -> tuple[set[int], set[int]]:
    """(ids the destination holds for these very jobs, ids it holds for other jobs)."""
    same: set[int] = set()
    other: set[int] = set()
    jobs = {job.pk: job for job in source_jobs}
    ids = list(jobs)
    for start in range(0, len(ids), CHUNK):
        found = Job.objects.using(destination).filter(pk__in=ids[start : start + CHUNK])
        for pk, name, created_at in found.values_list("pk", "name", "created_at"):
            job = jobs[pk]
            (same if (job.name, job.created_at) == (name, created_at) else other).add(pk)
    return same, other


def taken_keys(jobs: Sequence[Job], destination: str) -> set[str]:
    keys = [job.idempotency_key for job in jobs if job.idempotency_key]
    if not keys:
        return set()
    found = Job.objects.using(destination).filter(idempotency_key__in=keys)
    return {key for key in found.values_list("idempotency_key", flat=True) if key}


def move_jobs(
    source: str,
    destination: str,
    *,
    statuses: Sequence[str] = WAITING,
    renumber: bool = False,
    batch_size: int = 500,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
) -> MoveReport:
    """Move the jobs of `statuses` from `source` to `destination`; see the module's doc."""
    if source == destination:
        raise MoveRefused("The source and the destination are the same database.")
    unknown = set(statuses) - set(WAITING) - set(FINISHED)
    if unknown:
        raise MoveRefused(f"Cannot move jobs that are {', '.join(sorted(unknown))}.")
    check_source_is_idle(source)
    check_no_workflows(source)
    selected = Job.objects.using(source).filter(status__in=statuses).order_by("pk")
    report = MoveReport()
    if not renumber:
        _, other = colliding_ids(selected.only("pk", "name", "created_at"), destination)
        if other:
            raise MoveRefused(
                f"{len(other)} job id(s) of {source!r} are taken in {destination!r} by other "
                f"jobs (the lowest: {min(other)}). Move with --renumber to give the moved "
                "jobs new ids."
            )
    if dry_run:
        for status in statuses:
            report.moved[status] = selected.filter(status=status).count()
        return report
    last = 0
    while True:
        batch = list(selected.filter(pk__gt=last)[:batch_size])
        if not batch:
            break
        last = batch[-1].pk
        copied = move_batch(batch, destination, renumber=renumber, report=report)
        Job.objects.using(source).filter(pk__in=copied, status__in=statuses).delete()
        if progress is not None:
            progress(report.total)
    if not renumber:
        reset_id_sequence(destination)
    return report


def move_batch(
    batch: list[Job], destination: str, *, renumber: bool, report: MoveReport
) -> list[int]:
    """Insert one batch into the destination; the source ids that may now be deleted."""
    already: set[int] = set()
    if not renumber:
        already, _ = colliding_ids(batch, destination)
    keys = taken_keys([job for job in batch if job.pk not in already], destination)
    copies: list[Job] = []
    done: list[int] = []
    for job in batch:
        if job.pk in already:
            report.already_moved += 1
            done.append(job.pk)
        elif job.idempotency_key in keys:
            report.key_taken.append(job.pk)
        else:
            copies.append(copy_of(job, renumber=renumber))
            done.append(job.pk)
            report.moved[job.status] = report.moved.get(job.status, 0) + 1
    with transaction.atomic(using=destination):
        Job.objects.using(destination).bulk_create(copies)
    return done


def reset_id_sequence(alias: str) -> None:
    """Jobs inserted with their ids do not advance PostgreSQL's id sequence: move it past
    them, or the next enqueue would take an id in use (MySQL and SQLite keep up by
    themselves)."""
    connection = connections[alias]
    statements = connection.ops.sequence_reset_sql(no_style(), [Job])
    if statements:
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
