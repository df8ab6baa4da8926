"""Footprint: RSS of each job-running process after some work; CPU of N idle workers.

CPU counts every process the system started (supervisors and consumers included), as a
percentage of one core over the idle window.
"""

from __future__ import annotations

import time
from typing import Any

from django.db import connections

from .. import markers
from ..procs import cpu_seconds, rss_mb, tree
from ..systems import System
from ..systems.base import wait_for_markers


def tree_cpu(roots: list[int]) -> dict[int, float]:
    usage = {}
    for root in roots:
        for pid in tree(root):
            try:
                usage[pid] = cpu_seconds(pid)
            except OSError:
                continue  # exited meanwhile
    return usage


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    n, warm_jobs = params["workers"], params["warm_jobs"]
    system.fill([(i, 0) for i in range(warm_jobs)])
    markers.clear()
    connections.close_all()
    workers = system.start_workers(n, burst=False)
    try:
        wait_for_markers(warm_jobs, timeout=120)
        time.sleep(params["settle_s"])
        job_pids = system.job_processes(workers)
        rss = [rss_mb(pid) for pid in job_pids]
        before = tree_cpu(workers.pids)
        began = time.monotonic()
        time.sleep(params["window_s"])
        after = tree_cpu(workers.pids)
        window = time.monotonic() - began
    finally:
        workers.stop()
    used = sum(after[pid] - before[pid] for pid in after if pid in before)
    total_pct = 100 * used / window
    return {
        "rss_mb_per_worker": sum(rss) / len(rss) if rss else float("nan"),
        "rss_mb_max": max(rss, default=float("nan")),
        "idle_cpu_pct_total": total_pct,
        "idle_cpu_pct_per_worker": total_pct / n,
        "processes": len(after),
        "problems": "" if len(job_pids) >= n else f"{len(job_pids)} job processes, not {n}",
    }
