"""Everything a run left behind, as plain data: the job table, the side tables, what the
producers logged and what the harness did. The checks read only this."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: Log lines worth counting in the supervisors' logs (informational).
LOG_PATTERNS = {
    "database is locked": re.compile(r"database is locked", re.I),
    "deadlock": re.compile(r"deadlock", re.I),
    "lease lost, result discarded": re.compile(r"lease was lost; its result was discarded"),
    "lease lost, failure not recorded": re.compile(r"lease was lost; the failure was not"),
    "workers killed by SIGKILL": re.compile(r"was killed by SIGKILL"),
    "database errors retried": re.compile(r"database error \("),
}


@dataclass
class JobRow:
    id: int
    name: str
    status: str
    attempts: int
    max_attempts: int
    kwargs: dict[str, Any]
    history: list[dict[str, Any]]
    key: str | None = None
    #: Who holds (or last held) the job; ABANDONED_OWNER for a job cancelled because a job
    #: it waited for failed (docs/workflows.md).
    lease_owner: str = ""
    #: When it reached its terminal state (time.time() scale), if it did.
    finished_at: float | None = None
    #: The batch it is a member of (`with batch(...)`), if any.
    batch_id: int | None = None

    @property
    def token(self) -> str:
        return str(self.kwargs.get("token", ""))

    @property
    def kind(self) -> str:
        return str(self.kwargs.get("kind", ""))


@dataclass
class ExecutionRow:
    job_id: int
    token: str
    kind: str
    attempt: int
    pid: int
    worker_id: str
    started: float
    finished: float | None


@dataclass
class Evidence:
    vendor: str
    seconds: float
    lease: float
    jobs: list[JobRow] = field(default_factory=list)
    executions: list[ExecutionRow] = field(default_factory=list)
    orders: set[str] = field(default_factory=set)
    #: One record per producer unit of work (see producer.py).
    units: list[dict[str, Any]] = field(default_factory=list)
    #: What the harness did, in order: kills, restarts, database faults (see harness.py).
    events: list[dict[str, Any]] = field(default_factory=list)
    log_counts: dict[str, int] = field(default_factory=dict)
    drained: bool = True
    drain_seconds: float = 0.0
    #: The atomic jobs' counter row at the end (None: the run had no such row).
    counter: int | None = None
    #: Jobs each worker process ran at once (`runworkers --concurrency`; 1 in older runs).
    concurrency: int = 1
    #: The workflows' edges, one [job id, id of the job it waits for, run_on_failure] each
    #: (the JobDependency table).
    dependencies: list[list[Any]] = field(default_factory=list)
    #: When the job table was read (0: a run from before it was noted).
    collected: float = 0.0
    #: The batches (the JobBatch table), one dict each: id, closed_at and finished_at
    #: (time.time() scale, None if not yet), callback_job_id, and callback_result: what its
    #: callback's handler returned (what `context.batch` said of the batch), if it completed.
    batches: list[dict[str, Any]] = field(default_factory=list)


def timestamp(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso).timestamp() if iso else None


def load_database() -> tuple[list[JobRow], list[ExecutionRow], set[str], int | None]:
    """The job table, every execution (the Execution table's and the atomic jobs' ledger),
    the committed business rows, and the atomic jobs' counter."""
    from django_sqlqueue.models import Job

    from . import ledger
    from .app.models import ATOMIC_COUNTER, Counter, Execution, Order

    jobs = [
        JobRow(
            id=job.id,
            name=job.name,
            status=job.status,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            kwargs=job.kwargs,
            history=list(job.history or []),
            key=job.idempotency_key,
            lease_owner=job.lease_owner,
            finished_at=job.finished_at.timestamp() if job.finished_at else None,
            batch_id=job.batch_id,
        )
        for job in Job.objects.order_by("id").iterator()
    ]
    executions = [
        ExecutionRow(
            e.job_id, e.token, e.kind, e.attempt, e.worker_pid, e.worker_id, e.started, e.finished
        )
        for e in Execution.objects.order_by("id").iterator()
    ]
    executions += [
        ExecutionRow(
            e["job_id"],
            e["token"],
            e["kind"],
            e["attempt"],
            e["pid"],
            e["worker_id"],
            e["started"],
            e["finished"],
        )
        for e in ledger.read()
    ]
    orders = set(Order.objects.values_list("tx", flat=True))
    counter = Counter.objects.filter(name=ATOMIC_COUNTER).values_list("value", flat=True).first()
    return jobs, executions, orders, counter


def load_dependencies() -> list[list[Any]]:
    """Every edge of the JobDependency table: [job id, depends_on id, run_on_failure]."""
    from django_sqlqueue.models import JobDependency

    rows = JobDependency.objects.order_by("id").values_list(
        "job_id", "depends_on_id", "run_on_failure"
    )
    return [[job_id, depends_on, bool(run)] for job_id, depends_on, run in rows.iterator()]


def load_batches() -> list[dict[str, Any]]:
    """Every row of the JobBatch table, with what its callback's handler returned."""
    from django_sqlqueue.models import Job, JobBatch

    def seconds(moment: datetime | None) -> float | None:
        return moment.timestamp() if moment else None

    callbacks = Job.objects.filter(
        id__in=JobBatch.objects.filter(callback_job__isnull=False).values("callback_job_id")
    )
    results = dict(callbacks.values_list("id", "result"))
    rows = JobBatch.objects.order_by("id").values_list(
        "id", "closed_at", "finished_at", "callback_job_id"
    )
    return [
        {
            "id": batch_id,
            "closed_at": seconds(closed),
            "finished_at": seconds(finished),
            "callback_job_id": callback,
            "callback_result": results.get(callback),
        }
        for batch_id, closed, finished, callback in rows.iterator()
    ]


def save_evidence(ev: Evidence, path: Path) -> None:
    data = asdict(ev)
    data["orders"] = sorted(ev.orders)
    path.write_text(json.dumps(data))


def read_evidence(path: Path) -> Evidence:
    """The evidence a run saved, to check it again (`--recheck`) or to test the checks."""
    data = json.loads(path.read_text())
    data["jobs"] = [JobRow(**row) for row in data["jobs"]]
    data["executions"] = [ExecutionRow(**row) for row in data["executions"]]
    data["orders"] = set(data["orders"])
    return Evidence(**data)


def load_units(paths: list[Path]) -> list[dict[str, Any]]:
    units = []
    for path in paths:
        if path.exists():
            with path.open() as lines:
                units.extend(json.loads(line) for line in lines if line.strip())
    return units


#: Lines between the parts of one chained traceback.
CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)


def count_log_patterns(paths: list[Path]) -> dict[str, int]:
    """Counts of LOG_PATTERNS, and of tracebacks other than those of failed jobs (which the
    worker logs on purpose, after a line ending in "traceback:", each part of a chained
    exception after a line of CHAINED)."""
    counts = dict.fromkeys([*LOG_PATTERNS, "unexpected tracebacks"], 0)
    for path in paths:
        text = path.read_text(errors="replace") if path.exists() else ""
        for name, pattern in LOG_PATTERNS.items():
            counts[name] += len(pattern.findall(text))
        previous = ""
        for line in text.splitlines():
            if line.startswith("Traceback (most recent call last)"):
                expected = previous.endswith("traceback:") or previous in CHAINED
                counts["unexpected tracebacks"] += not expected
            if line.strip():
                previous = line.rstrip()
    return counts
