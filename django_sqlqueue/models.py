"""The job table, designed around the claim query, and the worker heartbeat table."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone

from .states import CLAIMABLE, FINISHED, PRIORITY_MAX, PRIORITY_MIN, Status


class PartialIndex(models.Index):
    """A partial index where the database has them; elsewhere a composite led by `fallback`.

    MySQL and MariaDB have no partial indexes and Django would silently drop the condition,
    leaving an index over every finished row. Leading with `status` instead keeps a claim's
    index range to the claimable rows however much history the table holds.
    """

    def __init__(self, *args: Any, fallback: tuple[str, ...] = ("status",), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fallback = tuple(fallback)

    def deconstruct(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        path, args, kwargs = super().deconstruct()
        if self.fallback != ("status",):
            kwargs["fallback"] = self.fallback
        return path, args, kwargs

    def create_sql(self, model, schema_editor, using="", **kwargs):  # type: ignore[no-untyped-def]
        if self.condition is None or schema_editor.connection.features.supports_partial_indexes:
            return super().create_sql(model, schema_editor, using=using, **kwargs)
        composite = models.Index(fields=[*self.fallback, *self.fields], name=self.name)
        return composite.create_sql(model, schema_editor, using=using, **kwargs)

    def check(self, model, connection):  # type: ignore[no-untyped-def]
        # Django warns (models.W037) that the condition is ignored; here it is replaced.
        return [e for e in super().check(model, connection) if e.id != "models.W037"]


claimable_q = models.Q(status__in=[s.value for s in CLAIMABLE])


class Job(models.Model):
    """One unit of work: what to run, when, and everything that happened to it."""

    Status = Status

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=255, help_text="Registered job name.")
    queue = models.CharField(max_length=100, default="default")
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    priority = models.SmallIntegerField(default=0, help_text="Higher runs first.")
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=5)
    run_at = models.DateTimeField(default=timezone.now, help_text="Not run before this time.")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    result = models.JSONField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    history = models.JSONField(
        default=list, blank=True, help_text="One entry per attempt: worker, times, outcome."
    )
    idempotency_key = models.CharField(max_length=255, null=True, blank=True, unique=True)
    lease_owner = models.CharField(max_length=100, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    backend = models.CharField(
        max_length=100, blank=True, default="", help_text="django.tasks backend alias, if any."
    )
    # 1 while the job is claimable, else NULL; kept by the database. MySQL and MariaDB have
    # no partial index, and `status IN (...)` would make their claim sort and lock every
    # claimable row; an index led by this column lets them walk claimable rows in order.
    claimable = models.GeneratedField(
        expression=models.Case(
            models.When(claimable_q, then=models.Value(1)),
            default=models.Value(None),
            output_field=models.SmallIntegerField(null=True),
        ),
        output_field=models.SmallIntegerField(null=True),
        db_persist=True,
    )

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The claim of one queue: ordered exactly as the claim orders.
            PartialIndex(
                fields=["queue", "-priority", "run_at", "id"],
                condition=claimable_q,
                fallback=("claimable",),
                name="sqlqueue_claim_queue",
            ),
            # The claim across all queues (a worker started without --queues).
            PartialIndex(
                fields=["-priority", "run_at", "id"],
                condition=claimable_q,
                fallback=("claimable",),
                name="sqlqueue_claim_any",
            ),
            # Lease recovery looks only at running jobs.
            PartialIndex(
                fields=["lease_expires_at"],
                condition=models.Q(status=Status.RUNNING),
                name="sqlqueue_running_lease",
            ),
            # purgejobs and the admin's finished-date filter.
            models.Index(fields=["status", "finished_at"], name="sqlqueue_status_finished"),
            models.Index(fields=["name", "-id"], name="sqlqueue_name"),
            # The admin's status filter, newest first.
            models.Index(fields=["status", "-id"], name="sqlqueue_status_id"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(priority__gte=PRIORITY_MIN, priority__lte=PRIORITY_MAX),
                name="sqlqueue_priority_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} #{self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    @property
    def duration(self) -> float | None:
        """Seconds the last attempt ran, once it has finished."""
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    # Set on the instance `enqueue` returns: True when an idempotency key matched an
    # existing job and nothing new was stored.
    deduplicated: bool = False

    def refresh(self) -> Job:
        self.refresh_from_db()
        return self


class Worker(models.Model):
    """One live worker process, as its heartbeat last reported it."""

    id = models.CharField(max_length=100, primary_key=True)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.CharField(max_length=1000, blank=True, help_text="Empty: all queues.")
    started_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    current_job_id = models.BigIntegerField(null=True, blank=True)
    jobs_done = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["hostname", "pid"]

    def __str__(self) -> str:
        return self.id
