"""The workers panel: each worker process as its last heartbeat reported it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..conf import get_settings
from ..models import Worker
from ..services import stale_before
from . import display
from .filters import StaleWorkerFilter


def is_stale(worker: Worker, now: datetime | None = None) -> bool:
    return worker.last_seen_at < stale_before(now)


class WorkerAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "hostname",
        "pid",
        "queues_display",
        "heartbeat",
        "started_display",
        "current_job",
        "jobs_done",
    )
    list_filter = (StaleWorkerFilter, "hostname")
    search_fields = ("id", "hostname")
    readonly_fields = list_display
    fields = readonly_fields
    show_facets = admin.ShowFacets.NEVER

    class Media:
        css = {"all": ("django_sqlqueue/admin.css",)}

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Worker | None = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Worker | None = None) -> bool:
        return False

    def get_queryset(self, request: Any) -> QuerySet[Worker]:
        return super().get_queryset(request).using(get_settings().database)

    @admin.display(description="queues")
    def queues_display(self, obj: Worker) -> str:
        return obj.queues or "(all queues)"

    @admin.display(description="last heartbeat", ordering="last_seen_at")
    def heartbeat(self, obj: Worker) -> SafeString:
        stale = is_stale(obj)
        state = display.badge("stale", "dead") if stale else display.badge("alive", "completed")
        return format_html(
            '{} <span title="{}">{}</span>',
            state,
            timezone.localtime(obj.last_seen_at).strftime("%Y-%m-%d %H:%M:%S"),
            display.relative(obj.last_seen_at),
        )

    @admin.display(description="started", ordering="started_at")
    def started_display(self, obj: Worker) -> SafeString | str:
        return display.moment(obj.started_at)

    @admin.display(description="current job")
    def current_job(self, obj: Worker) -> SafeString | str:
        if obj.current_job_id is None:
            return "idle"
        url = reverse("admin:django_sqlqueue_job_change", args=[obj.current_job_id])
        return format_html('<a href="{}">job #{}</a>', url, obj.current_job_id)
