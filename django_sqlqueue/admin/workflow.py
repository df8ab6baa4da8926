"""The job page's workflow section: the jobs a job waits for, and those that wait for it."""

from __future__ import annotations

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from ..conf import get_settings
from ..models import Job, JobDependency
from . import display

#: Jobs listed per side; the rest are counted.
SHOWN = 50


def waits_for(job: Job) -> list[tuple[int, str, str]]:
    """(id, name, status) of the jobs `job` waits for, lowest id first, at most SHOWN + 1."""
    links = JobDependency.objects.using(get_settings().database).filter(job_id=job.pk)
    rows = links.order_by("depends_on_id").values_list(
        "depends_on_id", "depends_on__name", "depends_on__status"
    )
    return list(rows[: SHOWN + 1])


def waited_for_by(job: Job) -> list[tuple[int, str, str]]:
    """(id, name, status) of the jobs that wait for `job`, lowest id first, at most SHOWN + 1."""
    links = JobDependency.objects.using(get_settings().database).filter(depends_on_id=job.pk)
    rows = links.order_by("job_id").values_list("job_id", "job__name", "job__status")
    return list(rows[: SHOWN + 1])


def has_workflow(job: Job) -> bool:
    return job.status == Job.Status.WAITING or job.has_dependents or bool(waits_for(job))


def job_list(rows: list[tuple[int, str, str]]) -> SafeString:
    """Links to the jobs, with their status; "none" when empty."""
    if not rows:
        return format_html('<span class="sq-quiet">{}</span>', _("none"))
    items = format_html_join(
        "",
        '<li><a href="{}">#{}</a> <code>{}</code> {}</li>',
        (
            (
                reverse("admin:django_sqlqueue_job_change", args=[pk]),
                pk,
                name,
                display.status_badge(status),
            )
            for pk, name, status in rows[:SHOWN]
        ),
    )
    more = format_html("<li>{}</li>", _("and more")) if len(rows) > SHOWN else ""
    return format_html('<ul class="sq-related">{}{}</ul>', items, more)
