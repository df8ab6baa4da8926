"""Enqueue: N single enqueues, each in its own transaction as a view does; or one bulk call."""

from __future__ import annotations

import time
from typing import Any

from ..systems import System


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    n = params["jobs"]
    if params["mode"] == "single":
        began = time.perf_counter()
        for i in range(n):
            system.enqueue_in_transaction(i)
        elapsed = time.perf_counter() - began
    else:
        jobs = [(i, 0) for i in range(n)]
        began = time.perf_counter()
        system.enqueue_bulk(jobs)  # may raise Unsupported: reported as n/a
        elapsed = time.perf_counter() - began
    queued = system.count_queued()
    return {
        "jobs_per_s": n / elapsed,
        "seconds": elapsed,
        "problems": "" if queued == n else f"{queued} of {n} jobs stored",
    }
