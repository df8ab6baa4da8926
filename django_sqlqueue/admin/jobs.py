"""The job admin: a list fast on millions of rows, a read-only detail page, and actions."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib import admin
from django.contrib.admin.options import ShowFacets
from django.db.models import QuerySet
from django.http import HttpResponse
from django.urls import path
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..conf import get_settings
from ..models import Job
from . import display
from .changelist import JobChangeList
from .counting import JobPaginator
from .filters import (
    IdempotencyKeyFilter,
    NameFilter,
    QueueFilter,
    ScheduleFilter,
    StuckFilter,
)
from .job_actions import JobActionsMixin
from .job_detail import JobDetailMixin
from .purge_old import PurgeOldMixin
from .search import HELP_TEXT as SEARCH_HELP_TEXT
from .search import search_q

DATE_FIELDS = (("created_at", "created"), ("run_at", "run at"), ("finished_at", "finished"))


def date_filters() -> list[tuple[str, Any]]:
    """Date-range filters from django-admin-rangefilter; Django's date filter without it."""
    if apps.is_installed("rangefilter"):
        from rangefilter.filters import DateRangeFilterBuilder

        return [(field, DateRangeFilterBuilder(title=title)) for field, title in DATE_FIELDS]
    return [(field, admin.DateFieldListFilter) for field, _ in DATE_FIELDS]


class JobAdmin(JobActionsMixin, PurgeOldMixin, JobDetailMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "name",
        "queue",
        "status_badge",
        "priority",
        "attempts_display",
        "run_at_column",
        "created_column",
        "finished_column",
        "duration_display",
        "error_column",
    )
    list_display_links = ("id", "name")
    # Only the primary key orders a million rows from an index; the other columns sort
    # whatever the filters leave.
    sortable_by = ("id", "priority", "run_at_column", "created_column", "finished_column")
    ordering = ("-id",)
    search_help_text = SEARCH_HELP_TEXT
    list_per_page = 100
    show_full_result_count = False
    show_facets = ShowFacets.NEVER
    paginator = JobPaginator
    change_list_template = "django_sqlqueue/admin/job_change_list.html"
    change_form_template = "django_sqlqueue/admin/job_change_form.html"

    class Media:
        css = {"all": ("django_sqlqueue/admin.css",)}

    # Read-only: jobs are made by enqueue() and changed by workers and the actions only.

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Job | None = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Job | None = None) -> bool:
        return False

    def get_list_filter(self, request: Any) -> tuple[Any, ...]:
        return (
            ("status", admin.ChoicesFieldListFilter),
            QueueFilter,
            NameFilter,
            StuckFilter,
            ScheduleFilter,
            *date_filters(),
            IdempotencyKeyFilter,
        )

    def get_queryset(self, request: Any) -> QuerySet[Job]:
        return super().get_queryset(request).using(get_settings().database)

    def get_paginator(
        self, request: Any, queryset: Any, per_page: int, orphans: int = 0, **kwargs: Any
    ) -> JobPaginator:
        first_page = request.GET.get("p", "1") == "1" and "all" not in request.GET
        return JobPaginator(queryset, per_page, orphans, first_page=first_page, **kwargs)

    def get_changelist(self, request: Any, **kwargs: Any) -> type[JobChangeList]:
        return JobChangeList

    def get_search_fields(self, request: Any) -> tuple[str, ...]:
        return ("name",)  # any value: makes the search box appear; get_search_results searches

    def get_search_results(
        self, request: Any, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        condition = search_q(search_term)
        if condition is None:
            return queryset, False
        return queryset.filter(condition), False

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view
        return [
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

    def changelist_view(self, request: Any, extra_context: dict | None = None) -> HttpResponse:
        if request.method == "POST":
            self.refuse_forged_action(request)
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if context and isinstance(context.get("cl"), JobChangeList):
            cl = context["cl"]
            context["summary"] = cl.summary_context(request)
            context["pagination"] = cl.pagination_context()
            context["can_purge"] = self.has_purge_permission(request)
        return response

    def change_view(
        self, request: Any, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        response = super().change_view(request, object_id, form_url, extra_context)
        context = getattr(response, "context_data", None)
        if context and context.get("original") is not None:
            job = context["original"]
            context["job_buttons"] = self.operation_buttons(request, job)
            context["job_is_running"] = job.status == Job.Status.RUNNING
        return response

    # List columns ----------------------------------------------------------------------

    @admin.display(description="run at", ordering="run_at")
    def run_at_column(self, obj: Job) -> SafeString | str:
        return display.compact_moment(obj.run_at)

    @admin.display(description="created", ordering="created_at")
    def created_column(self, obj: Job) -> SafeString | str:
        return display.compact_moment(obj.created_at)

    @admin.display(description="finished", ordering="finished_at")
    def finished_column(self, obj: Job) -> SafeString | str:
        return display.compact_moment(obj.finished_at)

    @admin.display(description="last error")
    def error_column(self, obj: Job) -> SafeString | str:
        preview = getattr(obj, "error_preview", None)
        line = display.first_line(preview if preview is not None else obj.last_error, 80)
        return format_html('<span class="sq-error-line">{}</span>', line) if line else display.EMPTY
