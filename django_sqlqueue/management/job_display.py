"""What `manage.py jobs list` and `jobs show` print: one line per job, or every field of one
job with its attempts and the jobs it waits for and that wait for it."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import GeneratedField, QuerySet
from django.db.models.functions import Left
from django.utils import timezone

from ..models import Job, JobBatch, JobDependency
from ..queries import COUNT_CAP, bounded_count
from ..words import counted

#: Characters of `last_error` the list reads, and shows on its one line.
ERROR_READ = 500
ERROR_SHOWN = 80
#: Jobs listed on each side of a job's dependencies.
DEPENDENCIES_SHOWN = 100

LIST_FIELDS = (
    "id",
    "name",
    "queue",
    "status",
    "priority",
    "attempts",
    "max_attempts",
    "created_at",
    "run_at",
    "finished_at",
)
#: Shown apart, after the other fields: long, or JSON.
LONG_FIELDS = ("args", "kwargs", "result", "trace_context", "last_error", "history")


def dumps(value: Any, **kwargs: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False, **kwargs)


def moment(value: datetime | None, *, zone: bool = False) -> str:
    if value is None:
        return "-"
    return f"{timezone.localtime(value):%Y-%m-%d %H:%M:%S{' %Z' if zone else ''}}"


def first_line(text: str, limit: int) -> str:
    lines = (text or "").strip().splitlines()
    line = lines[0].strip() if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


# jobs list ---------------------------------------------------------------------------------


def list_rows(queryset: QuerySet[Job], limit: int) -> list[dict[str, Any]]:
    """The newest `limit` jobs of `queryset`: the list's fields, the start of the error."""
    rows = (
        queryset.order_by("-id")
        .annotate(error_start=Left("last_error", ERROR_READ))
        .values(*LIST_FIELDS, "error_start")[:limit]
    )
    return [
        {
            **{key: row[key] for key in LIST_FIELDS},
            "last_error": first_line(row["error_start"], ERROR_READ),
        }
        for row in rows
    ]


def listing(queryset: QuerySet[Job], limit: int) -> tuple[list[dict[str, Any]], int, bool]:
    """(rows, count, capped): the count is exact up to COUNT_CAP, and capped past it."""
    rows = list_rows(queryset, limit)
    total = len(rows) if len(rows) < limit else bounded_count(queryset, COUNT_CAP)
    return rows, min(total, COUNT_CAP), total > COUNT_CAP


