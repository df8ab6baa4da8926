"""The queues page: every queue with its job counts, paused or not, and a button to pause or
resume it (the admin's `manage.py queues`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _

from ..conf import get_settings
from ..metrics.queues import QueueRow, queue_rows
from ..models.flow import PAUSED_BY_LENGTH, REASON_LENGTH
from ..operations import pause_queue, resume_queue
from ..states import Status


class QueueStateAdmin(admin.ModelAdmin):
    """One page instead of Django's change list: the queues come from the jobs as much as
    from the `QueueState` rows, which exist only for queues someone paused."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        can_change = self.has_change_permission(request)
        alias = get_settings().database
        if request.method == "POST":
            if not can_change:
                raise PermissionDenied
            self.act(request, alias)
            return HttpResponseRedirect(request.get_full_path())
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": _("Queues"),
            "rows": [_Shown(row) for row in queue_rows(alias)],
            "statuses": list(Status),
            "can_change": can_change,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "django_sqlqueue/admin/queues.html", context)

    def act(self, request: HttpRequest, alias: str) -> None:
        queue = request.POST.get("queue", "").strip()
        action = request.POST.get("action")
        try:
            if action == "pause":
                user = request.user.get_username() if request.user.is_authenticated else ""
                reason = request.POST.get("reason", "").strip()[:REASON_LENGTH]
                by = f"{user[: PAUSED_BY_LENGTH - len(' (admin)')]} (admin)"
                pause_queue(queue, by=by, reason=reason, using=alias)
                self.message_user(request, _("Paused queue %(queue)s.") % {"queue": queue})
            elif action == "resume":
                resume_queue(queue, using=alias)
                self.message_user(request, _("Resumed queue %(queue)s.") % {"queue": queue})
        except ValueError as exc:  # InvalidJobError too: a bad name, a NUL in the reason
            self.message_user(request, str(exc), messages.ERROR)


class _Shown:
    """A QueueRow as the template reads it (counts in the column order)."""

    def __init__(self, row: QueueRow) -> None:
        self.queue = row.queue
        self.paused = row.paused
        self.paused_at = row.paused_at
        self.paused_by = row.paused_by
        self.reason = row.reason
        self.count_list = [row.counts[s.value] for s in Status]


__all__ = ["QueueStateAdmin"]
