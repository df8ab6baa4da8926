"""The read-only job page: fields grouped for reading, payload as JSON, the attempt history."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..conf import get_settings
from ..models import Job, Worker
from ..states import Status
from . import display
from .attempt_history import attempts_summary, history_rows
from .base import JobAdminBase
from .template_names import template_names
from .waiting import waiting_reasons
from .workflow import has_workflow, job_list, waited_for_by, waits_for

if TYPE_CHECKING:
    from django_stubs_ext import FieldOpts, StrOrPromise

    Fieldset = tuple[StrOrPromise | None, FieldOpts]

#: Other jobs of the same name listed on the page (served by the (name, -id) index).
RELATED_LIMIT = 10


def job_url(job_id: int) -> str:
    return reverse("admin:django_sqlqueue_job_change", args=[job_id])


class JobDetailMixin(JobAdminBase):
    """Display methods and layout of the job's change (view) page."""

    def get_fieldsets(self, request: HttpRequest, obj: Job | None = None) -> list[Fieldset]:
        fieldsets: list[Fieldset] = [
            (
                None,
                {
                    "fields": (
                        "status_badge",
                        "reference_display",
                        "name",
                        "queue",
                        "priority",
                        "attempts_display",
                        "idempotency_key_link",
                        "backend_display",
                    )
                },
            ),
            (
                gettext_lazy("When"),
                {
                    "fields": (
                        "created_display",
                        "run_at_display",
                        "started_display",
                        "finished_display",
                        "duration_display",
                        "updated_display",
                    )
                },
            ),
        ]
        if obj is not None and obj.status == Status.RUNNING:
            fieldsets.append(
                (
                    gettext_lazy("Lease"),
                    {"fields": ("lease_owner_link", "lease_expiry", "progress_display")},
                )
            )
        if obj is not None and (obj.concurrency_key or obj.unique_key or waiting_reasons(obj)):
            fieldsets.append(
                (
                    gettext_lazy("Flow control"),
                    {"fields": ("waiting_display", "concurrency_key", "unique_key")},
                )
            )
        if obj is not None and has_workflow(obj):
            fieldsets.append(
                (gettext_lazy("Workflow"), {"fields": ("waits_for_list", "waited_for_by_list")})
            )
        fieldsets.append((gettext_lazy("Arguments"), {"fields": ("args_json", "kwargs_json")}))
        if obj is not None and obj.result is not None:
            fieldsets.append((gettext_lazy("Result"), {"fields": ("result_json",)}))
        if obj is not None and obj.last_error:
            fieldsets.append((gettext_lazy("Last error"), {"fields": ("last_error_text",)}))
        fieldsets.append((gettext_lazy("Attempts"), {"fields": ("attempt_history",)}))
        fieldsets.append((gettext_lazy("Related jobs"), {"fields": ("same_name_jobs",)}))
        return fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> list[str]:
        return flatten_fieldsets(self.get_fieldsets(request, obj))

    @admin.display(description=gettext_lazy("waits for"))
    def waits_for_list(self, obj: Job) -> SafeString:
        return job_list(waits_for(obj))

    @admin.display(description=gettext_lazy("waited for by"))
    def waited_for_by_list(self, obj: Job) -> SafeString:
        return job_list(waited_for_by(obj))

    @admin.display(description=gettext_lazy("why it waits"))
    def waiting_display(self, obj: Job) -> SafeString | str:
        reasons = waiting_reasons(obj)
        if not reasons:
            return "-"
        return format_html_join(mark_safe("<br>"), "{}", ((reason,) for reason in reasons))

    @admin.display(description=gettext_lazy("reference"))
    def reference_display(self, obj: Job) -> str:
        """What to keep to find this job again (search box, `jobs show`, django.tasks)."""
        return obj.reference

    @admin.display(description=gettext_lazy("status"))
    def status_badge(self, obj: Job) -> SafeString:
        return display.status_badge(obj.status)

    @admin.display(description=gettext_lazy("attempts"))
    def attempts_display(self, obj: Job) -> SafeString | str:
        return attempts_summary(obj.attempts, obj.max_attempts, obj.history)

    @admin.display(description=gettext_lazy("idempotency key"))
    def idempotency_key_link(self, obj: Job) -> SafeString | str:
        if not obj.idempotency_key:
            return display.EMPTY
        return format_html(
            '<code>{}</code> · <a href="{}">{}</a>',
            obj.idempotency_key,
            display.changelist_url(idempotency_key=obj.idempotency_key),
            _("jobs with this key"),
        )

    @admin.display(description=gettext_lazy("tasks backend"))
    def backend_display(self, obj: Job) -> str:
        return obj.backend or display.EMPTY

    @admin.display(description=gettext_lazy("created"))
    def created_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.created_at)

    @admin.display(description=gettext_lazy("run at"))
    def run_at_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.run_at)

    @admin.display(description=gettext_lazy("started"))
    def started_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.started_at)

    @admin.display(description=gettext_lazy("finished"))
    def finished_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.finished_at)

    @admin.display(description=gettext_lazy("updated"))
    def updated_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.updated_at)

    @admin.display(description=gettext_lazy("duration"))
    def duration_display(self, obj: Job) -> str:
        return display.human_seconds(obj.duration)

    @admin.display(description=gettext_lazy("lease owner"))
    def lease_owner_link(self, obj: Job) -> SafeString | str:
        if not obj.lease_owner:
            return display.EMPTY
        alias = get_settings().database
        if Worker.objects.using(alias).filter(pk=obj.lease_owner).exists():
            url = reverse("admin:django_sqlqueue_worker_change", args=[obj.lease_owner])
            return format_html('<a href="{}"><code>{}</code></a>', url, obj.lease_owner)
        return format_html("<code>{}</code> {}", obj.lease_owner, _("(no heartbeat row)"))

    @admin.display(description=gettext_lazy("progress"))
    def progress_display(self, obj: Job) -> SafeString | str:
        """What the running attempt last reported, and a cancel request if there is one."""
        return display.running_note(obj) or display.EMPTY

    @admin.display(description=gettext_lazy("lease expires"))
    def lease_expiry(self, obj: Job) -> SafeString | str:
        if obj.lease_expires_at is None:
            return display.EMPTY
        note = ""
        if obj.lease_expires_at < timezone.now():
            note = display.badge(_("expired: the worker stopped renewing it"), "dead")
        return format_html("{} {}", display.moment(obj.lease_expires_at), note)

    @admin.display(description=gettext_lazy("args"))
    def args_json(self, obj: Job) -> SafeString:
        return display.pretty_json(obj.args)

    @admin.display(description=gettext_lazy("kwargs"))
    def kwargs_json(self, obj: Job) -> SafeString:
        return display.pretty_json(obj.kwargs)

    @admin.display(description=gettext_lazy("result"))
    def result_json(self, obj: Job) -> SafeString:
        return display.pretty_json(obj.result)

    @admin.display(description=gettext_lazy("last error"))
    def last_error_text(self, obj: Job) -> SafeString:
        return format_html('<pre class="sq-error">{}</pre>', obj.last_error)

    @admin.display(description=gettext_lazy("history"))
    def attempt_history(self, obj: Job) -> SafeString:
        return render_to_string(
            template_names(Job._meta, "attempt_history.html"), {"rows": history_rows(obj.history)}
        )

    @admin.display(description=gettext_lazy("same name"))
    def same_name_jobs(self, obj: Job) -> SafeString:
        others = list(
            Job.objects.using(get_settings().database)
            .filter(name=obj.name)
            .exclude(pk=obj.pk)
            .order_by("-id")
            .values_list("id", "status", "created_at")[:RELATED_LIMIT]
        )
        if not others:
            items: SafeString | str = format_html("<li>{}</li>", _("No other job of this name."))
        else:
            items = format_html_join(
                "",
                '<li><a href="{}">#{}</a> {} <span class="sq-quiet">{}</span></li>',
                (
                    (
                        job_url(pk),
                        pk,
                        display.status_badge(status),
                        format_html(_("created {time}"), time=display.moment(created)),
                    )
                    for pk, status, created in others
                ),
            )
        return format_html(
            '<ul class="sq-related">{}</ul><a href="{}">{} →</a>',
            items,
            display.changelist_url(name=obj.name),
            format_html(_("All jobs named {name}"), name=format_html("<code>{}</code>", obj.name)),
        )
