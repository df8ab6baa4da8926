"""Store a job that waits for others (`.using(after=[...])`): the job, `waiting`, and one
JobDependency per job it waits for, in one transaction inside the caller's."""

from __future__ import annotations

from django.db import transaction

from ..databases import queue_database
from ..databases.dependencies import decide
from ..exceptions import InvalidJobError
from ..models import Job, JobDependency
from ..rows import NewJob
from ..states import FINISHED, Status


def store_waiting(new_job: NewJob, alias: str) -> Job:
    """INSERT `new_job` as `waiting`, after the jobs it names; InvalidJobError (nothing
    stored, the caller's transaction usable) if one of them does not exist.

    The jobs it waits for that have not finished are marked `has_dependents`, so that the
    worker that finishes each releases it at once. If all had already finished it is
    decided before this returns (pending, or cancelled as its failure policy says)."""
    with transaction.atomic(using=alias):
        statuses = dict(
            Job.objects.using(alias).filter(id__in=new_job.after).values_list("id", "status")
        )
        missing = [job_id for job_id in new_job.after if job_id not in statuses]
        if missing:
            raise InvalidJobError(
                f"Job {new_job.name!r}: after= names "
                f"{', '.join(f'#{job_id}' for job_id in missing)}, which "
                f"{'does' if len(missing) == 1 else 'do'} not exist (never stored, rolled "
                "back, or purged). Nothing was stored."
            )
        job = _waiting_model(new_job)
        job.save(using=alias, force_insert=True)
        JobDependency.objects.using(alias).bulk_create(
            JobDependency(
                job_id=job.pk,
                depends_on_id=depends_on,
                run_on_failure=new_job.run_on_dependency_failure,
                done=statuses[depends_on] in FINISHED,
            )
            for depends_on in new_job.after
        )
        unfinished = [i for i, status in statuses.items() if status not in FINISHED]
        if unfinished:
            Job.objects.using(alias).filter(id__in=unfinished, has_dependents=False).update(
                has_dependents=True
            )
        else:
            decide(queue_database(alias), [job.pk])
            job.refresh_from_db(using=alias, fields=["status", "run_at", "last_error"])
    return job


def _waiting_model(new_job: NewJob) -> Job:
    return Job(
        name=new_job.name,
        queue=new_job.queue,
        args=new_job.args,
        kwargs=new_job.kwargs,
        status=Status.WAITING,
        priority=new_job.priority,
        max_attempts=new_job.max_attempts,
        run_at=new_job.run_at,
        created_at=new_job.created_at,
        updated_at=new_job.created_at,
        backend=new_job.backend,
        trace_context=new_job.trace_context,
        concurrency_key=new_job.concurrency_key,
        batch_id=new_job.batch_id,
        ref_nonce=new_job.ref_nonce,
    )
