"""Recurring jobs' state, shared by every supervisor (docs/schedules.md)."""

from __future__ import annotations

from django.db import models
from django.utils.timezone import now as current_time
from django.utils.translation import gettext_lazy as _


class Schedule(models.Model):
    """A recurring job: a cron schedule declared in code or settings, kept here so that every
    supervisor sees one state and staff can switch it off or change its cron in the admin."""

    class Missed(models.TextChoices):
        LATEST = "latest", _("run the latest missed tick once")
        SKIP = "skip", _("skip missed ticks")
        ALL = "all", _("run every missed tick (up to 100)")

    class Source(models.TextChoices):
        CODE = "code", _("@job decorator")
        SETTINGS = "settings", _("SQLQUEUE['SCHEDULES']")

    key = models.CharField(
        _("key"),
        max_length=200,
        unique=True,
        help_text=_("The SCHEDULES key, or the job name for a schedule declared on @job."),
    )
    job_name = models.CharField(_("job"), max_length=255)
    cron = models.CharField(
        _("cron"),
        max_length=200,
        help_text=_("In force: 5 fields (minute hour day month weekday), or 6 with seconds last."),
    )
    declared_cron = models.CharField(
        _("cron in code"),
        max_length=200,
        help_text=_("As code or settings declared it when a supervisor last started."),
    )
    kwargs = models.JSONField(_("kwargs"), default=dict, blank=True)
    # (Shadows django.utils.timezone in this class body: defaults use current_time.)
    timezone = models.CharField(_("time zone"), max_length=64, default="UTC")
    queue = models.CharField(
        _("queue"), max_length=100, blank=True, default="", help_text=_("Empty: the job's.")
    )
    priority = models.SmallIntegerField(
        _("priority"), null=True, blank=True, help_text=_("Empty: the job's.")
    )
    missed = models.CharField(
        _("missed ticks"), max_length=8, choices=Missed.choices, default=Missed.LATEST
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    source = models.CharField(_("declared in"), max_length=8, choices=Source.choices)
    removed_at = models.DateTimeField(
        _("removed from code"),
        null=True,
        blank=True,
        help_text=_("Set (and the schedule disabled) when code and settings no longer have it."),
    )
    next_run_at = models.DateTimeField(
        _("next run"), null=True, blank=True, help_text=_("The next tick not yet enqueued.")
    )
    last_run_at = models.DateTimeField(
        _("last run"), null=True, blank=True, help_text=_("Run time of the last job enqueued.")
    )
    # No constraint and no cascade: pruning and purging delete jobs with plain DELETEs and
    # must not have to look here; a deleted last job simply shows as gone.
    last_job = models.ForeignKey(
        "django_sqlqueue.Job",
        verbose_name=_("last job"),
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    created_at = models.DateTimeField(_("created"), default=current_time)
    updated_at = models.DateTimeField(_("updated"), default=current_time)

    class Meta:
        verbose_name = _("schedule")
        verbose_name_plural = _("schedules")
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key
