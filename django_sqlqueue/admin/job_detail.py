"""The read-only job page: fields grouped for reading, payload as JSON, the attempt history."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from ..conf import get_settings
from ..models import Job, Worker
from ..states import Status
from . import display

#: Other jobs of the same name listed on the page (served by the (name, -id) index).
RELATED_LIMIT = 10


def changelist_url(**params: str) -> str:
    return reverse("admin:django_sqlqueue_job_changelist") + "?" + urlencode(params)


def job_url(job_id: int) -> str:
    return reverse("admin:django_sqlqueue_job_change", args=[job_id])


def history_entries(job: Job) -> list[dict[str, Any]]:
    """The attempt history as the template shows it, tolerant of entries it cannot read."""
    entries = []
    for raw in job.history or []:
        if not isinstance(raw, dict):
            entries.append({"raw": display.pretty_json(raw)})
            continue
        started = display.parse_moment(raw.get("started_at"))
        finished = display.parse_moment(raw.get("finished_at"))
        elapsed = display.timedelta_between(started, finished)
        entries.append(
            {
                "attempt": raw.get("attempt", "?"),
                "worker": raw.get("worker") or "",
                "started": display.moment(started),
                "finished": display.moment(finished),
                "duration": display.human_seconds(elapsed.total_seconds() if elapsed else None),
                "outcome": raw.get("outcome") or "",
                "outcome_badge": display.badge(raw.get("outcome") or "?", outcome_css(raw)),
                "error": raw.get("error") or "",
                "traceback": raw.get("traceback") or "",
            }
        )
    return entries


def outcome_css(entry: dict[str, Any]) -> str:
    outcome = entry.get("outcome")
    if outcome == "completed":
        return "completed"
    if outcome in ("released", "cancelled"):
        return "cancelled"
    return "dead" if outcome == "lost" else "failed"


class JobDetailMixin:
    """Display methods and layout of the job's change (view) page."""

    def get_fieldsets(self, request: Any, obj: Job | None = None) -> list[tuple[Any, dict]]:
        fieldsets: list[tuple[Any, dict]] = [
            (
                None,
                {
                    "fields": (
                        "status_badge",
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
                "When",
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
            fieldsets.append(("Lease", {"fields": ("lease_owner_link", "lease_expiry")}))
        fieldsets.append(("Arguments", {"fields": ("args_json", "kwargs_json")}))
        if obj is not None and obj.result is not None:
            fieldsets.append(("Result", {"fields": ("result_json",)}))
        if obj is not None and obj.last_error:
            fieldsets.append(("Last error", {"fields": ("last_error_text",)}))
        fieldsets.append(("Attempts", {"fields": ("attempt_history",)}))
        fieldsets.append(("Related jobs", {"fields": ("same_name_jobs",)}))
        return fieldsets

    def get_readonly_fields(self, request: Any, obj: Job | None = None) -> list[str]:
        return [
            name for _, options in self.get_fieldsets(request, obj) for name in options["fields"]
        ]

    @admin.display(description="status")
    def status_badge(self, obj: Job) -> SafeString:
        return display.status_badge(obj.status)

    @admin.display(description="attempts")
    def attempts_display(self, obj: Job) -> str:
        return f"{obj.attempts} / {obj.max_attempts}"

    @admin.display(description="idempotency key")
    def idempotency_key_link(self, obj: Job) -> SafeString | str:
        if not obj.idempotency_key:
            return display.EMPTY
        return format_html(
            '<code>{}</code> · <a href="{}">jobs with this key</a>',
            obj.idempotency_key,
            changelist_url(idempotency_key=obj.idempotency_key),
        )

    @admin.display(description="tasks backend")
    def backend_display(self, obj: Job) -> str:
        return obj.backend or display.EMPTY

    @admin.display(description="created")
    def created_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.created_at)

    @admin.display(description="run at")
    def run_at_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.run_at)

    @admin.display(description="started")
    def started_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.started_at)

    @admin.display(description="finished")
    def finished_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.finished_at)

    @admin.display(description="updated")
    def updated_display(self, obj: Job) -> SafeString | str:
        return display.moment(obj.updated_at)

    @admin.display(description="duration")
    def duration_display(self, obj: Job) -> str:
        return display.human_seconds(obj.duration)

    @admin.display(description="lease owner")
    def lease_owner_link(self, obj: Job) -> SafeString | str:
        if not obj.lease_owner:
            return display.EMPTY
        alias = get_settings().database
        if Worker.objects.using(alias).filter(pk=obj.lease_owner).exists():
            url = reverse("admin:django_sqlqueue_worker_change", args=[obj.lease_owner])
            return format_html('<a href="{}"><code>{}</code></a>', url, obj.lease_owner)
        return format_html("<code>{}</code> (no heartbeat row)", obj.lease_owner)

    @admin.display(description="lease expires")
    def lease_expiry(self, obj: Job) -> SafeString | str:
        if obj.lease_expires_at is None:
            return display.EMPTY
        expired = obj.lease_expires_at < timezone.now()
        note = display.badge("expired: the worker stopped renewing it", "dead") if expired else ""
        return format_html("{} {}", display.moment(obj.lease_expires_at), note)

    @admin.display(description="args")
    def args_json(self, obj: Job) -> SafeString:
        return display.pretty_json(obj.args)

    @admin.display(description="kwargs")
    def kwargs_json(self, obj: Job) -> SafeString:
        return display.pretty_json(obj.kwargs)

    @admin.display(description="result")
    def result_json(self, obj: Job) -> SafeString:
        return display.pretty_json(obj.result)

    @admin.display(description="last error")
    def last_error_text(self, obj: Job) -> SafeString:
        return format_html('<pre class="sq-error">{}</pre>', obj.last_error)

    @admin.display(description="history")
    def attempt_history(self, obj: Job) -> SafeString:
        return render_to_string(
            "django_sqlqueue/admin/history.html", {"entries": history_entries(obj)}
        )

    @admin.display(description="same name")
    def same_name_jobs(self, obj: Job) -> SafeString:
        others = list(
            Job.objects.using(get_settings().database)
            .filter(name=obj.name)
            .exclude(pk=obj.pk)
            .order_by("-id")
            .values_list("id", "status", "created_at")[:RELATED_LIMIT]
        )
        if not others:
            items: SafeString | str = format_html("<li>{}</li>", "No other job of this name.")
        else:
            items = format_html_join(
                "",
                '<li><a href="{}">#{}</a> {} <span class="sq-quiet">created {}</span></li>',
                (
                    (job_url(pk), pk, display.status_badge(status), display.moment(created))
                    for pk, status, created in others
                ),
            )
        return format_html(
            '<ul class="sq-related">{}</ul><a href="{}">All jobs named <code>{}</code> →</a>',
            items,
            changelist_url(name=obj.name),
            obj.name,
        )
