"""Workflows: batches of jobs with a callback once every member has finished
(docs/workflows.md)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _


class JobBatch(models.Model):
    """A group of jobs (`Job.batch`) and what to enqueue once all of them have finished.

    No member's end writes this row: "anything left?" is one probe of the members' (batch,
    status) index, made by the worker that finished a member (once per claimed round, not per
    job) and by the supervisors' sweep. The row changes three times: closed (no more members),
    finished (one conditional UPDATE, in the transaction that stores the callback, so the
    callback is stored exactly once), and cancelled if someone cancels the batch.
    """

    id = models.BigAutoField(_("ID"), primary_key=True)
    label = models.CharField(_("label"), max_length=200, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    #: Set when no member may be added any more: the end of a `with batch(...)` block, or
    #: `close()` of one kept open. A batch finishes only once closed.
    closed_at = models.DateTimeField(_("closed"), null=True, blank=True)
    #: Set once, when every member had finished and the callback was stored.
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    cancelled_at = models.DateTimeField(_("cancelled"), null=True, blank=True)
    #: The batch whose block this one was created in: this batch's callback joins it, and it
    #: does not finish before this one has.
    parent = models.ForeignKey(
        "self",
        verbose_name=_("parent batch"),
        related_name="children",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # sqlqueue_batch_children leads with it
    )
    #: The job to store once the batch finishes, validated when the batch was created: name,
    #: queue, args, kwargs, priority, max_attempts, backend. NULL: no callback.
    callback = models.JSONField(_("callback"), null=True, blank=True)
    #: The callback job once stored (kept as an id: purging it leaves the batch readable).
    callback_job = models.ForeignKey(
        "django_sqlqueue.Job",
        verbose_name=_("callback job"),
        related_name="+",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
    )

    class Meta:
        verbose_name = _("batch")
        verbose_name_plural = _("batches")
        ordering = ["-id"]
        indexes = [
            # The supervisors' sweep: closed batches not finished yet, in id order.
            models.Index(fields=["finished_at", "closed_at", "id"], name="sqlqueue_batch_open"),
            # A parent's "anything left?": its children not finished yet.
            models.Index(fields=["parent", "finished_at"], name="sqlqueue_batch_children"),
        ]

    def __str__(self) -> str:
        name = gettext("batch #%(id)s") % {"id": self.pk}
        return f"{name} ({self.label})" if self.label else name

    @property
    def state(self) -> str:
        """open, closed (waiting for members) or finished."""
        if self.finished_at is not None:
            return "finished"
        return "closed" if self.closed_at is not None else "open"
