"""The batch admin: each batch with its state and progress, a read-only page with its members
by status, and *Cancel batch* behind a confirmation page (docs/admin.md#batches).

A batch's members are never counted row by row: the list reads the members of all the
batches of its page in one grouped read of the job table's (batch, status) index, the
batch's page in one more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import flatten_fieldsets, unquote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import F, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.formats import number_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, pgettext_lazy

from ..batches import Batch
from ..conf import get_settings
from ..models import Job, JobBatch
from ..states import Status
from . import display
from .actions import RUNNING_NOTE
from .batch_display import (
    MEMBERS,
    STATE_HELP,
    STATE_LABELS,
    batch_url,
    jobs_url,
    member_counts,
    members_of,
    outcomes,
    progress_bar,
    state_badge,
)
from .counting import COUNT_CAP, JobPaginator, bounded_count
from .query_guard import QueryGuardMixin
from .read_only import ReadOnlyAdminMixin
from .template_names import template_names

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

CONFIRMED = "confirmed"
#: Batches listed on the cancel confirmation page, and child batches on a batch's page.
SHOWN = 100

CANCEL_HELP = gettext_lazy(
    "Closes the batch, so no job may join it any more, and cancels its members that have not "
    "finished: waiting, pending and failed ones will not run, running ones are asked to stop. "
    "Its callback is still enqueued once every member has finished."
)


# Filters ------------------------------------------------------------------------------------


class BatchStateFilter(admin.SimpleListFilter):
    title = gettext_lazy("state")
    parameter_name = "state"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, StrOrPromise]]:
        return [
            ("open", STATE_LABELS["open"]),
            ("closed", STATE_LABELS["closed"]),
            ("finished", STATE_LABELS["finished"]),
            ("cancelled", pgettext_lazy("batch state", "Cancelled")),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[JobBatch]) -> QuerySet[JobBatch]:
        value = self.value()
        if value == "open":
            return queryset.filter(closed_at__isnull=True, finished_at__isnull=True)
        if value == "closed":
            return queryset.filter(closed_at__isnull=False, finished_at__isnull=True)
        if value == "finished":
            return queryset.filter(finished_at__isnull=False)
        if value == "cancelled":
            return queryset.filter(cancelled_at__isnull=False)
        return queryset


# The list -----------------------------------------------------------------------------------


class BatchChangeList(ChangeList):
    """Every batch of the page counted in one grouped read, not one count per row."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        if getattr(self.paginator, "complete", False):
            # Django re-reads a single page; the paginator already holds every row.
            self.result_list = self.paginator.first_rows
        rows = list(self.result_list)
        counts = member_counts(get_settings().database, [row.pk for row in rows])
        for row in rows:
            setattr(row, MEMBERS, counts[row.pk])
        self.result_list = rows


