"""The job list's ChangeList: light rows, a bounded count, and the context the template needs."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.templatetags.admin_list import pagination
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.db.models.functions import Left
from django.http import HttpRequest
from django.utils.formats import number_format
from django.utils.translation import ngettext

from ..models import Job
from . import counting
from .display import human_seconds
from .summary import backlog_of_rows, counts_of_rows, oldest_due_pending, status_counts

#: Columns the list never shows and that can be large: left in the database.
HEAVY_FIELDS = ("args", "kwargs", "result", "history", "last_error")
#: Characters of last_error read for the list's one-line error column and its hover text.
ERROR_PREVIEW = 500


class JobChangeList(ChangeList):
    FILTER_STATE = ("filter_specs", "has_filters", "has_active_filters", "clear_all_filters_qs")

    def get_queryset(
        self, request: HttpRequest, exclude_parameters: list[str | None] | None = None
    ) -> QuerySet[Job]:
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.defer(*HEAVY_FIELDS).annotate(
            error_preview=Left("last_error", ERROR_PREVIEW)
        )

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        if getattr(self.paginator, "complete", False):
            # Django re-reads a single page; the paginator already holds every row.
            self.result_list = self.paginator.first_rows

    @property
    def status_filter_parameters(self) -> list[str | None]:
        for spec in self.filter_specs:
            if "status__exact" in spec.expected_parameters():
                return spec.expected_parameters()
        return []

    def summary_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        """The jobs under every filter and search in force except the status filter.

        The bar then shows how those jobs split by status and links to each, instead of
        counting zero for every status but the selected one.
        """
        parameters = self.status_filter_parameters
        # get_queryset() rebuilds the filter specs and their state: keep the page's own.
        kept = {name: getattr(self, name) for name in self.FILTER_STATE}
        queryset = self.get_queryset(request, exclude_parameters=parameters or None)
        for name, value in kept.items():
            setattr(self, name, value)
        return queryset

    def summary_context(self, request: HttpRequest) -> dict[str, Any]:
        current = request.GET.get("status__exact")
        if not current and getattr(self.paginator, "complete", False):
            # Every matching job is on this page: count them here, no query.
            counts, backlog = counts_of_rows(self.result_list), backlog_of_rows(self.result_list)
        else:
            queryset = self.summary_queryset(request)
            counts, backlog = status_counts(queryset), oldest_due_pending(queryset)
        items = [
            {
                "status": count.status,
                "label": count.label,
                "text": count.text,
                "active": count.status == current,
                "url": self.get_query_string({"status__exact": count.status}),
            }
            for count in counts
        ]
        return {
            "counts": items,
            "all_url": self.get_query_string(
                remove=[name for name in self.status_filter_parameters if name is not None]
            ),
            "status_filtered": bool(current),
            "backlog": backlog,
            "backlog_age": human_seconds(backlog.waited_seconds()) if backlog else "",
        }

    def pagination_context(self) -> dict[str, Any]:
        context = pagination(self)
        context["count_text"] = count_text(
            getattr(self.paginator, "count_kind", counting.EXACT), self.result_count
        )
        return context


def count_text(kind: str, count: int) -> str:
    """`27 jobs`, `about 1,000,000 jobs`, `more than 10,000 jobs (…)`, in the active language."""
    number = number_format(count, force_grouping=True)
    if kind == counting.ESTIMATE:
        text = ngettext("about %(count)s job", "about %(count)s jobs", count)
    elif kind == counting.AT_LEAST:
        text = ngettext(
            "more than %(count)s job (narrow the filters to count them all)",
            "more than %(count)s jobs (narrow the filters to count them all)",
            count,
        )
    else:
        text = ngettext("%(count)s job", "%(count)s jobs", count)
    return text % {"count": number}
