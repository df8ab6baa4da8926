"""The "purge finished jobs older than N days" form, the admin's `purgejobs --days N`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from .. import services
from ..conf import get_settings
from ..states import FINISHED


class PurgeOldForm(forms.Form):
    days = forms.IntegerField(
        min_value=0,
        max_value=36500,
        initial=7,
        help_text="Jobs that finished more than this many days ago.",
    )
    statuses = forms.MultipleChoiceField(
        choices=[(s.value, s.label) for s in FINISHED],
        initial=[s.value for s in FINISHED],
        widget=forms.CheckboxSelectMultiple,
        help_text="Only finished jobs can be purged; pending, failed and running ones never are.",
    )
    queue = forms.CharField(required=False, max_length=100, help_text="Empty: every queue.")

    def cutoff(self, now: datetime | None = None) -> datetime:
        return (now or timezone.now()) - timedelta(days=self.cleaned_data["days"])

    def queryset(self) -> Any:
        return services.purgeable(
            older_than=self.cutoff(),
            statuses=self.cleaned_data["statuses"],
            queue=self.cleaned_data["queue"] or None,
            alias=get_settings().database,
        )

    def describe(self) -> str:
        statuses = ", ".join(self.cleaned_data["statuses"])
        queue = self.cleaned_data["queue"]
        where = f" in queue {queue!r}" if queue else ""
        return (
            f"{statuses} jobs{where} that finished more than {self.cleaned_data['days']} days ago"
        )


class PurgeOldMixin:
    def purge_old_view(self, request: Any) -> HttpResponse:
        if not self.has_purge_permission(request):
            raise PermissionDenied
        form = PurgeOldForm(request.POST or None)
        matching = None
        if request.method == "POST" and form.is_valid():
            if request.POST.get("confirmed") == "yes":
                deleted = services.purge(form.queryset())
                self.message_user(
                    request,
                    f"Purged {deleted} job{'s' if deleted != 1 else ''}: {form.describe()}.",
                    messages.SUCCESS if deleted else messages.WARNING,
                )
                return HttpResponseRedirect(reverse("admin:django_sqlqueue_job_changelist"))
            matching = form.queryset().count()
        context = {
            **self.admin_site.each_context(request),
            "title": "Purge finished jobs",
            "opts": self.opts,
            "form": form,
            "matching": matching,
            "description": form.describe() if matching is not None else "",
            "cancel_url": reverse("admin:django_sqlqueue_job_changelist"),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "django_sqlqueue/admin/purge_old.html", context)
