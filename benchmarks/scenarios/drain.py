"""Drain: N ready no-op jobs, N workers; time from starting the workers until all finished.

Each job must have run exactly once (execution markers) and, where the system records
outcomes, be recorded as succeeded. Besides the headline rate (start-up included), the
markers give `startup_s` (command start to first job) and `steady_jobs_per_s` (first job
start to last job start): what the loop sustains once running.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

from .. import markers
from ..systems import System
from ..systems.base import Job


def drain(
    system: System,
    jobs: list[Job],
    workers: int,
    timeout: float,
    concurrency: int = 1,
    job_s: float = 0.0,
) -> dict[str, Any]:
    """Start `workers` in drain mode over jobs already queued; measure and verify.

    Each worker runs `concurrency` jobs at once. `job_s` is how long a job runs after its
    start marker: a system that records no finish (Huey) is seen drained once its last job
    has started, and its clock would otherwise stop up to `job_s` early.
    """
    before = system.count_finished()  # seeded history, if any
    markers.clear()
    connections.close_all()  # hold no connection, lock or snapshot while workers run
    running = system.start_workers(workers, burst=True, concurrency=concurrency)
    try:
        finished_at = system.wait_until_drained(running, len(jobs), timeout)
    finally:
        running.stop()
    elapsed = finished_at - running.started
    starts = sorted(t for _, t in markers.read())
    if job_s and before is None and starts:
        elapsed = max(elapsed, starts[-1] + job_s - running.started_wall)
    problems = markers.verify_exactly_once([i for i, _ in jobs])
    recorded = system.count_finished()
    if recorded is not None and before is not None and recorded - before != len(jobs):
        finished = recorded - before
        problems = ", ".join(filter(None, [problems, f"{finished} recorded as finished"]))
    steady = (len(starts) - 1) / (starts[-1] - starts[0]) if len(starts) > 1 else float("nan")
    return {
        "jobs_per_s": len(jobs) / elapsed,
        "seconds": elapsed,
        "startup_s": starts[0] - running.started_wall if starts else float("nan"),
        "steady_jobs_per_s": steady if starts[-1:] != starts[:1] else float("nan"),
        "problems": problems,
    }


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    jobs = [(i, 0) for i in range(params["jobs"])]
    system.fill(jobs)
    return drain(system, jobs, params["workers"], params.get("timeout", 900))
