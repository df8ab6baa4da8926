"""The schedules admin: each recurring job, its next and last run, and the switches staff need.

Schedules are declared in code or settings, so none is added here; staff can enable and
disable them, change the cron in force, and run one now. An edit takes effect before the
next tick: the supervisors enqueue a tick only while the row still says what they read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db.models import F, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..conf import get_settings
from ..exceptions import InvalidJobError
from ..models import Schedule
from ..registry import registry
from ..scheduling.cron import Cron, CronError
from ..scheduling.describe import describe
from ..scheduling.plan import jobs_key_prefix
from ..scheduling.store import retime, run_now, set_enabled
from . import display
from .query_guard import QueryGuardMixin

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


#: A supervisor enqueues a tick within about a second of its time (it rereads the schedules
#: every second): a next run this much in the past means no supervisor is scheduling.
OVERDUE_SECONDS = 60


def jobs_url(schedule: Schedule) -> str:
    """The job list filtered to this schedule's jobs (their idempotency keys' prefix)."""
    return display.changelist_url(idempotency_key__startswith=jobs_key_prefix(schedule.key))


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = ("enabled", "cron")

    def clean_cron(self) -> str:
        cron = str(self.cleaned_data["cron"]).strip()
        assert self.instance is not None
        try:
            Cron(cron, self.instance.timezone, hash_id=self.instance.key).next_after(timezone.now())
        except CronError as exc:
            raise forms.ValidationError(
                _(
                    "%(error)s. Write 5 fields (minute hour day month weekday), or 6 with "
                    "seconds last."
                )
                % {"error": exc}
            ) from None
        return cron


class ScheduleAdmin(QueryGuardMixin, admin.ModelAdmin):
    form = ScheduleForm
    # Narrow columns: fits beside Django's sidebar and the filters at 1280 px.
    list_display = (
        "schedule_column",
        "cron_column",
        "enabled",
        "next_run_column",
        "last_run_column",
    )
    list_display_links = ("schedule_column",)
    list_filter = ("enabled", "source")
    search_fields = ("key", "job_name")
    actions = ("enable_schedules", "disable_schedules", "run_schedules_now")
    readonly_fields = (
        "key",
        "job_name",
        "cron_words",
        "declared_cron",
        "timezone",
        "kwargs_json",
        "queue_display",
        "priority_display",
        "missed",
        "source",
        "removed_at",
        "next_run_column",
        "last_run_column",
    )
    fieldsets = (
        (None, {"fields": ("key", "job_name", "enabled", "cron", "cron_words", "timezone")}),
        (
            gettext_lazy("Declared"),
            {
                "fields": (
                    "declared_cron",
                    "kwargs_json",
                    "queue_display",
                    "priority_display",
                    "missed",
                    "source",
                    "removed_at",
                )
            },
        ),
        (gettext_lazy("Runs"), {"fields": ("next_run_column", "last_run_column")}),
    )
    show_facets = admin.ShowFacets.NEVER

    class Media:
        css = {"all": ("django_sqlqueue/admin.css",)}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # declared in code or settings (docs/schedules.md)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        return (
            super()
            .get_queryset(request)
            .using(get_settings().database)
            .annotate(last_status=F("last_job__status"))
        )

    def get_readonly_fields(
        self, request: HttpRequest, obj: Schedule | None = None
    ) -> tuple[str, ...]:
        if obj is not None and obj.removed_at is not None:
            return (*self.readonly_fields, "enabled")  # gone from code: nothing to enable
        return tuple(self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        # Only what the form changed: a tick enqueued meanwhile keeps its next_run_at.
        fields = [name for name in ("enabled", "cron") if name in form.changed_data]
        if "cron" in fields:
            retime(obj)
            fields.append("next_run_at")
        obj.updated_at = timezone.now()
        obj.save(using=get_settings().database, update_fields=[*fields, "updated_at"])

    # Columns ----------------------------------------------------------------------------

    @admin.display(description=gettext_lazy("schedule"), ordering="key")
    def schedule_column(self, obj: Schedule) -> SafeString:
        """The key, and the job under it when they differ (a SCHEDULES entry)."""
        if obj.job_name == obj.key:
            return format_html("{}", obj.key)
        return format_html('{}<div class="sq-sub">{}</div>', obj.key, obj.job_name)

    @admin.display(description=gettext_lazy("cron"), ordering="cron")
    def cron_column(self, obj: Schedule) -> SafeString:
        words = describe(obj.cron)
        return format_html(
            '<code>{}</code><div class="sq-sub">{}{}</div>',
            obj.cron,
            f"{words}, " if words else "",
            obj.timezone,
        )

    @admin.display(description=gettext_lazy("in words"))
    def cron_words(self, obj: Schedule) -> str:
        words = describe(obj.cron)
        return f"{words} ({obj.timezone})" if words else display.EMPTY

    @admin.display(description=gettext_lazy("next run"), ordering="next_run_at")
    def next_run_column(self, obj: Schedule) -> SafeString | str:
        """When it runs next; a time long past says why nothing ran (no supervisor)."""
        if not obj.enabled:
            if obj.removed_at is not None:
                return _("disabled: removed from code")
            return _("disabled")
        if obj.next_run_at is None:
            return display.compact_moment(obj.next_run_at)
        late = (timezone.now() - obj.next_run_at).total_seconds()
        if late < OVERDUE_SECONDS:
            return display.compact_moment(obj.next_run_at)
        return format_html(
            '{}<div class="sq-sub sq-overdue">{}</div>',
            display.compact_moment(obj.next_run_at),
            _(
                "%(late)s late: no supervisor has enqueued it. Ticks are enqueued by "
                "manage.py runworkers (without --no-scheduler)."
            )
            % {"late": display.human_seconds(late)},
        )

    @admin.display(description=gettext_lazy("last run"), ordering="last_run_at")
    def last_run_column(self, obj: Schedule) -> SafeString:
        """The last job's status and time (a link to it), and a link to all its jobs."""
        jobs = format_html('<a href="{}">{}</a>', jobs_url(obj), _("all jobs"))
        if obj.last_job_id is None:
            return format_html('{}<div class="sq-sub">{}</div>', display.EMPTY, jobs)
        status = getattr(obj, "last_status", None)
        url = reverse("admin:django_sqlqueue_job_change", args=[obj.last_job_id])
        badge = (
            display.status_badge(status)
            if status
            else format_html('<span class="sq-quiet">{}</span>', _("deleted"))
        )
        return format_html(
            '{} <a href="{}">{}</a><div class="sq-sub">{}</div>',
            badge,
            url,
            display.compact_moment(obj.last_run_at),
            jobs,
        )

    @admin.display(description=gettext_lazy("kwargs"))
    def kwargs_json(self, obj: Schedule) -> SafeString:
        return display.pretty_json(obj.kwargs)

    @admin.display(description=gettext_lazy("queue"))
    def queue_display(self, obj: Schedule) -> StrOrPromise:
        return obj.queue or gettext_lazy("(the job's)")

    @admin.display(description=gettext_lazy("priority"))
    def priority_display(self, obj: Schedule) -> StrOrPromise:
        return str(obj.priority) if obj.priority is not None else gettext_lazy("(the job's)")

    # Actions ----------------------------------------------------------------------------

    @admin.action(description=gettext_lazy("Enable selected schedules"), permissions=["change"])
    def enable_schedules(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        removed = queryset.filter(removed_at__isnull=False)
        for schedule in removed:
            self.message_user(
                request,
                _("%(key)s is no longer declared in code or settings; not enabled.")
                % {"key": schedule.key},
                messages.WARNING,
            )
        ids = queryset.filter(removed_at__isnull=True).values_list("pk", flat=True)
        count = set_enabled(ids, True, get_settings().database)
        self.message_user(
            request,
            ngettext("%(count)d schedule enabled.", "%(count)d schedules enabled.", count)
            % {"count": count},
        )

    @admin.action(description=gettext_lazy("Disable selected schedules"), permissions=["change"])
    def disable_schedules(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        count = set_enabled(queryset.values_list("pk", flat=True), False, get_settings().database)
        self.message_user(
            request,
            ngettext("%(count)d schedule disabled.", "%(count)d schedules disabled.", count)
            % {"count": count},
        )

    @admin.action(
        description=gettext_lazy("Run selected schedules now (one job each)"),
        permissions=["change"],
    )
    def run_schedules_now(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        alias = get_settings().database
        for schedule in queryset:
            try:
                handler = registry.get(schedule.job_name)
                job = run_now(schedule, handler, alias)
            except InvalidJobError as exc:
                self.message_user(request, f"{schedule.key}: {exc}", messages.ERROR)
                continue
            self.message_user(
                request,
                format_html(
                    '{} <a href="{}">{}</a>',
                    _("%(key)s: enqueued") % {"key": schedule.key},
                    reverse("admin:django_sqlqueue_job_change", args=[job.pk]),
                    _("job #%(id)s") % {"id": job.pk},
                ),
            )
