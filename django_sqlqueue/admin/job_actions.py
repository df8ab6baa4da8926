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
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from ..conf import get_settings
from ..models import Job
from . import operations
from .counting import COUNT_CAP, bounded_count
from .operations import JobOperation

CONFIRMED = "confirmed"
#: Jobs listed on a bulk confirmation page.
CONFIRM_PREVIEW = 100


class JobActionsMixin:
    """Actions, their permissions and their views, mixed into JobAdmin."""

    actions = ["requeue_selected", "cancel_selected", "run_now_selected", "purge_selected"]

    # Permissions -------------------------------------------------------------------------

    def _has_perm(self, request: Any, action: str) -> bool:
        opts = Job._meta
        return request.user.has_perm(f"{opts.app_label}.{action}_{opts.model_name}")

    def has_requeue_permission(self, request: Any, obj: Job | None = None) -> bool:
        return self._has_perm(request, "change")

    def has_cancel_permission(self, request: Any, obj: Job | None = None) -> bool:
        return self._has_perm(request, "change")

    def has_run_now_permission(self, request: Any, obj: Job | None = None) -> bool:
        return self._has_perm(request, "change")

    def has_purge_permission(self, request: Any, obj: Job | None = None) -> bool:
        return self._has_perm(request, "delete")

    def may(self, request: Any, operation: JobOperation) -> bool:
        return bool(getattr(self, f"has_{operation.permission}_permission")(request))

    def refuse_forged_action(self, request: Any) -> None:
        """A POST naming an action the user may not run is refused, not silently ignored."""
        for name in request.POST.getlist("action"):
            operation = operations.OPERATIONS.get(name.removesuffix("_selected"))
            if operation is not None and not self.may(request, operation):
                raise PermissionDenied

    # Bulk actions --------------------------------------------------------------------------

    @admin.action(description="Requeue selected jobs", permissions=["requeue"])
    def requeue_selected(self, request: Any, queryset: QuerySet[Job]) -> HttpResponse | None:
        return self.run_bulk(request, queryset, operations.REQUEUE)

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_selected(self, request: Any, queryset: QuerySet[Job]) -> HttpResponse | None:
        return self.run_bulk(request, queryset, operations.CANCEL)

    @admin.action(description="Run selected jobs now", permissions=["run_now"])
    def run_now_selected(self, request: Any, queryset: QuerySet[Job]) -> HttpResponse | None:
        return self.run_bulk(request, queryset, operations.RUN_NOW)

    @admin.action(description="Purge selected finished jobs", permissions=["purge"])
    def purge_selected(self, request: Any, queryset: QuerySet[Job]) -> HttpResponse | None:
        return self.run_bulk(request, queryset, operations.PURGE)

    def run_bulk(
        self, request: Any, queryset: QuerySet[Job], operation: JobOperation
    ) -> HttpResponse | None:
        if not self.may(request, operation):
            raise PermissionDenied
        if operation.confirm and request.POST.get(CONFIRMED) != "yes":
            return self.bulk_confirmation(request, queryset, operation)
        outcome = operations.apply_to_queryset(operation, queryset)
        self.message_user(request, outcome.message(), outcome.level)
        return None

    def bulk_confirmation(
        self, request: Any, queryset: QuerySet[Job], operation: JobOperation
    ) -> TemplateResponse:
        select_across = request.POST.get("select_across") == "1"
        preview = list(
            queryset.order_by("-id").only("id", "name", "queue", "status")[:CONFIRM_PREVIEW]
        )
        total = bounded_count(queryset)
        context = {
            **self.admin_site.each_context(request),
            "title": f"{operation.label}: are you sure?",
            "opts": self.opts,
            "operation": operation,
            "jobs": [(job, operation.accepts(job.status)) for job in preview],
            "total": total,
            "total_text": f"more than {COUNT_CAP:,}" if total > COUNT_CAP else f"{total:,}",
            "more": max(0, min(total, COUNT_CAP) - len(preview)),
            "select_across": select_across,
            "action_name": f"{operation.key}_selected",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "selected_ids": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
            "running_note": operations.RUNNING_NOTE if operation is operations.CANCEL else "",
            "form_action": request.get_full_path(),
            "cancel_url": request.get_full_path(),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "django_sqlqueue/admin/confirm_bulk.html", context)

    # One job, from its page ---------------------------------------------------------------

    def job_operation_view(self, request: Any, object_id: str, key: str) -> HttpResponse:
        operation = operations.OPERATIONS.get(key)
        if operation is None:
            raise Http404(f"No job action {key!r}.")
        if not self.may(request, operation):
            raise PermissionDenied
        job = self.get_object(request, object_id)
        if job is None:
            raise Http404(f"No job with id {object_id!r}.")
        if request.method == "POST" and (
            not operation.confirm or request.POST.get(CONFIRMED) == "yes"
        ):
            outcome = operations.apply_to_rows(
                operation, [(job.pk, job.status)], get_settings().database
            )
            self.message_user(request, outcome.message(), outcome.level)
            if outcome.changed and operation is not operations.PURGE:
                # Shown by the page's "History" button.
                note = f"{operation.past} from the admin (was {job.status})."
                self.log_change(request, job, note)
            if operation is operations.PURGE and outcome.changed:
                return HttpResponseRedirect(reverse("admin:django_sqlqueue_job_changelist"))
            return HttpResponseRedirect(reverse("admin:django_sqlqueue_job_change", args=[job.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": f"{operation.label} job #{job.pk}?",
            "opts": self.opts,
            "operation": operation,
            "job": job,
            "accepted": operation.accepts(job.status),
            "running_note": operations.RUNNING_NOTE if operation is operations.CANCEL else "",
            "cancel_url": reverse("admin:django_sqlqueue_job_change", args=[job.pk]),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "django_sqlqueue/admin/confirm_one.html", context)

    def operation_buttons(self, request: Any, job: Job) -> list[dict[str, Any]]:
        """The actions this user may take on this job in its current status."""
        buttons = []
        for operation in operations.OPERATIONS.values():
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
