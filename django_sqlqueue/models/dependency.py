"""Workflows: which job waits for which (docs/workflows.md)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class JobDependency(models.Model):
    """One edge of a workflow: `job` waits (status `waiting`) until `depends_on` has finished.

    Edges are written once, with the waiting job, and kept after it runs so that its page can
    show what it waited for. They go when either job is deleted; `purgejobs` keeps a finished
    job while a job that has not finished still waits for it.
    """

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(
        "django_sqlqueue.Job",
        verbose_name=_("job"),
        related_name="dependency_links",
        on_delete=models.CASCADE,
    )
    depends_on = models.ForeignKey(
        "django_sqlqueue.Job",
        verbose_name=_("depends on"),
        related_name="dependent_links",
        on_delete=models.CASCADE,
    )
    #: `on_dependency_failure="run"`: the job runs even if this dependency ends dead or
    #: cancelled (the same on every edge of one job).
    run_on_failure = models.BooleanField(_("runs if it fails"), default=False)
    #: Set once `depends_on` has finished (by whoever saw it finish): "has this job anything
    #: left to wait for?" is then one index probe, however many jobs it waits for, instead of
    #: a read of all of them at every one's end.
    done = models.BooleanField(_("done"), default=False)

    class Meta:
        verbose_name = _("job dependency")
        verbose_name_plural = _("job dependencies")
        constraints = [
            models.UniqueConstraint(fields=["job", "depends_on"], name="sqlqueue_dependency_once")
        ]
        indexes = [
            # Anything left? The first edge of a job not done yet.
            models.Index(fields=["job", "done"], name="sqlqueue_dependency_left"),
            # The supervisors' sweep walks the edges not done yet, in id order (a crash may
            # have left one whose dependency finished).
            models.Index(fields=["done", "id"], name="sqlqueue_dependency_undone"),
        ]

    def __str__(self) -> str:
        return f"#{self.job_id} after #{self.depends_on_id}"
