"""The job admin: a list fast on millions of rows, a read-only detail page, and actions."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.apps import apps
from django.contrib import admin, messages
from django.contrib.admin.options import ShowFacets
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..conf import get_settings
from ..models import Job, reference_q
from ..references import parse_reference
from ..states import CLAIMABLE, Status
from . import display
from .changelist import ERROR_PREVIEW, JobChangeList
from .counting import JobPaginator
from .dashboard import dashboard_view
from .filters import (
    BatchFilter,
    IdempotencyKeyFilter,
    NameFilter,
    QueueFilter,
    ScheduleFilter,
    StuckFilter,
)
from .job_actions import JobActionsMixin
from .job_detail import JobDetailMixin, job_url
from .purge_old import PurgeOldMixin
from .query_guard import QueryGuardMixin
from .read_only import ReadOnlyAdminMixin
from .search import HELP_TEXT as SEARCH_HELP_TEXT
from .search import MAX_TERM_LENGTH, search_q, too_long
from .template_names import includes, template_names

DATE_FIELDS = (
    ("created_at", gettext_lazy("created")),
    ("run_at", gettext_lazy("run at")),
    ("finished_at", gettext_lazy("finished")),
)


def date_filters() -> list[tuple[str, Any]]:
    """Date-range filters from django-admin-rangefilter; Django's date filter without it."""
    if apps.is_installed("rangefilter"):
        from rangefilter.filters import DateRangeFilterBuilder

        return [(field, DateRangeFilterBuilder(title=title)) for field, title in DATE_FIELDS]
    return [(field, admin.DateFieldListFilter) for field, _ in DATE_FIELDS]


