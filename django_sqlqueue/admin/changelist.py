"""The job list's ChangeList: light rows, a bounded count, and the context the template needs."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.templatetags.admin_list import pagination
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.db.models.functions import Left

from . import counting
from .display import human_seconds
from .summary import backlog_of_rows, counts_of_rows, oldest_due_pending, status_counts

#: Columns the list never shows and that can be large: left in the database.
HEAVY_FIELDS = ("args", "kwargs", "result", "history", "last_error")
#: Characters of last_error read for the list's short error column.
ERROR_PREVIEW = 200


class JobChangeList(ChangeList):
    FILTER_STATE = ("filter_specs", "has_filters", "has_active_filters", "clear_all_filters_qs")

    def get_queryset(self, request: Any, exclude_parameters: Any = None) -> QuerySet[Any]:
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.defer(*HEAVY_FIELDS).annotate(
            error_preview=Left("last_error", ERROR_PREVIEW)
        )

    def get_results(self, request: Any) -> None:
        super().get_results(request)
        if getattr(self.paginator, "complete", False):
            # Django re-reads a single page; the paginator already holds every row.
            self.result_list = self.paginator.first_rows

    @property
    def status_filter_parameters(self) -> list[str]:
        for spec in self.filter_specs:
            if "status__exact" in spec.expected_parameters():
                return spec.expected_parameters()
        return []

    def summary_queryset(self, request: Any) -> QuerySet[Any]:
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

    def summary_context(self, request: Any) -> dict[str, Any]:
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
            "all_url": self.get_query_string(remove=self.status_filter_parameters),
            "status_filtered": bool(current),
            "backlog": backlog,
            "backlog_age": human_seconds(backlog.waited_seconds()) if backlog else "",
        }

    def pagination_context(self) -> dict[str, Any]:
        context = pagination(self)
        kind = getattr(self.paginator, "count_kind", counting.EXACT)
        count = self.result_count
        noun = self.opts.verbose_name if count == 1 else self.opts.verbose_name_plural
        if kind == counting.ESTIMATE:
            text = f"about {count:,} {noun}"
        elif kind == counting.AT_LEAST:
            text = f"more than {count:,} {noun} (narrow the filters to count them all)"
        else:
            text = f"{count:,} {noun}"
        context["count_text"] = text
        return context
