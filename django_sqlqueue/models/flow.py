"""Flow control's state: keys locked by claims and enqueues, and paused queues."""

from __future__ import annotations

from django.db import models
from django.utils.timezone import now as current_time
from django.utils.translation import gettext_lazy as _


class FlowKey(models.Model):
    """One row per flow-control key, locked while a claim or an enqueue decides on that key:
    the concurrency limit of a key, the rate limit of a job or queue (`starts`: the times of
    the starts in the last period), a unique_for window (the job and when the window ends)."""

    key = models.CharField(max_length=255, primary_key=True)
    job_id = models.BigIntegerField(null=True, blank=True)
    until = models.DateTimeField(null=True, blank=True)
    starts = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(default=current_time)

    def __str__(self) -> str:
        return self.key


#: Longest `by` and `reason` a paused queue keeps (operations.pause_queue refuses longer).
PAUSED_BY_LENGTH = 150
REASON_LENGTH = 255


class QueueState(models.Model):
    """A queue's switches that staff set at run time: paused or not (docs/flow-control.md).

    A queue has a row only once someone paused it; resuming keeps the row with `paused_at`
    empty. Workers read the paused names at most once a second, so claims cost nothing more
    while no queue is paused.
    """

    queue = models.CharField(_("queue"), max_length=100, primary_key=True)
    paused_at = models.DateTimeField(_("paused"), null=True, blank=True)
    paused_by = models.CharField(
        _("paused by"), max_length=PAUSED_BY_LENGTH, blank=True, default=""
    )
    reason = models.CharField(_("reason"), max_length=REASON_LENGTH, blank=True, default="")
    updated_at = models.DateTimeField(_("updated"), default=current_time)

    class Meta:
        verbose_name = _("queue")
        verbose_name_plural = _("queues")
        ordering = ["queue"]

    def __str__(self) -> str:
        return f"{self.queue} (paused)" if self.paused_at else self.queue

    @property
    def is_paused(self) -> bool:
        return self.paused_at is not None
