"""The job table, designed around the claim query, and the worker heartbeat table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import models
from django.utils import timezone
from django.utils.timezone import now as current_time
from django.utils.translation import gettext_lazy as _

from .states import CLAIMABLE, FINISHED, PRIORITY_MAX, PRIORITY_MIN, Status

if TYPE_CHECKING:
    from django.core.checks import CheckMessage
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.backends.base.schema import BaseDatabaseSchemaEditor
    from django.db.backends.ddl_references import Statement


class PartialIndex(models.Index):
    """A partial index where the database has them; elsewhere a composite led by `fallback`.

    MySQL and MariaDB have no partial indexes and Django would silently drop the condition,
    leaving an index over every finished row. Leading with `status` instead keeps a claim's
    index range to the claimable rows however much history the table holds.
    """

    def __init__(self, *args: Any, fallback: tuple[str, ...] = ("status",), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fallback = tuple(fallback)

    def deconstruct(self) -> tuple[str, Sequence[Any], dict[str, Any]]:
        path, args, kwargs = super().deconstruct()
        if self.fallback != ("status",):
            kwargs["fallback"] = self.fallback
        return path, args, kwargs

    def create_sql(
        self,
        model: type[models.Model],
        schema_editor: BaseDatabaseSchemaEditor,
        using: str = "",
        **kwargs: Any,
    ) -> Statement:
        if self.condition is None or schema_editor.connection.features.supports_partial_indexes:
            return super().create_sql(model, schema_editor, using=using, **kwargs)
        composite = models.Index(fields=[*self.fallback, *self.fields], name=self.name)
        return composite.create_sql(model, schema_editor, using=using, **kwargs)

    def check(
        self, model: type[models.Model], connection: BaseDatabaseWrapper
    ) -> list[CheckMessage]:
        # Django warns (models.W037) that the condition is ignored; here it is replaced.
        return [e for e in super().check(model, connection) if e.id != "models.W037"]


claimable_q = models.Q(status__in=[s.value for s in CLAIMABLE])
#: Statuses in which a unique job keeps others with its unique key out.
UNIQUE_ACTIVE = (Status.PENDING, Status.FAILED, Status.RUNNING)


class PartialUniqueConstraint(models.UniqueConstraint):
    """A conditional unique constraint where the database has partial indexes; elsewhere
    (MySQL, MariaDB) the same constraint without the condition. Used on a column that is
    NULL outside the condition, so both say the same thing; the condition only keeps the
    NULLs out of the index."""

    def _fallback(self) -> models.UniqueConstraint:
        return models.UniqueConstraint(fields=self.fields, name=self.name)

    def constraint_sql(self, model: Any, schema_editor: Any) -> Any:
        if self.condition is None or schema_editor.connection.features.supports_partial_indexes:
            return super().constraint_sql(model, schema_editor)
        return self._fallback().constraint_sql(model, schema_editor)

    def create_sql(self, model: Any, schema_editor: Any) -> Any:
        if self.condition is None or schema_editor.connection.features.supports_partial_indexes:
            return super().create_sql(model, schema_editor)
        return self._fallback().create_sql(model, schema_editor)

    def remove_sql(self, model: Any, schema_editor: Any) -> Any:
        if self.condition is None or schema_editor.connection.features.supports_partial_indexes:
            return super().remove_sql(model, schema_editor)
        return self._fallback().remove_sql(model, schema_editor)

    def check(self, model: Any, connection: Any) -> list[CheckMessage]:
        # Django warns (models.W036) that the condition is ignored; here it is replaced.
        return [e for e in super().check(model, connection) if e.id != "models.W036"]


class Job(models.Model):
    """One unit of work: what to run, when, and everything that happened to it."""

    Status = Status

    id = models.BigAutoField(_("ID"), primary_key=True)
    name = models.CharField(_("name"), max_length=255, help_text=_("Registered job name."))
    queue = models.CharField(_("queue"), max_length=100, default="default")
    args = models.JSONField(_("args"), default=list, blank=True)
    kwargs = models.JSONField(_("kwargs"), default=dict, blank=True)
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.PENDING
    )
    priority = models.SmallIntegerField(_("priority"), default=0, help_text=_("Higher runs first."))
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    max_attempts = models.PositiveIntegerField(_("max attempts"), default=5)
    run_at = models.DateTimeField(
        _("run at"), default=timezone.now, help_text=_("Not run before this time.")
    )
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    updated_at = models.DateTimeField(_("updated"), default=timezone.now)
    result = models.JSONField(_("result"), null=True, blank=True)
    last_error = models.TextField(_("last error"), blank=True, default="")
    history = models.JSONField(
        _("history"),
        default=list,
        blank=True,
        help_text=_("One entry per attempt: worker, times, outcome."),
    )
    idempotency_key = models.CharField(
        _("idempotency key"), max_length=255, null=True, blank=True, unique=True
    )
    lease_owner = models.CharField(_("lease owner"), max_length=100, blank=True, default="")
    lease_expires_at = models.DateTimeField(_("lease expires"), null=True, blank=True)
    backend = models.CharField(
        _("tasks backend"),
        max_length=100,
        blank=True,
        default="",
        help_text=_("django.tasks backend alias, if any."),
    )
    progress = models.PositiveSmallIntegerField(
        _("progress"),
        null=True,
        blank=True,
        help_text=_("Percent done, as the running attempt last reported."),
    )
    # db_default: the enqueue path's INSERT leaves the column out.
    progress_message = models.CharField(
        _("progress message"), max_length=255, blank=True, default="", db_default=""
    )
    cancel_requested_at = models.DateTimeField(
        _("cancel requested"),
        null=True,
        blank=True,
        help_text=_("Set when someone cancels the job while it runs."),
    )
    # W3C trace context (traceparent, tracestate) of the span that enqueued the job, when
    # OpenTelemetry is in use: the job's execution span becomes its child (tracing.py).
    trace_context = models.JSONField(null=True, blank=True)
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
    # Flow control (docs/flow-control.md). A digest of the name and arguments of a job
    # declared unique=True; `unique_active` repeats it while the job is pending, failed or
    # running, else NULL, and a unique index on it stores one active job per digest.
    # NULL, not "": a job without a key must stay out of the unique index.
    unique_key = models.CharField(  # noqa: DJ001
        _("unique key"), max_length=64, null=True, blank=True
    )
    unique_active = models.GeneratedField(
        expression=models.Case(
            models.When(
                models.Q(status__in=[s.value for s in UNIQUE_ACTIVE]), then=models.F("unique_key")
            ),
            default=models.Value(None),
            output_field=models.CharField(max_length=64, null=True),
        ),
        output_field=models.CharField(max_length=64, null=True),
        db_persist=True,
    )
    #: Jobs with one key run at most `concurrency` at a time (the handler's limit).
    # NULL for the jobs without a limit, like unique_key.
    concurrency_key = models.CharField(  # noqa: DJ001
        _("concurrency key"), max_length=200, null=True, blank=True
    )

    class Meta:
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
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
            # Flow control's WAKE: the parked jobs of one concurrency key, oldest first.
            PartialIndex(
                fields=["concurrency_key", "run_at", "id"],
                condition=models.Q(concurrency_key__isnull=False, status=Status.PENDING),
                fallback=(),
                name="sqlqueue_concurrency_wait",
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
            PartialUniqueConstraint(
                fields=["unique_active"],
                condition=models.Q(unique_active__isnull=False),
                name="sqlqueue_unique_active",
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

    id = models.CharField(_("ID"), max_length=100, primary_key=True)
    hostname = models.CharField(_("host"), max_length=255)
    pid = models.PositiveIntegerField(_("PID"))
    queues = models.CharField(
        _("queues"), max_length=1000, blank=True, help_text=_("Empty: all queues.")
    )
    started_at = models.DateTimeField(_("started"), default=timezone.now)
    last_seen_at = models.DateTimeField(_("last heartbeat"), default=timezone.now)
    current_job_id = models.BigIntegerField(_("current job"), null=True, blank=True)
    jobs_done = models.PositiveIntegerField(_("jobs done"), default=0)

    class Meta:
        verbose_name = _("worker")
        verbose_name_plural = _("workers")
        ordering = ["hostname", "pid"]

    def __str__(self) -> str:
        return self.id


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
        Job,
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


#: Upper bounds (seconds) of the wait buckets a rollup row counts, the last one open.
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 1800.0, 7200.0, math.inf)


class JobRollup(models.Model):
    """Attempts that ended in one minute, per queue, job name and outcome: what the admin's
    dashboard draws, so that it never reads the job table. Workers and supervisors add to it
    (one upsert per flush, see rollups.py); supervisors delete old rows as they prune jobs."""

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


class QueueState(models.Model):
    """A queue's switches that staff set at run time: paused or not (docs/flow-control.md).

    A queue has a row only once someone paused it; resuming keeps the row with `paused_at`
    empty. Workers read the paused names at most once a second, so claims cost nothing more
    while no queue is paused.
    """

    queue = models.CharField(_("queue"), max_length=100, primary_key=True)
    paused_at = models.DateTimeField(_("paused"), null=True, blank=True)
    paused_by = models.CharField(_("paused by"), max_length=150, blank=True, default="")
    reason = models.CharField(_("reason"), max_length=255, blank=True, default="")
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
