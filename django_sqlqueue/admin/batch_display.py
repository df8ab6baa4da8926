"""How the batch admin shows a batch: its state badge, its members counted by status (all the
batches of a list page in one grouped read of the job table's (batch, status) index), its
progress, and links to its page and to its members in the job list."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Count
from django.urls import reverse
from django.utils.formats import number_format
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, pgettext_lazy

from ..conf import get_settings
from ..models import Job, JobBatch
from ..states import FINISHED_VALUES, Status
from . import display

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

#: The attribute the list sets on each batch of its page: its members by status.
MEMBERS = "sq_members"


#: State → label, CSS modifier (the job badges' colours) and what it means, on hover.
STATE_LABELS: dict[str, StrOrPromise] = {
    "open": pgettext_lazy("batch state", "Open"),
    "closed": pgettext_lazy("batch state", "Closed"),
    "finished": pgettext_lazy("batch state", "Finished"),
}
STATE_CLASSES = {"open": "pending", "closed": "running", "finished": "completed"}
STATE_HELP: dict[str, StrOrPromise] = {
    "open": gettext_lazy("Jobs may still join it; its callback waits until it is closed."),
    "closed": gettext_lazy("No job may join it any more; waiting for its members to finish."),
    "finished": gettext_lazy("Every member has finished and its callback was stored."),
}


def batch_url(batch_id: int) -> str:
    return reverse("admin:django_sqlqueue_jobbatch_change", args=[batch_id])


def jobs_url(batch_id: int, status: str | None = None) -> str:
    """The job list filtered to the batch's members (and to one status)."""
    params = {"batch": str(batch_id)}
    if status:
        params["status__exact"] = status
    return display.changelist_url(**params)


# Members ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Members:
    """A batch's members counted by status."""

    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def finished(self) -> int:
        return sum(n for status, n in self.counts.items() if status in FINISHED_VALUES)

    @property
    def unfinished(self) -> int:
        return self.total - self.finished

    def of(self, status: str) -> int:
        return self.counts.get(status, 0)


def member_counts(alias: str, batch_ids: Iterable[int]) -> dict[int, Members]:
    """The members of each batch by status: one grouped read of the (batch, status) index."""
    ids = sorted(set(batch_ids))
    found: dict[int, dict[str, int]] = {batch_id: {} for batch_id in ids}
    if ids:
        rows = (
            Job.objects.using(alias)
            .filter(batch_id__in=ids)
            .values_list("batch_id", "status")
            .annotate(n=Count("id"))
            .order_by()
        )
        for batch_id, status, n in rows:
            found[batch_id][status] = n
    return {batch_id: Members(counts) for batch_id, counts in found.items()}


def members_of(batch: JobBatch) -> Members:
    """The batch's members by status: as its list page read them, else read now (once)."""
    members = getattr(batch, MEMBERS, None)
    if members is None:
        members = member_counts(get_settings().database, [batch.pk])[batch.pk]
        setattr(batch, MEMBERS, members)
    return members


# Pieces of HTML, shared with the job page's workflow section --------------------------------


def state_badge(batch: JobBatch) -> SafeString:
    """Open, Closed or Finished; a second badge if someone cancelled it."""
    state = batch.state
    badge = display.badge(str(STATE_LABELS[state]), STATE_CLASSES[state], str(STATE_HELP[state]))
    if batch.cancelled_at is None:
        return badge
    return format_html(
        "{} {}",
        badge,
        display.badge(
            _("cancelled"),
            "cancelled",
            _("Cancelled %(when)s") % {"when": display.full_time(batch.cancelled_at)},
        ),
    )


def progress_text(members: Members) -> str:
    """`7 of 10 members finished`."""
    return ngettext(
        "%(finished)s of %(total)s member finished",
        "%(finished)s of %(total)s members finished",
        members.total,
    ) % {
        "finished": number_format(members.finished, force_grouping=True),
        "total": number_format(members.total, force_grouping=True),
    }


def progress_bar(members: Members) -> SafeString:
    """A bar and `7 of 10 members finished`; "no members" for an empty batch."""
    if not members.total:
        return format_html('<span class="sq-quiet">{}</span>', _("no members"))
    text = progress_text(members)
    return format_html(
        '<span class="sq-progress"><progress max="{}" value="{}">{}</progress> {}</span>',
        members.total,
        members.finished,
        text,
        text,
    )


def outcomes(members: Members) -> str:
    """`2 dead · 1 cancelled`: the members that finished without completing."""
    dead, cancelled = members.of(Status.DEAD.value), members.of(Status.CANCELLED.value)
    parts = []
    if dead:
        parts.append(
            ngettext("%(count)s dead", "%(count)s dead", dead)
            % {"count": number_format(dead, force_grouping=True)}
        )
    if cancelled:
        parts.append(
            ngettext("%(count)s cancelled", "%(count)s cancelled", cancelled)
            % {"count": number_format(cancelled, force_grouping=True)}
        )
    return " · ".join(parts)
