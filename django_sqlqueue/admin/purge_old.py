"""The "purge finished jobs older than N days" form, the admin's `purgejobs --days N`."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.text import get_text_list
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import operations
from ..conf import get_settings
from ..models import Job
from ..states import FINISHED
from .base import JobAdminBase
from .display import short_status
from .template_names import template_names


class PurgeOldForm(forms.Form):
    days = forms.IntegerField(
        label=gettext_lazy("Days"),
        min_value=0,
        max_value=36500,
        initial=7,
        help_text=gettext_lazy("Jobs that finished more than this many days ago."),
    )
    statuses = forms.MultipleChoiceField(
        label=gettext_lazy("Statuses"),
        choices=[(s.value, s.label) for s in FINISHED],
        initial=[s.value for s in FINISHED],
        widget=forms.CheckboxSelectMultiple,
        help_text=gettext_lazy(
            "Only finished jobs can be purged; pending, failed and running ones never are."
        ),
    )
    queue = forms.CharField(
        label=gettext_lazy("Queue"),
        required=False,
        max_length=100,
        help_text=gettext_lazy("Empty: every queue."),
    )

    def cutoff(self, now: datetime | None = None) -> datetime:
        return (now or timezone.now()) - timedelta(days=self.cleaned_data["days"])

    def queryset(self) -> QuerySet[Job]:
        return operations.purgeable(
            older_than=self.cutoff(),
            statuses=self.cleaned_data["statuses"],
            queue=self.cleaned_data["queue"] or None,
            alias=get_settings().database,
        )

    def describe(self) -> str:
        """`Completed or Dead jobs in queue "mail" that finished more than 7 days ago`."""
        values = {
            "statuses": get_text_list([short_status(s) for s in self.cleaned_data["statuses"]]),
            "queue": self.cleaned_data["queue"],
            "days": self.cleaned_data["days"],
        }
        if values["queue"]:
            return (
                ngettext(
                    '%(statuses)s jobs in queue "%(queue)s" that finished more than '
                    "%(days)d day ago",
                    '%(statuses)s jobs in queue "%(queue)s" that finished more than '
                    "%(days)d days ago",
                    values["days"],
                )
                % values
            )
        return (
            ngettext(
                "%(statuses)s jobs that finished more than %(days)d day ago",
                "%(statuses)s jobs that finished more than %(days)d days ago",
                values["days"],
            )
            % values
        )


class PurgeOldMixin(JobAdminBase):
    def purge_old_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_purge_permission(request):
            raise PermissionDenied
        form = PurgeOldForm(request.POST or None)
        matching = None
        if request.method == "POST" and form.is_valid():
            if request.POST.get("confirmed") == "yes":
                deleted = operations.purge(form.queryset())
                self.message_user(
                    request,
                    ngettext(
                        "Purged %(count)d job: %(description)s.",
                        "Purged %(count)d jobs: %(description)s.",
                        deleted,
                    )
                    % {"count": deleted, "description": form.describe()},
                    messages.SUCCESS if deleted else messages.WARNING,
                )
                return HttpResponseRedirect(reverse("admin:django_sqlqueue_job_changelist"))
            matching = form.queryset().count()
        context = {
            **self.admin_site.each_context(request),
            "title": _("Purge finished jobs"),
            "opts": self.opts,
            "form": form,
            "matching": matching,
            "description": form.describe() if matching is not None else "",
            "cancel_url": reverse("admin:django_sqlqueue_job_changelist"),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, template_names(self.opts, "purge_old.html"), context)
