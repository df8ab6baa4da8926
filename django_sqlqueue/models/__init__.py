"""The job table, designed around the claim query, the worker heartbeat table, and their
companions (schedules, the dashboard's rollup, flow control's state), one module each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..references import Reference, format_reference, parse_reference
from ..states import CLAIMABLE, FINISHED, PRIORITY_MAX, PRIORITY_MIN, Status

# The companions of the job table, one module each, imported here so that Django finds them
# and `django_sqlqueue.models` stays the one place to import a model from.
from .batch import JobBatch
from .dependency import JobDependency
from .flow import FlowKey, QueueState
from .rollup import WAIT_BUCKETS, WAIT_COLUMNS, JobRollup, QueueSample
from .schedule import Schedule

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


def reference_q(reference: Reference) -> models.Q:
    """The job `reference` names, and no other: its primary key and its nonce (a job stored
    before nonces has none). A reference kept from before a failover that lost its job
    matches nothing, never the job that took its id."""
    if reference.nonce is None:
        return models.Q(pk=reference.id, ref_nonce__isnull=True)
    return models.Q(pk=reference.id, ref_nonce=reference.nonce)


class JobQuerySet(models.QuerySet["Job"]):
    def referenced(self, reference: object) -> JobQuerySet:
        """The job `reference` names (references.py), or none: one primary-key lookup."""
        parsed = parse_reference(reference)
        return self.none() if parsed is None else self.filter(reference_q(parsed))


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
    # Unique through the partial constraint below: most jobs have no key and stay out of it.
    idempotency_key = models.CharField(  # noqa: DJ001
        _("idempotency key"), max_length=255, null=True, blank=True
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
    # Workflows (docs/workflows.md): set when a job is enqueued after this one, so that the
    # worker that finishes it releases the jobs waiting for it at once (JobDependency).
    has_dependents = models.BooleanField(
        _("has dependents"), default=False, db_default=False, editable=False
    )
    # Workflows: the batch this job is a member of (enqueued inside `with batch(...)`).
    batch = models.ForeignKey(
        JobBatch,
        verbose_name=_("batch"),
        related_name="members",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        db_index=False,
    )
    # The random half of the job's public reference (references.py): set as the job is
    # stored, NULL for jobs stored before it existed. Its lookups go by the primary key.
    ref_nonce = models.BigIntegerField(_("reference nonce"), null=True, blank=True, editable=False)

    objects = JobQuerySet.as_manager()

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
            # purgejobs and the admin's finished-date filter. Partial: a job enters it when it
            # finishes, so its INSERT and its claim do not write it (every query that uses it
            # bounds finished_at, which implies the condition).
            PartialIndex(
                fields=["status", "finished_at"],
                condition=models.Q(finished_at__isnull=False),
                fallback=(),
                name="sqlqueue_status_finished",
            ),
            models.Index(fields=["name", "-id"], name="sqlqueue_name"),
            # The admin's status filter, newest first.
            models.Index(fields=["status", "-id"], name="sqlqueue_status_id"),
            # A batch's "anything left?" and its members by status. Partial: a job in no
            # batch never writes it (MySQL and MariaDB keep every row in it).
            PartialIndex(
                fields=["batch", "status"],
                condition=models.Q(batch__isnull=False),
                fallback=(),
                name="sqlqueue_batch_members",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(priority__gte=PRIORITY_MIN, priority__lte=PRIORITY_MAX),
                name="sqlqueue_priority_range",
            ),
            # One job per idempotency key. Partial, so that a job without a key (most jobs)
            # writes no entry at its INSERT, nor at any UPDATE on PostgreSQL. PostgreSQL also
            # gets a prefix index for the schedules' "jobs of this schedule" link (migration
            # 0012), which Django would otherwise have made over every row.
            PartialUniqueConstraint(
                fields=["idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="sqlqueue_idempotency_key",
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
    def reference(self) -> str:
        """What to keep to find this job again: `Job.objects.referenced(reference)`, the
        admin's search, `manage.py jobs show --id`, the django.tasks result id."""
        return format_reference(self.pk, self.ref_nonce)

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


__all__ = [
    "WAIT_BUCKETS",
    "WAIT_COLUMNS",
    "FlowKey",
    "Job",
    "JobBatch",
    "JobDependency",
    "JobRollup",
    "PartialIndex",
    "PartialUniqueConstraint",
    "QueueSample",
    "QueueState",
    "Schedule",
    "Worker",
]
