"""What the admin's dashboard draws: per-minute tallies of attempts and queue samples."""

from __future__ import annotations

import math

from django.db import models

#: Upper bounds (seconds) of the wait buckets a rollup row counts, the last one open.
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 1800.0, 7200.0, math.inf)


class JobRollup(models.Model):
    """Attempts that ended in one minute, per queue, job name and outcome: what the admin's
    dashboard draws, so that it never reads the job table. Workers and supervisors add to it
    (one upsert per flush, see metrics/rollups.py); supervisors delete old rows as they prune
    jobs."""

    minute = models.DateTimeField(help_text="Start of the minute (UTC) the attempts ended in.")
    queue = models.CharField(max_length=100)
    name = models.CharField(max_length=255)
    outcome = models.CharField(max_length=16)
    count = models.PositiveIntegerField(default=0)
    #: Seconds the handlers ran, summed over the attempts whose duration is known.
    duration_sum = models.FloatField(default=0.0)
    # Attempts by how long they waited from run_at to start: wait_b<i> counts waits of at most
    # WAIT_BUCKETS[i] seconds and more than WAIT_BUCKETS[i - 1].
    wait_b0 = models.PositiveIntegerField(default=0)
    wait_b1 = models.PositiveIntegerField(default=0)
    wait_b2 = models.PositiveIntegerField(default=0)
    wait_b3 = models.PositiveIntegerField(default=0)
    wait_b4 = models.PositiveIntegerField(default=0)
    wait_b5 = models.PositiveIntegerField(default=0)
    wait_b6 = models.PositiveIntegerField(default=0)
    wait_b7 = models.PositiveIntegerField(default=0)
    wait_b8 = models.PositiveIntegerField(default=0)
    wait_b9 = models.PositiveIntegerField(default=0)
    wait_b10 = models.PositiveIntegerField(default=0)
    wait_b11 = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["minute", "queue", "name", "outcome"], name="sqlqueue_rollup_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.queue} {self.name} {self.outcome}: {self.count}"


#: The wait bucket columns of JobRollup, in WAIT_BUCKETS order.
WAIT_COLUMNS = tuple(f"wait_b{i}" for i in range(len(WAIT_BUCKETS)))


class QueueSample(models.Model):
    """A queue's backlog at one minute, as a supervisor's housekeeping counted it (bounded
    counts, see metrics/state.py): the dashboard's backlog chart."""

    minute = models.DateTimeField()
    queue = models.CharField(max_length=100)
    pending = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    running = models.PositiveIntegerField(default=0)
    #: Seconds the oldest job waiting to run (due) had waited; None when none was waiting.
    oldest_wait = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["minute", "queue"], name="sqlqueue_sample_key")
        ]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.queue}: {self.pending} pending"