class JobBatchAdmin(ReadOnlyAdminMixin, QueryGuardMixin, admin.ModelAdmin):
    list_display = (
        "id_column",
        "label_column",
        "state_column",
        "created_column",
        "finished_column",
        "progress_column",
        "callback_column",
    )
    list_display_links = ("id_column",)
    sortable_by = ("id_column", "label_column", "created_column", "finished_column")
    ordering = ("-id",)
    list_filter = (BatchStateFilter,)
    search_fields = ("label",)
    actions = ("cancel_selected",)
    list_per_page = 100
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = JobPaginator
    change_form_template = template_names(
        JobBatch._meta, "change_form.html", "django_sqlqueue/admin/batch_change_form.html"
    )
    confirm_cancel_template = template_names(
        JobBatch._meta,
        "batch_confirm_cancel.html",
        "django_sqlqueue/admin/batch_confirm_cancel.html",
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "state_display",
                    "label",
                    "created_display",
                    "closed_display",
                    "finished_display",
                    "cancelled_display",
                )
            },
        ),
        (gettext_lazy("Members"), {"fields": ("progress_display", "members_display")}),
        (gettext_lazy("Callback"), {"fields": ("callback_job_link", "callback_json")}),
        (gettext_lazy("Nested batches"), {"fields": ("parent_link", "children_display")}),
    )
    readonly_fields = flatten_fieldsets(fieldsets)

    class Media:
        css = {"all": ("django_sqlqueue/admin.css",)}

    def has_cancel_permission(self, request: HttpRequest, obj: JobBatch | None = None) -> bool:
        """What cancelling a job needs (the change permission on jobs): cancelling a batch
        cancels its jobs."""
        opts = Job._meta
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    def get_queryset(self, request: HttpRequest) -> QuerySet[JobBatch]:
        return (
            super()
            .get_queryset(request)
            .using(get_settings().database)
            .annotate(callback_status=F("callback_job__status"))
        )

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[BatchChangeList]:
        return BatchChangeList

    def get_paginator(
        self,
        request: HttpRequest,
        queryset: QuerySet[JobBatch],
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
    ) -> JobPaginator:
        first_page = request.GET.get("p", "1") == "1" and "all" not in request.GET
        return JobPaginator(
            queryset, per_page, orphans, allow_empty_first_page, first_page=first_page
        )

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path(
                "<path:object_id>/cancel/",
                view(self.cancel_view),
                name="django_sqlqueue_jobbatch_cancel",
            ),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # A POST naming the cancel action is refused to a user who may not run it, not
        # silently ignored (as the job list does).
        if (
            request.method == "POST"
            and "cancel_selected" in request.POST.getlist("action")
            and not self.has_cancel_permission(request)
        ):
            raise PermissionDenied
        return super().changelist_view(request, extra_context)

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
            batch = context["original"]
            if batch.finished_at is None and self.has_cancel_permission(request):
                context["batch_cancel_url"] = reverse(
                    "admin:django_sqlqueue_jobbatch_cancel", args=[batch.pk]
                )
                context["batch_cancel_help"] = CANCEL_HELP
        return response

    # List columns -------------------------------------------------------------------------

    @admin.display(description=gettext_lazy("ID"), ordering="id")
    def id_column(self, obj: JobBatch) -> int:
        return obj.pk

    @admin.display(description=gettext_lazy("label"), ordering="label")
    def label_column(self, obj: JobBatch) -> SafeString | str:
        """The label; under it the batch it is nested in, if any."""
        label = obj.label or display.EMPTY
        if obj.parent_id is None:
            return label
        return format_html(
            '{}<span class="sq-sub">{}</span>',
            label,
            format_html(
                _("in {batch}"),
                batch=format_html(
                    '<a href="{}">{}</a>',
                    batch_url(obj.parent_id),
                    _("batch #%(id)d") % {"id": obj.parent_id},
                ),
            ),
        )

    @admin.display(description=gettext_lazy("state"))
    def state_column(self, obj: JobBatch) -> SafeString:
        return state_badge(obj)

    @admin.display(description=gettext_lazy("created"), ordering="created_at")
    def created_column(self, obj: JobBatch) -> SafeString | str:
        return display.compact_moment(obj.created_at)

    @admin.display(description=gettext_lazy("finished"), ordering="finished_at")
    def finished_column(self, obj: JobBatch) -> SafeString | str:
        """When it finished; under it, how long it took from its creation."""
        if obj.finished_at is None:
            return display.EMPTY
        took = (obj.finished_at - obj.created_at).total_seconds()
        return format_html(
            '{}<span class="sq-sub">{}</span>',
            display.compact_moment(obj.finished_at),
            _("took %(duration)s") % {"duration": display.human_seconds(took)},
        )

    @admin.display(description=gettext_lazy("progress"))
    def progress_column(self, obj: JobBatch) -> SafeString:
        """Members finished out of all; under it, how many ended dead or cancelled."""
        members = members_of(obj)
        details = outcomes(members)
        if not details:
            return progress_bar(members)
        return format_html('{}<span class="sq-sub">{}</span>', progress_bar(members), details)

    @admin.display(description=gettext_lazy("callback"))
    def callback_column(self, obj: JobBatch) -> SafeString:
        """The callback job (a link, with its status) once stored; "not yet" before."""
        if obj.callback is None:
            return format_html('<span class="sq-quiet">{}</span>', _("none"))
        name = obj.callback.get("name", "")
        if obj.callback_job_id is None:
            return format_html(
                '<span class="sq-quiet">{}</span><span class="sq-sub">{}</span>',
                _("not yet"),
                name,
            )
        status = getattr(obj, "callback_status", None)
        return format_html(
            '<a href="{}">#{}</a> {}<span class="sq-sub">{}</span>',
            reverse("admin:django_sqlqueue_job_change", args=[obj.callback_job_id]),
            obj.callback_job_id,
            display.status_badge(status)
            if status
            else format_html('<span class="sq-quiet">{}</span>', _("purged")),
            name,
        )

    # The batch's page ---------------------------------------------------------------------

    @admin.display(description=gettext_lazy("state"))
    def state_display(self, obj: JobBatch) -> SafeString:
        return format_html(
            '{} <span class="sq-quiet">{}</span>', state_badge(obj), STATE_HELP[obj.state]
        )

    @admin.display(description=gettext_lazy("created"))
    def created_display(self, obj: JobBatch) -> SafeString | str:
        return display.moment(obj.created_at)

    @admin.display(description=gettext_lazy("closed"))
    def closed_display(self, obj: JobBatch) -> SafeString | str:
        return display.moment(obj.closed_at)

    @admin.display(description=gettext_lazy("finished"))
    def finished_display(self, obj: JobBatch) -> SafeString | str:
        return display.moment(obj.finished_at)

    @admin.display(description=gettext_lazy("cancelled"))
    def cancelled_display(self, obj: JobBatch) -> SafeString | str:
        return display.moment(obj.cancelled_at)

    @admin.display(description=gettext_lazy("progress"))
    def progress_display(self, obj: JobBatch) -> SafeString:
        members = members_of(obj)
        details = outcomes(members)
        unfinished = members.unfinished
        left = (
            ngettext("%(count)s left", "%(count)s left", unfinished)
            % {"count": number_format(unfinished, force_grouping=True)}
            if unfinished
            else ""
        )
        notes = " · ".join(part for part in (details, left) if part)
        if not notes:
            return progress_bar(members)
        return format_html('{} <span class="sq-quiet">({})</span>', progress_bar(members), notes)

    @admin.display(description=gettext_lazy("members"))
    def members_display(self, obj: JobBatch) -> SafeString:
        """Each status's count, a link to the job list showing those members."""
        members = members_of(obj)
        if not members.total:
            return format_html('<span class="sq-quiet">{}</span>', _("none"))
        items = format_html_join(
            "",
            '<li>{} <a href="{}" class="sq-count">{}</a></li>',
            (
                (
                    display.status_badge(status.value),
                    jobs_url(obj.pk, status.value),
                    number_format(members.of(status.value), force_grouping=True),
                )
                for status in Status
                if members.of(status.value)
            ),
        )
        return format_html(
            '<ul class="sq-related sq-members">{}</ul><a href="{}">{} →</a>',
            items,
            jobs_url(obj.pk),
            ngettext(
                "The %(count)s member in the job list",
                "All %(count)s members in the job list",
                members.total,
            )
            % {"count": number_format(members.total, force_grouping=True)},
        )

    @admin.display(description=gettext_lazy("callback job"))
    def callback_job_link(self, obj: JobBatch) -> SafeString:
        if obj.callback is None:
            return format_html('<span class="sq-quiet">{}</span>', _("none"))
        if obj.callback_job_id is None:
            when = (
                _("enqueued once the batch is closed and every member has finished")
                if obj.closed_at is None
                else _("enqueued once every member has finished")
            )
            return format_html('{} <span class="sq-quiet">({})</span>', _("not yet"), when)
        url = reverse("admin:django_sqlqueue_job_change", args=[obj.callback_job_id])
        status = getattr(obj, "callback_status", None)
        return format_html(
            '<a href="{}">#{}</a> <code>{}</code> {}',
            url,
            obj.callback_job_id,
            obj.callback.get("name", ""),
            display.status_badge(status)
            if status
            else format_html('<span class="sq-quiet">{}</span>', _("purged")),
        )

    @admin.display(description=gettext_lazy("callback"))
    def callback_json(self, obj: JobBatch) -> SafeString:
        if obj.callback is None:
            return format_html('<span class="sq-quiet">{}</span>', _("none"))
        return display.pretty_json(obj.callback)

    @admin.display(description=gettext_lazy("parent batch"))
    def parent_link(self, obj: JobBatch) -> SafeString:
        if obj.parent_id is None:
            return format_html('<span class="sq-quiet">{}</span>', _("none"))
        return format_html(
            '<a href="{}">{}</a>',
            batch_url(obj.parent_id),
            _("batch #%(id)d") % {"id": obj.parent_id},
        )

    @admin.display(description=gettext_lazy("child batches"))
    def children_display(self, obj: JobBatch) -> SafeString:
        children = list(
            JobBatch.objects.using(get_settings().database)
            .filter(parent_id=obj.pk)
            .order_by("id")
            .only("id", "label", "closed_at", "finished_at", "cancelled_at")[: SHOWN + 1]
        )
        if not children:
            return format_html('<span class="sq-quiet">{}</span>', _("none"))
        items = format_html_join(
            "",
            '<li><a href="{}">{}</a> {} {}</li>',
            (
                (
                    batch_url(child.pk),
                    _("batch #%(id)d") % {"id": child.pk},
                    child.label,
                    state_badge(child),
                )
                for child in children[:SHOWN]
            ),
        )
        more = format_html("<li>{}</li>", _("and more")) if len(children) > SHOWN else ""
        return format_html('<ul class="sq-related">{}{}</ul>', items, more)

    # Cancel -------------------------------------------------------------------------------

    @admin.action(description=gettext_lazy("Cancel selected batches…"), permissions=["cancel"])
    def cancel_selected(
        self, request: HttpRequest, queryset: QuerySet[JobBatch]
    ) -> HttpResponse | None:
        if not self.has_cancel_permission(request):
            raise PermissionDenied
        if request.POST.get(CONFIRMED) != "yes":
            return self.cancel_confirmation(request, queryset, bulk=True)
        self.cancel_batches(request, queryset)
        return None

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """*Cancel batch…* on a batch's page: asks first, then cancels and goes back."""
        if not self.has_cancel_permission(request):
            raise PermissionDenied
        batch = self.get_object(request, unquote(object_id))
        if batch is None:
            raise Http404(f"No batch with id {object_id!r}.")
        if not self.has_view_permission(request, batch):
            raise PermissionDenied
        if request.method == "POST" and request.POST.get(CONFIRMED) == "yes":
            self.cancel_batches(request, self.get_queryset(request).filter(pk=batch.pk))
            return HttpResponseRedirect(batch_url(batch.pk))
        return self.cancel_confirmation(request, self.get_queryset(request).filter(pk=batch.pk))

    def cancel_confirmation(
        self, request: HttpRequest, queryset: QuerySet[JobBatch], *, bulk: bool = False
    ) -> TemplateResponse:
        """What cancelling would do to each batch: its members left, and whether it is
        skipped (finished already)."""
        preview = list(queryset.order_by("-id")[:SHOWN])
        counts = member_counts(get_settings().database, [batch.pk for batch in preview])
        rows = [(batch, counts[batch.pk], batch.finished_at is None) for batch in preview]
        total = bounded_count(queryset) if bulk else len(preview)
        shown = min(total, COUNT_CAP)
        running = sum(members.of(Status.RUNNING.value) for batch, members, accepted in rows)
        if bulk:
            title = _("Cancel batches: are you sure?")
            cancel_url = request.get_full_path()
        else:
            title = _("Cancel batch #%(id)s?") % {"id": preview[0].pk}
            cancel_url = batch_url(preview[0].pk)
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.opts,
            "help": CANCEL_HELP,
            "rows": rows,
            "bulk": bulk,
            "accepted": any(accepted for batch, members, accepted in rows),
            "total": shown,
            "total_text": number_format(shown, force_grouping=True),
            "capped": total > COUNT_CAP,
            "more": max(0, shown - len(preview)),
            "select_across": request.POST.get("select_across") == "1",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "selected_ids": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
            "running_note": RUNNING_NOTE if running else "",
            "form_action": request.get_full_path(),
            "cancel_url": cancel_url,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, self.confirm_cancel_template, context)

    def cancel_batches(self, request: HttpRequest, queryset: QuerySet[JobBatch]) -> None:
        """`Batch(id).cancel()` each batch not finished yet; the others are counted."""
        alias = get_settings().database
        batches = list(queryset.order_by("id").only("id", "label", "finished_at"))
        open_ones = [batch for batch in batches if batch.finished_at is None]
        running = sum(
            members.of(Status.RUNNING.value)
            for members in member_counts(alias, [batch.pk for batch in open_ones]).values()
        )
        cancelled_jobs = 0
        for batch in open_ones:
            cancelled_jobs += Batch(batch.pk, alias).cancel()
            self.log_change(request, batch, _("Cancelled from the admin."))
        self.message_user(
            request,
            cancel_message(open_ones, len(batches) - len(open_ones), cancelled_jobs, running),
            messages.SUCCESS if open_ones else messages.WARNING,
        )


def cancel_message(cancelled: Sequence[JobBatch], skipped: int, jobs: int, running: int) -> str:
    """`Cancelled batch #12. 4 members cancelled.`, and what was skipped, in the active
    language."""
    parts = []
    if len(cancelled) == 1:
        parts.append(_("Cancelled batch #%(id)s.") % {"id": cancelled[0].pk})
    elif cancelled:
        parts.append(
            ngettext("Cancelled %(count)d batch.", "Cancelled %(count)d batches.", len(cancelled))
            % {"count": len(cancelled)}
        )
    if cancelled:
        parts.append(
            ngettext(
                "%(count)d unfinished member cancelled.",
                "%(count)d unfinished members cancelled.",
                jobs,
            )
            % {"count": jobs}
        )
    if skipped:
        parts.append(
            ngettext(
                "Skipped %(count)d batch that had finished already.",
                "Skipped %(count)d batches that had finished already.",
                skipped,
            )
            % {"count": skipped}
        )
    if running:
        parts.append(str(RUNNING_NOTE))
    return " ".join(parts)


__all__ = ["JobBatchAdmin"]
