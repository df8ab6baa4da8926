"""Start-up: from exec of the worker command to the first job running.

One job is queued, then the system's worker command is started, as a deploy or a restart
starts it; the clock starts just before the command is exec'd and stops when the job's code
starts (its execution marker). The command is then stopped and started again for the next
sample, `starts` times per measurement, each time with a fresh process and one new job.
Whatever a system does before it runs work counts: interpreter and Django start-up, imports,
connecting, registering, a start-up delay if it has one by default.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from django.db import connections

from .. import markers
from ..systems import System
from ..systems.base import wait_for_markers


def first_start(marks: Iterable[tuple[int, float]], since: float) -> float:
    """Seconds from `since` (a time.time()) to the earliest marker; NaN without any."""
    starts = [started for _, started in marks]
    return min(starts) - since if starts else float("nan")


def summarise(samples: list[float]) -> dict[str, float]:
    """Median and range of the samples that have a value (a start that ran nothing has not)."""
    measured = [s for s in samples if s == s]  # NaN is not equal to itself
    if not measured:
        nan = float("nan")
        return {"startup_s": nan, "startup_min_s": nan, "startup_max_s": nan}
    return {
        "startup_s": statistics.median(measured),
        "startup_min_s": min(measured),
        "startup_max_s": max(measured),
    }


def one_start(system: System, job_id: int, workers: int, timeout: float) -> tuple[float, str]:
    """Queue one job, start the workers, wait for the job to start; (seconds, problems)."""
    markers.clear()
    system.fill([(job_id, 0)])
    connections.close_all()  # hold no connection, lock or snapshot while workers start
    running = system.start_workers(workers, burst=False)
    try:
        wait_for_markers(1, timeout)
    finally:
        running.stop()
    seconds = first_start(markers.read(), running.started_wall)
    return seconds, markers.verify_exactly_once([job_id])


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    samples, problems = [], []
    for job_id in range(params["starts"]):
        seconds, problem = one_start(system, job_id, params["workers"], params.get("timeout", 60))
        samples.append(seconds)
        if problem:
            problems.append(f"start {job_id + 1}: {problem}")
    return {**summarise(samples), "samples": samples, "problems": "; ".join(problems)}