def list_lines(rows: list[dict[str, Any]], count: int, capped: bool) -> list[str]:
    header = ("ID", "NAME", "QUEUE", "STATUS", "ATTEMPTS", "CREATED", "FINISHED", "LAST ERROR")
    table = [header] + [
        (
            str(row["id"]),
            row["name"],
            row["queue"],
            row["status"],
            f"{row['attempts']}/{row['max_attempts']}",
            moment(row["created_at"]),
            moment(row["finished_at"]),
            first_line(row["last_error"], ERROR_SHOWN),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    widths[-1] = 0  # the error, last: not padded
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table
    ]
    total = f"more than {COUNT_CAP:,} jobs" if capped else counted(count, "job")
    return [*lines, f"{len(rows)} shown of {total}."]


# jobs show ---------------------------------------------------------------------------------


def dependencies(job: Job, alias: str) -> dict[str, Any]:
    """The jobs `job` waits for and those that wait for it, lowest id first, at most
    DEPENDENCIES_SHOWN each (`more`: there are others)."""
    links = JobDependency.objects.using(alias)
    sides = {
        "waits_for": links.filter(job_id=job.pk)
        .order_by("depends_on_id")
        .values_list("depends_on_id", "depends_on__name", "depends_on__status", "run_on_failure"),
        "waited_for_by": links.filter(depends_on_id=job.pk)
        .order_by("job_id")
        .values_list("job_id", "job__name", "job__status", "run_on_failure"),
    }
    found: dict[str, Any] = {}
    for side, rows in sides.items():
        read = list(rows[: DEPENDENCIES_SHOWN + 1])
        found[side] = {
            "jobs": [
                {"id": i, "name": name, "status": status, "runs_if_it_fails": on_failure}
                for i, name, status, on_failure in read[:DEPENDENCIES_SHOWN]
            ],
            "more": len(read) > DEPENDENCIES_SHOWN,
        }
    return found


def job_document(job: Job, alias: str) -> dict[str, Any]:
    """Every stored field of `job` (not the columns the database derives from them), its
    batch, and its dependencies: `jobs show --json`."""
    fields = {
        field.attname: getattr(job, field.attname)
        for field in Job._meta.concrete_fields
        if not isinstance(field, GeneratedField)
    }
    batch = None
    if job.batch_id is not None:
        found = JobBatch.objects.using(alias).filter(pk=job.batch_id).values("id", "label")
        batch = found.first() or {"id": job.batch_id, "label": ""}
    fields["reference"] = job.reference
    return {"job": fields, "batch": batch, **dependencies(job, alias)}


def show_lines(document: dict[str, Any], *, tracebacks: bool) -> list[str]:
    job = document["job"]
    lines = [f"Job {job['id']}: {job['name']}"]
    for key, value in job.items():
        if key in ("id", "name", *LONG_FIELDS):
            continue
        if isinstance(value, datetime):
            text = moment(value, zone=True)
        elif key == "batch_id" and document["batch"]:
            label = document["batch"]["label"]
            text = f"{value} ({label})" if label else str(value)
        elif isinstance(value, dict | list):
            text = dumps(value)
        else:
            text = "-" if value is None or value == "" else str(value)
        lines.append(f"  {key + ':':<21}{text}")
    for key in ("args", "kwargs", "result", "trace_context"):
        lines.append(f"  {key + ':':<21}{dumps(job[key])}")
    if job["last_error"]:
        lines.append("Last error:")
        lines.extend(f"    {line}" for line in job["last_error"].rstrip().splitlines())
    lines.extend(history_lines(job["history"] or [], tracebacks=tracebacks))
    for side, title in (("waits_for", "Waits for"), ("waited_for_by", "Waited for by")):
        found = document[side]
        if not found["jobs"]:
            lines.append(f"{title}: no job.")
            continue
        if side == "waits_for" and any(row["runs_if_it_fails"] for row in found["jobs"]):
            title += " (it runs even if they end dead or cancelled)"
        lines.append(f"{title}:")
        lines.extend(f"  job {row['id']} {row['name']} ({row['status']})" for row in found["jobs"])
        if found["more"]:
            lines.append(f"  … and more (the first {DEPENDENCIES_SHOWN} are shown)")
    return lines


def history_lines(history: list[Any], *, tracebacks: bool) -> list[str]:
    if not history:
        return ["History: no attempt yet."]
    hidden = not tracebacks and any(isinstance(e, dict) and e.get("traceback") for e in history)
    note = "; -v 2 adds the tracebacks" if hidden else ""
    lines = [f"History ({counted(len(history), 'entry', 'entries')}{note}):"]
    for entry in history:
        if not isinstance(entry, dict):
            lines.append(f"  {dumps(entry)}")
            continue
        when = f"{_stamp(entry.get('started_at'))} → {_stamp(entry.get('finished_at'))}"
        line = f"  attempt {entry.get('attempt')} on {entry.get('worker') or '-'}, {when}"
        line += f": {entry.get('outcome') or '?'}"
        error = first_line(str(entry.get("error") or ""), 200)
        lines.append(f"{line} ({error})" if error else line)
        traceback = str(entry.get("traceback") or "").rstrip()
        if tracebacks and traceback:
            lines.extend(f"      {text}" for text in traceback.splitlines())
    return lines


def _stamp(value: Any) -> str:
    """A history entry's ISO 8601 time, as the other times are shown."""
    try:
        return moment(datetime.fromisoformat(str(value)))
    except ValueError:
        return str(value or "-")