class JobAdmin(
    ReadOnlyAdminMixin,
    QueryGuardMixin,
    JobActionsMixin,
    PurgeOldMixin,
    JobDetailMixin,
    admin.ModelAdmin,
):
    # Six columns that fit beside the filters on a 1280 px screen: the queue and priority
    # under the name, the attempts beside the status, when it is due under when it was
    # created, how long it took under when it finished, and the error cut to one line.
    list_display = (
        "id",
        "job_column",
        "status_column",
        "created_column",
        "finished_column",
        "error_column",
    )
    list_display_links = ("id",)
    # The primary key, (name, -id) and (status, -id) indexes order a million rows; the times
    # sort whatever the filters leave.
    sortable_by = ("id", "job_column", "status_column", "created_column", "finished_column")
    ordering = ("-id",)
    search_help_text = SEARCH_HELP_TEXT
    list_per_page = 100
    show_full_result_count = False
    show_facets = ShowFacets.NEVER
    paginator = JobPaginator
    # A project's admin/<app>/<model>/ or admin/<app>/ template first, as Django does.
    change_list_template = template_names(Job._meta, "change_list.html")
    change_form_template = template_names(Job._meta, "change_form.html")

    class Media:
        css = {"all": ("django_sqlqueue/admin.css",)}

    def get_list_filter(self, request: HttpRequest) -> tuple[Any, ...]:
        return (
            ("status", admin.ChoicesFieldListFilter),
            QueueFilter,
            NameFilter,
            StuckFilter,
            ScheduleFilter,
            *date_filters(),
            BatchFilter,
            IdempotencyKeyFilter,
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        return super().get_queryset(request).using(get_settings().database)

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Job | None:
        """A job's page by its id, as the list links it, or by its reference
        (`.../job/4711-3f9a…/change/`, e.g. a django.tasks result id): a reference kept from
        before a failover that lost its job finds no page, not the job that took its id."""
        reference = parse_reference(object_id) if from_field is None else None
        if reference is None or reference.nonce is None:
            return super().get_object(request, object_id, from_field)
        return self.get_queryset(request).filter(reference_q(reference)).first()

    def get_paginator(
        self,
        request: HttpRequest,
        queryset: QuerySet[Job],
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
    ) -> JobPaginator:
        first_page = request.GET.get("p", "1") == "1" and "all" not in request.GET
        return JobPaginator(
            queryset, per_page, orphans, allow_empty_first_page, first_page=first_page
        )

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[JobChangeList]:
        return JobChangeList

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        return ("name",)  # any value: makes the search box appear; get_search_results searches

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        condition = search_q(search_term)
        if condition is None:
            return queryset, False
        if too_long(search_term) and not getattr(request, "_sqlqueue_search_refused", False):
            request._sqlqueue_search_refused = True  # type: ignore[attr-defined]
            messages.warning(
                request,
                _(
                    "A search is at most %(most)s characters long; this one had %(length)s, "
                    "so it matched nothing."
                )
                % {"most": MAX_TERM_LENGTH, "length": len(search_term.strip())},
            )
        return queryset.filter(condition), False

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path(
                "dashboard/",
                view(partial(dashboard_view, self)),
                name="django_sqlqueue_dashboard",
            ),
            path(
                "purge-finished/", view(self.purge_old_view), name="django_sqlqueue_job_purge_old"
            ),
            path(
                "<path:object_id>/do/<str:key>/",
                view(self.job_operation_view),
                name="django_sqlqueue_job_operation",
            ),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if request.method == "POST":
            self.refuse_forged_action(request)
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if context and isinstance(context.get("cl"), JobChangeList):
            cl = context["cl"]
            context["summary"] = cl.summary_context(request)
            context["pagination"] = cl.pagination_context()
            context["can_purge"] = self.has_purge_permission(request)
            context["sq_templates"] = includes(self.opts)
        return response

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        response = super().change_view(request, object_id, form_url, extra_context)
        context = getattr(response, "context_data", None)
        if context and context.get("original") is not None:
            job = context["original"]
            context["job_buttons"] = self.operation_buttons(request, job)
            context["job_is_running"] = job.status == Job.Status.RUNNING
        return response

    # List columns ----------------------------------------------------------------------

    @admin.display(description=gettext_lazy("job"), ordering="name")
    def job_column(self, obj: Job) -> SafeString:
        """The name, linked; under it the queue, and the priority when it is not 0."""
        details = [obj.queue]
        if obj.priority:
            details.append(_("priority %(priority)d") % {"priority": obj.priority})
        return format_html(
            '<a href="{}" class="sq-name" title="{}">{}</a><span class="sq-sub">{}</span>',
            job_url(obj.pk),
            obj.name,
            obj.name,
            " · ".join(details),
        )

    @admin.display(description=gettext_lazy("status"), ordering="status")
    def status_column(self, obj: Job) -> SafeString:
        """The status badge; under it the attempts made, out of the most allowed, and for a
        running job how far it got and whether someone asked to cancel it."""
        return format_html(
            '{}<span class="sq-sub sq-attempts" title="{}">{}</span>{}',
            display.status_badge(obj.status),
            _("attempts made, out of the most allowed"),
            ngettext(
                "%(attempts)d/%(max)d attempt", "%(attempts)d/%(max)d attempts", obj.max_attempts
            )
            % {"attempts": obj.attempts, "max": obj.max_attempts},
            display.running_note(obj) if obj.status == Status.RUNNING else "",
        )

    @admin.display(description=gettext_lazy("created"), ordering="created_at")
    def created_column(self, obj: Job) -> SafeString | str:
        """When it was created; under it, when a waiting job will run if that is later."""
        created = display.compact_moment(obj.created_at)
        if obj.status not in CLAIMABLE or obj.run_at <= timezone.now():
            return created
        label = _("retry %(when)s") if obj.status == Status.FAILED else _("due %(when)s")
        return format_html(
            '{}<span class="sq-sub" title="{}">{}</span>',
            created,
            display.full_time(obj.run_at),
            label % {"when": display.relative(obj.run_at)},
        )

    @admin.display(description=gettext_lazy("finished"), ordering="finished_at")
    def finished_column(self, obj: Job) -> SafeString | str:
        """When it finished and how long its last attempt took; a running job's time so far."""
        if obj.status == Status.RUNNING and obj.started_at:
            running = display.human_seconds((timezone.now() - obj.started_at).total_seconds())
            return format_html(
                '{}<span class="sq-sub">{}</span>',
                display.EMPTY,
                _("running %(duration)s") % {"duration": running},
            )
        if obj.finished_at is None:
            return display.EMPTY
        if obj.duration is None:  # cancelled before it ever ran
            return display.compact_moment(obj.finished_at)
        return format_html(
            '{}<span class="sq-sub" title="{}">{}</span>',
            display.compact_moment(obj.finished_at),
            _("how long the last attempt took"),
            _("took %(duration)s") % {"duration": display.human_seconds(obj.duration)},
        )

    @admin.display(description=gettext_lazy("last error"))
    def error_column(self, obj: Job) -> SafeString | str:
        """The error's first line, cut by the column's width; the start of it all on hover."""
        preview = getattr(obj, "error_preview", None)
        text = (preview if preview is not None else obj.last_error or "").strip()
        if not text:
            return display.EMPTY
        hover = text if len(text) < ERROR_PREVIEW else text + "…"
        line = display.short_error(display.first_line(text, 300))
        if obj.status == Status.COMPLETED:
            # An earlier attempt's error: the job has since completed, so it is not a failure
            # now, and is not shown as one.
            hover = _("An earlier attempt failed: %(error)s") % {"error": hover}
            return format_html(
                '<span class="sq-error-line sq-error-old" title="{}">{}</span>', hover, line
            )
        return format_html('<span class="sq-error-line" title="{}">{}</span>', hover, line)
