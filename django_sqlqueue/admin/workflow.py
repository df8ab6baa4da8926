"""The job page's workflow section: the jobs a job waits for, and those that wait for it.

Batches are part of it: a batch's callback waits for every member, so a member is *waited for
by* its batch, and a callback job *waits for* the batch it is the callback of. Each is shown
with a link to the batch's page, its state and progress.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from ..conf import get_settings
from ..models import Job, JobBatch, JobDependency
from . import display
from .batch_display import Members, batch_url, member_counts, progress_text, state_badge

#: Jobs listed per side; the rest are counted.
SHOWN = 50
#: Where a job's workflow, once read, is kept for the rest of the request (its page asks
#: whether it has one several times).
CACHE = "_sqlqueue_workflow"


@dataclass(frozen=True)
class BatchRow:
    """A batch in a job's workflow: the one it is a member of, or the one whose callback it
    is (`callback`)."""

    batch: JobBatch
    members: Members
    callback: bool


Row = tuple[int, str, str] | BatchRow


def _cached(job: Job, key: str, read: Callable[[], list[Row]]) -> list[Row]:
    cache = job.__dict__.setdefault(CACHE, {})
    if key not in cache:
        cache[key] = read()
    return cache[key]


def _batch_rows(alias: str, batches: list[JobBatch], callback: bool) -> list[Row]:
    counts = member_counts(alias, [batch.pk for batch in batches])
    return [BatchRow(batch, counts[batch.pk], callback) for batch in batches]


def waits_for(job: Job) -> list[Row]:
    """The batch `job` is the callback of, if any (one probe of the callback_job index),
    then (id, name, status) of the jobs it waits for, lowest id first, at most SHOWN + 1."""

    def read() -> list[Row]:
        alias = get_settings().database
        called_back = list(JobBatch.objects.using(alias).filter(callback_job_id=job.pk)[:1])
        links = JobDependency.objects.using(alias).filter(job_id=job.pk)
        rows = links.order_by("depends_on_id").values_list(
            "depends_on_id", "depends_on__name", "depends_on__status"
        )
        return [*_batch_rows(alias, called_back, callback=True), *rows[: SHOWN + 1]]

    return _cached(job, "waits_for", read)


def waited_for_by(job: Job) -> list[Row]:
    """The batch `job` is a member of, if any, then (id, name, status) of the jobs that wait
    for it, lowest id first, at most SHOWN + 1."""

    def read() -> list[Row]:
        alias = get_settings().database
        batches = []
        if job.batch_id is not None:
            batches = list(JobBatch.objects.using(alias).filter(pk=job.batch_id))
        links = JobDependency.objects.using(alias).filter(depends_on_id=job.pk)
        rows = links.order_by("job_id").values_list("job_id", "job__name", "job__status")
        return [*_batch_rows(alias, batches, callback=False), *rows[: SHOWN + 1]]

    return _cached(job, "waited_for_by", read)


def has_workflow(job: Job) -> bool:
    """Whether the job waits, is waited for, or belongs to a batch: read from the row, else
    two index probes (its dependencies, and a batch it is the callback of), once a page."""
    return (
        job.status == Job.Status.WAITING
        or job.has_dependents
        or job.batch_id is not None
        or bool(waits_for(job))
    )


def batch_item(row: BatchRow) -> SafeString:
    """`batch #12 nightly [Closed] 7 of 10 members finished`, and the job's part in it."""
    batch = row.batch
    part = _("this job is its callback") if row.callback else _("this job is one of its members")
    return format_html(
        '<li><a href="{}">{}</a> {} {} <span class="sq-quiet">{} · {}</span></li>',
        batch_url(batch.pk),
        _("batch #%(id)d") % {"id": batch.pk},
        format_html("<code>{}</code>", batch.label) if batch.label else "",
        state_badge(batch),
        progress_text(row.members),
        part,
    )


def job_item(row: tuple[int, str, str]) -> SafeString:
    pk, name, status = row
    return format_html(
        '<li><a href="{}">#{}</a> <code>{}</code> {}</li>',
        reverse("admin:django_sqlqueue_job_change", args=[pk]),
        pk,
        name,
        display.status_badge(status),
    )


def job_list(rows: Sequence[Row]) -> SafeString:
    """Links to the jobs (and the batch), with their status; "none" when empty."""
    if not rows:
        return format_html('<span class="sq-quiet">{}</span>', _("none"))
    items = format_html_join(
        "",
        "{}",
        (
            (batch_item(row) if isinstance(row, BatchRow) else job_item(row),)
            for row in rows[:SHOWN]
        ),
    )
    more = format_html("<li>{}</li>", _("and more")) if len(rows) > SHOWN else ""
    return format_html('<ul class="sq-related">{}{}</ul>', items, more)
