"""Requeue, cancel, run now and purge: bulk from the list, one job from its page.

Permissions: requeue, cancel and run now need the change permission on jobs, purge the delete
permission. Without it the action is neither offered nor accepted: a POST naming it is a 403.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..conf import get_settings
from ..models import Job
from . import actions
from .actions import JobOperation
from .base import JobAdminBase
from .counting import COUNT_CAP, bounded_count
from .display import status_label
from .template_names import template_names

CONFIRMED = "confirmed"
#: Jobs listed on a bulk confirmation page.
CONFIRM_PREVIEW = 100


class JobActionsMixin(JobAdminBase):
    """Actions, their permissions and their views, mixed into JobAdmin.

    Every action shows what it will do and asks first: from the list (bulk) and from a job's
    page. Only a POST carrying `confirmed=yes`, which the confirmation page sends, acts.
    """

    actions = ["requeue_selected", "cancel_selected", "run_now_selected", "purge_selected"]

    # Permissions -------------------------------------------------------------------------

    def _has_perm(self, request: HttpRequest, action: str) -> bool:
        opts = Job._meta
        return request.user.has_perm(f"{opts.app_label}.{action}_{opts.model_name}")

    def has_requeue_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return self._has_perm(request, "change")

    def has_cancel_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return self._has_perm(request, "change")

    def has_run_now_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return self._has_perm(request, "change")

    def has_purge_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return self._has_perm(request, "delete")

    def may(self, request: HttpRequest, operation: JobOperation) -> bool:
        return bool(getattr(self, f"has_{operation.permission}_permission")(request))

    def refuse_forged_action(self, request: HttpRequest) -> None:
        """A POST naming an action the user may not run is refused, not silently ignored."""
        for name in request.POST.getlist("action"):
            operation = actions.OPERATIONS.get(name.removesuffix("_selected"))
            if operation is not None and not self.may(request, operation):
                raise PermissionDenied

    # Bulk actions --------------------------------------------------------------------------

    @admin.action(description=gettext_lazy("Requeue selected jobs…"), permissions=["requeue"])
    def requeue_selected(
        self, request: HttpRequest, queryset: QuerySet[Job]
    ) -> HttpResponse | None:
        return self.run_bulk(request, queryset, actions.REQUEUE)

    @admin.action(description=gettext_lazy("Cancel selected jobs…"), permissions=["cancel"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        return self.run_bulk(request, queryset, actions.CANCEL)

    @admin.action(description=gettext_lazy("Run selected jobs now…"), permissions=["run_now"])
    def run_now_selected(
        self, request: HttpRequest, queryset: QuerySet[Job]
    ) -> HttpResponse | None:
        return self.run_bulk(request, queryset, actions.RUN_NOW)

    @admin.action(description=gettext_lazy("Purge selected finished jobs…"), permissions=["purge"])
    def purge_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        return self.run_bulk(request, queryset, actions.PURGE)

    def run_bulk(
        self, request: HttpRequest, queryset: QuerySet[Job], operation: JobOperation
    ) -> HttpResponse | None:
        if not self.may(request, operation):
            raise PermissionDenied
        if request.POST.get(CONFIRMED) != "yes":
            return self.bulk_confirmation(request, queryset, operation)
        report = actions.apply_to_queryset(operation, queryset)
        self.message_user(request, report.message(), report.level)
        return None

    def bulk_confirmation(
        self, request: HttpRequest, queryset: QuerySet[Job], operation: JobOperation
    ) -> TemplateResponse:
        select_across = request.POST.get("select_across") == "1"
        preview = list(
            queryset.order_by("-id").only("id", "name", "queue", "status")[:CONFIRM_PREVIEW]
        )
        total = bounded_count(queryset)
        shown = min(total, COUNT_CAP)
        context = {
            **self.admin_site.each_context(request),
            "title": _("%(action)s: are you sure?") % {"action": operation.label},
            "opts": self.opts,
            "operation": operation,
            "jobs": [(job, operation.accepts(job.status)) for job in preview],
            "total": shown,
            "total_text": number_format(shown, force_grouping=True),
            "capped": total > COUNT_CAP,
            "more": max(0, shown - len(preview)),
            "select_across": select_across,
            "action_name": f"{operation.key}_selected",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "selected_ids": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
            "running_note": actions.RUNNING_NOTE if operation is actions.CANCEL else "",
            "form_action": request.get_full_path(),
            "cancel_url": request.get_full_path(),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, template_names(self.opts, "confirm_bulk.html"), context)

    # One job, from its page ---------------------------------------------------------------

    def job_operation_view(self, request: HttpRequest, object_id: str, key: str) -> HttpResponse:
        operation = actions.OPERATIONS.get(key)
        if operation is None:
            raise Http404(f"No job action {key!r}.")
        if not self.may(request, operation):
            raise PermissionDenied
        job = self.get_object(request, object_id)
        if job is None:
            raise Http404(f"No job with id {object_id!r}.")
        if request.method == "POST" and request.POST.get(CONFIRMED) == "yes":
            report = actions.apply_to_rows(
                operation, [(job.pk, job.status)], get_settings().database
            )
            self.message_user(request, report.message(), report.level)
            if report.changed and operation is not actions.PURGE:
                # Shown by the page's "History" button.
                self.log_change(
                    request, job, operation.logged % {"status": status_label(job.status)}
                )
            if operation is actions.PURGE and report.changed:
                return HttpResponseRedirect(reverse("admin:django_sqlqueue_job_changelist"))
            return HttpResponseRedirect(reverse("admin:django_sqlqueue_job_change", args=[job.pk]))
        accepted = operation.accepts(job.status)
        context = {
            **self.admin_site.each_context(request),
            "title": _("%(action)s job #%(id)s?") % {"action": operation.label, "id": job.pk},
            "opts": self.opts,
            "operation": operation,
            "job": job,
            "accepted": accepted,
            "refusal": ""
            if accepted
            else _("This job is %(status)s: %(action)s accepts only jobs that are %(allowed)s.")
            % {
                "status": status_label(job.status),
                "action": operation.label,
                "allowed": operation.allowed_text(),
            },
            "running_note": actions.RUNNING_NOTE if operation is actions.CANCEL else "",
            "cancel_url": reverse("admin:django_sqlqueue_job_change", args=[job.pk]),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, template_names(self.opts, "confirm_one.html"), context)

    def operation_buttons(self, request: HttpRequest, job: Job) -> list[dict[str, Any]]:
        """The actions this user may take on this job in its current status."""
        buttons = []
        for operation in actions.OPERATIONS.values():
            if self.may(request, operation) and operation.accepts(job.status):
                buttons.append(
                    {
                        "operation": operation,
                        "url": reverse(
                            "admin:django_sqlqueue_job_operation", args=[job.pk, operation.key]
                        ),
                    }
                )
        return buttons
