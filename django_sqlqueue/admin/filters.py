"""List filters for the job list, each answered by an index or a small table.

Django's own AllValuesFieldListFilter runs `SELECT DISTINCT` over the whole table to build its
choices; on a million rows that is a full scan per page view. The name filter walks the
(name, -id) index one distinct value at a time instead, and the queue filter takes its
choices from the registry, the settings and the live workers. The batch filter lists only the
batch in use: a batch's page links to the list filtered on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..conf import get_settings
from ..models import Job, JobBatch, Worker
from ..registry import registry
from ..states import CLAIMABLE, Status
from ..validation import INT64_MAX

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

#: Distinct job names listed in the filter; beyond this, search by name.
MAX_NAME_CHOICES = 200


def distinct_names(alias: str, limit: int = MAX_NAME_CHOICES) -> list[str]:
    """Distinct job names, in order, by a loose index scan of the (name, -id) index.

    Each step asks for the smallest name above the previous one: `limit` index probes in one
    statement instead of reading every row.
    """
    connection = connections[alias]
    table = connection.ops.quote_name(Job._meta.db_table)
    sql = (
        "WITH RECURSIVE names (name, depth) AS ("
        f" SELECT MIN(name), 1 FROM {table}"
        " UNION ALL"
        f" SELECT (SELECT MIN(name) FROM {table} WHERE name > names.name), depth + 1"
        " FROM names WHERE names.name IS NOT NULL AND depth < %s"
        ") SELECT name FROM names WHERE name IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        return [row[0] for row in cursor.fetchall()]


def known_queues(alias: str) -> list[str]:
    """Queues named in the registry, the settings and by the workers that report in."""
    conf = get_settings()
    queues = {conf.default_queue}
    for name in registry.names():
        queue = registry.get(name).options.queue
        if queue:
            queues.add(queue)
    for listed in Worker.objects.using(alias).values_list("queues", flat=True):
        queues.update(q.strip() for q in listed.split(",") if q.strip())
    return sorted(queues)


class ValueFilter(admin.SimpleListFilter):
    """A filter on one column's exact value; the selected value is always offered."""

    field_name = ""

    def choices_for(self, request: HttpRequest) -> list[str]:
        raise NotImplementedError

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        # Filters are built more than once per page view (the summary bar rebuilds them):
        # read the choices once per request.
        cache = request.__dict__.setdefault("_sqlqueue_filter_choices", {})
        if self.parameter_name not in cache:
            cache[self.parameter_name] = self.choices_for(request)
        values = set(cache[self.parameter_name])
        if self.value():
            values.add(self.value())
        return [(value, value) for value in sorted(values)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if self.value():
            return queryset.filter(**{self.field_name: self.value()})
        return queryset


class QueueFilter(ValueFilter):
    title = _("queue")
    parameter_name = "queue"
    field_name = "queue"

    def choices_for(self, request: HttpRequest) -> list[str]:
        return known_queues(get_settings().database)


class NameFilter(ValueFilter):
    title = _("job name")
    parameter_name = "name"
    field_name = "name"

    def choices_for(self, request: HttpRequest) -> list[str]:
        return sorted(set(distinct_names(get_settings().database)) | set(registry.names()))


class IdempotencyKeyFilter(admin.SimpleListFilter):
    """Shown only while in use: the job page links to `?idempotency_key=<key>`."""

    title = _("idempotency key")
    parameter_name = "idempotency_key"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        # A filter without choices is dropped by Django, and its parameter with it.
        value = self.value()
        return [(value, value)] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if self.value():
            return queryset.filter(idempotency_key=self.value())
        return queryset


def batch_id_of(value: str | None) -> int | None:
    """The batch id a `?batch=` value names (ASCII digits, within a BigAutoField), or None."""
    if not value or not value.isascii() or not value.isdigit():
        return None
    batch_id = int(value)
    return batch_id if 0 < batch_id <= INT64_MAX else None


def batch_choice(value: str) -> str:
    """`batch #12 (nightly import)`: the batch's id and label (one primary-key read)."""
    batch_id = batch_id_of(value)
    if batch_id is None:
        return value
    labels = JobBatch.objects.using(get_settings().database).filter(pk=batch_id)
    label = labels.values_list("label", flat=True).first()
    if label:
        return gettext("batch #%(id)d (%(label)s)") % {"id": batch_id, "label": label}
    return gettext("batch #%(id)d") % {"id": batch_id}


class BatchFilter(admin.SimpleListFilter):
    """Shown only while in use: a batch's page links to `?batch=<id>` (with a status)."""

    title = _("batch")
    parameter_name = "batch"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        # A filter without choices is dropped by Django, and its parameter with it.
        value = self.value()
        if not value:
            return []
        # Filters are built more than once per page view: read the batch once per request.
        cache = request.__dict__.setdefault("_sqlqueue_filter_choices", {})
        if self.parameter_name not in cache:
            cache[self.parameter_name] = batch_choice(value)
        return [(value, cache[self.parameter_name])]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if not value:
            return queryset
        batch_id = batch_id_of(value)
        return queryset.filter(batch_id=batch_id) if batch_id is not None else queryset.none()


class StuckFilter(admin.SimpleListFilter):
    """Running jobs whose lease has expired: their worker stopped renewing it."""

    title = _("stuck")
    parameter_name = "stuck"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, StrOrPromise]]:
        return [("yes", _("Running past its lease"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if self.value() == "yes":
            return queryset.filter(status=Status.RUNNING, lease_expires_at__lt=timezone.now())
        return queryset


class ScheduleFilter(admin.SimpleListFilter):
    """Waiting jobs by when they may run: later (delayed or backing off) or already due."""

    title = _("scheduled")
    parameter_name = "scheduled"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, StrOrPromise]]:
        return [("future", _("In the future")), ("due", _("Due now, waiting for a worker"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        waiting = queryset.filter(status__in=list(CLAIMABLE))
        if self.value() == "future":
            return waiting.filter(run_at__gt=timezone.now())
        if self.value() == "due":
            return waiting.filter(run_at__lte=timezone.now())
        return queryset
