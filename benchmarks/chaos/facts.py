"""What every check reads: a Check's shape, and the Facts derived once from a run's Evidence
(jobs by token and id, executions by job, who was killed when, the database fault windows,
the producers' committed and rolled-back units). Shared by the chaos and cluster checks."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .evidence import Evidence, ExecutionRow, JobRow
from .mix import BAD_RESULT, COMPLETED, ERROR, TIMEOUT

#: Outcomes a handler itself produced: each one is an execution the queue recorded (a result
#: refused before the write, BAD_RESULT, comes only from a --misbehave run's handlers).
RECORDED = (COMPLETED, ERROR, TIMEOUT, BAD_RESULT)
#: Outcomes of an attempt taken away from its worker: the handler may or may not have run.
TAKEN_AWAY = ("lost", "released")
#: A recovery may take this much longer than lease + housekeeping interval (scheduling).
RECLAIM_SLACK_SECONDS = 2.0
#: After a database fault ends, producers may still see its errors for this long.
FAULT_TAIL_SECONDS = 10.0
EXAMPLES = 5
#: Harness events that mean a run did not go as planned (a producer or supervisor in trouble).
TROUBLE_EVENTS = ("producer_failed", "producer_stuck", "supervisor_stuck")
#: Producer units that enqueue inside a transaction with a business row (producer.py); the
#: others are single enqueues and bursts (`enqueue_many`), each all or nothing by itself.
TRANSACTION_MODES = ("commit", "rollback")


@dataclass
class Check:
    name: str
    passed: bool
    detail: str
    examples: list[str] = field(default_factory=list)


def reclaim_bound(lease: float) -> float:
    """Longest time a killed worker's job may stay `running`: its lease, the supervisors'
    housekeeping interval (supervisor.py: lease / 4, at least 1 s), and some slack."""
    return lease + max(1.0, lease / 4) + RECLAIM_SLACK_SECONDS


class Facts:
    """What the checks derive from the raw evidence, computed once."""

    def __init__(self, ev: Evidence) -> None:
        self.ev = ev
        self.jobs_by_token: dict[str, list[JobRow]] = defaultdict(list)
        for job in ev.jobs:
            self.jobs_by_token[job.token].append(job)
        self.jobs_by_id = {job.id: job for job in ev.jobs}
        self.executions: dict[int, list[ExecutionRow]] = defaultdict(list)
        for execution in ev.executions:
            self.executions[execution.job_id].append(execution)
        self.executed_tokens = {e.token for e in ev.executions}
        # Killed worker processes, by pid and by worker id: when, and how (worker/supervisor).
        self.killed_pids: dict[int, tuple[float, str]] = {}
        self.killed_ids: dict[str, tuple[float, str]] = {}
        self.fault_windows: list[tuple[float, float]] = []
        for event in ev.events:
            if event["type"] in ("kill_worker", "kill_supervisor"):
                how = event["type"].removeprefix("kill_")
                for pid in event["pids"]:
                    self.killed_pids[pid] = (event["t"], how)
                for worker_id in event["worker_ids"]:
                    self.killed_ids[worker_id] = (event["t"], how)
            elif event["type"] == "db_fault":
                self.fault_windows.append((event["start"], event["end"]))
        self.committed_units: list[dict[str, Any]] = []
        self.rolled_back_units: list[dict[str, Any]] = []
        for unit in ev.units:
            (self.committed_units if self.committed(unit) else self.rolled_back_units).append(unit)
        self.committed_tx = {unit["tx"] for unit in self.committed_units}

    def committed(self, unit: dict[str, Any]) -> bool:
        """Whether a unit committed; for one that failed with an error, the database says."""
        if unit["outcome"] != "error":
            return unit["outcome"] == "committed"
        if unit["mode"] in TRANSACTION_MODES:
            return unit["tx"] in self.ev.orders
        return any(item["token"] in self.jobs_by_token for item in unit["jobs"])

    def committed_items(self) -> Iterable[dict[str, Any]]:
        for unit in self.committed_units:
            yield from unit["jobs"]

    def rolled_back_items(self) -> Iterable[dict[str, Any]]:
        for unit in self.rolled_back_units:
            yield from unit["jobs"]

    def in_fault(self, start: float, end: float | None = None, tail: float = 0.0) -> bool:
        end = start if end is None else end
        return any(s - 1.0 <= end and start <= e + tail for s, e in self.fault_windows)


def examples(items: Iterable[Any]) -> list[str]:
    return [str(item) for item in list(items)[:EXAMPLES]]


def entry_for(job: JobRow, execution: ExecutionRow, outcomes: tuple[str, ...]) -> Any:
    """The history entry of `execution`'s worker and attempt with one of `outcomes`, if any."""
    for entry in job.history:
        same = entry.get("worker") == execution.worker_id
        if same and entry.get("attempt") == execution.attempt and entry.get("outcome") in outcomes:
            return entry
    return None


def unrecorded_executions(f: Facts) -> list[tuple[JobRow, ExecutionRow, dict | None]]:
    """Executions with no recorded outcome for their worker and attempt, with the history
    entry that took the attempt away (lost, released), if any."""
    found = []
    for job in f.ev.jobs:
        for execution in f.executions.get(job.id, []):
            if entry_for(job, execution, RECORDED) is None:
                found.append((job, execution, entry_for(job, execution, TAKEN_AWAY)))
    return found
