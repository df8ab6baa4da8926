"""History: the drain rate with many finished jobs already in the table, vs an empty one."""

from __future__ import annotations

from typing import Any

from ..systems import System
from .drain import drain


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    if params["history"]:
        system.seed_history(params["history"])  # may raise Unsupported: n/a
    jobs = [(i, 0) for i in range(params["jobs"])]
    system.fill(jobs)
    return drain(system, jobs, params["workers"], params.get("timeout", 900))
