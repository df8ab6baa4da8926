"""The workers panel: each worker process as its last heartbeat reported it."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..conf import get_settings
from ..models import Job, Worker
from ..queries import stale_before
from ..states import Status
from . import display
from .query_guard import QueryGuardMixin
from .read_only import ReadOnlyAdminMixin

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


#: Most held jobs a worker's page lists (a worker holds at most its slots or its batch).
MOST_LISTED = 200


class StaleWorkerFilter(admin.SimpleListFilter):
    """Workers whose heartbeat is older than three heartbeat intervals."""

    title = gettext_lazy("heartbeat")
    parameter_name = "heartbeat"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, StrOrPromise]]:
        return [("alive", gettext_lazy("Alive")), ("stale", gettext_lazy("Stale"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Worker]) -> QuerySet[Worker]:
        if self.value() == "alive":
            return queryset.filter(last_seen_at__gte=stale_before())
        if self.value() == "stale":
            return queryset.filter(last_seen_at__lt=stale_before())
        return queryset


def is_stale(worker: Worker, now: datetime | None = None) -> bool:
    return worker.last_seen_at < stale_before(now)


class WorkerAdmin(ReadOnlyAdminMixin, QueryGuardMixin, admin.ModelAdmin):
    # The host's PID under its name, times in short form: fits beside the filters at 1280 px.
    list_display = (
        "id",
        "host_column",
        "queues_display",
        "heartbeat",
        "started_column",
        "current_job",
        "jobs_done",
    )
    list_filter = (StaleWorkerFilter, "hostname")
    search_fields = ("id", "hostname")
    fields = (
        "id",
        "hostname",
        "pid",
        "queues_display",
        "heartbeat",
        "started_display",
        "current_job",
        "held_jobs",
        "jobs_done",
    )
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER

    class Media:
        css = {"all": ("django_sqlqueue/admin.css",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Worker]:
        """With how many running jobs each worker holds (a worker with slots runs many)."""
        held = (
            Job.objects.filter(lease_owner=OuterRef("pk"), status=Status.RUNNING)
            .order_by()
            .values("lease_owner")
            .annotate(count=Count("pk"))
            .values("count")
        )
        return (
            super()
            .get_queryset(request)
            .using(get_settings().database)
            .annotate(held=Subquery(held, output_field=IntegerField()))
        )

    @admin.display(description=gettext_lazy("host"), ordering="hostname")
    def host_column(self, obj: Worker) -> SafeString:
        return format_html(
            '{}<span class="sq-sub">{}</span>', obj.hostname, _("PID %(pid)d") % {"pid": obj.pid}
        )

    @admin.display(description=gettext_lazy("queues"))
    def queues_display(self, obj: Worker) -> str:
        return obj.queues.replace(",", ", ") if obj.queues else _("(all queues)")

    @admin.display(description=gettext_lazy("last heartbeat"), ordering="last_seen_at")
    def heartbeat(self, obj: Worker) -> SafeString:
        if is_stale(obj):
            state = display.badge(_("stale"), "dead")
        else:
            state = display.badge(_("alive"), "completed")
        return format_html(
            '{}<span class="sq-sub" title="{}">{}</span>',
            state,
            display.full_time(obj.last_seen_at),
            display.relative(obj.last_seen_at),
        )

    @admin.display(description=gettext_lazy("started"), ordering="started_at")
    def started_column(self, obj: Worker) -> SafeString | str:
        return display.compact_moment(obj.started_at)

    @admin.display(description=gettext_lazy("started"))
    def started_display(self, obj: Worker) -> SafeString | str:
        return display.moment(obj.started_at)

    @admin.display(description=gettext_lazy("current job"))
    def current_job(self, obj: Worker) -> SafeString | str:
        if obj.current_job_id is None:
            return _("idle")
        url = reverse("admin:django_sqlqueue_job_change", args=[obj.current_job_id])
        link = format_html(
            '<a href="{}">{}</a>', url, _("job #%(id)d") % {"id": obj.current_job_id}
        )
        more = (getattr(obj, "held", None) or 0) - 1
        if more <= 0:
            return link
        return format_html(
            '{}<span class="sq-sub">{}</span>',
            link,
            ngettext("and %(count)d more", "and %(count)d more", more) % {"count": more},
        )

    @admin.display(description=gettext_lazy("jobs held"))
    def held_jobs(self, obj: Worker) -> SafeString | str:
        """The running jobs this worker holds: its slots' jobs, or its claimed batch."""
        ids = list(
            Job.objects.using(get_settings().database)
            .filter(lease_owner=obj.pk, status=Status.RUNNING)
            .order_by("pk")
            .values_list("pk", flat=True)[:MOST_LISTED]
        )
        if not ids:
            return _("none")
        links = (
            (reverse("admin:django_sqlqueue_job_change", args=[pk]), _("job #%(id)d") % {"id": pk})
            for pk in ids
        )
        return format_html_join(", ", '<a href="{}">{}</a>', links)
