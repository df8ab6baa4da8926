"""Realistic mix: jobs that sleep 10-50 ms (I/O-like), drained by N workers.

`efficiency` is the ideal time (total sleep / N) over the measured time: 1.0 means the
queue added nothing to the jobs' own time.
"""

from __future__ import annotations

from typing import Any

from ..systems import System
from .drain import drain


def sleep_ms(i: int) -> int:
    """10..50 ms, spread evenly and the same for every system."""
    return 10 + (i * 7919) % 41


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    jobs = [(i, sleep_ms(i)) for i in range(params["jobs"])]
    system.fill(jobs)
    result = drain(system, jobs, params["workers"], params.get("timeout", 900))
    ideal = sum(ms for _, ms in jobs) / 1000 / params["workers"]
    result["efficiency"] = ideal / result["seconds"]
    return result
