"""Unlimited jobs beside a limited backlog: does a backlog held back by flow control stand in
front of the jobs behind it? (django-sqlqueue only.)

A backlog of `backlog_jobs` limited jobs is enqueued first — `backlog=rate`: no-op jobs
limited to 5 starts a second (`bench_rated_slow`); `backlog=concurrency`: jobs sleeping
0.2 s, all of one key limited to 2 at a time (`bench_limited`); `backlog=none`: nothing, the
baseline. Then `workers` workers start, and a plain job is enqueued every `interval_ms`;
each one's wait is measured from just before its enqueue to the start of its code. The
promise (docs/flow-control.md): the waits beside a backlog stay those of an empty queue, plus
a poll interval at most.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from django.db import connections

from .. import markers
from ..systems import System, Unsupported
from .latency import enqueue_steadily, percentile

#: Marker ids of the backlog start here (the plain jobs are 0..jobs).
BACKLOG = 1_000_000


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    if system.name != "sqlqueue":
        raise Unsupported(f"{system.label} has no concurrency or rate limits")
    from ..jobsapp.jobs import bench_job, bench_limited_job, bench_rated_slow_job

    n, interval = params["jobs"], params["interval_ms"] / 1000
    size = params["backlog_jobs"]
    markers.clear()
    if params["backlog"] == "rate":
        bench_rated_slow_job.enqueue_many([{"i": BACKLOG + k} for k in range(size)])
    elif params["backlog"] == "concurrency":
        bench_limited_job.enqueue_many(
            [{"i": BACKLOG + k, "key": 0, "sleep_ms": 200} for k in range(size)]
        )
    connections.close_all()
    workers = system.start_workers(params["workers"], burst=False)
    sent: dict[int, float] = {}
    try:
        # A probe job proves the workers are up (beside the backlog, it is a measure too).
        sent[n] = time.time()
        bench_job.enqueue(i=n)
        _wait_for({n}, timeout=120)
        sent.update(enqueue_steadily(n, interval, lambda i: bench_job.enqueue(i=i)))
        _wait_for(set(range(n)), timeout=120)
    finally:
        workers.stop()
    started = {i: t for i, t in markers.read() if i < BACKLOG}
    delays = [(started[i] - sent[i]) * 1000 for i in range(n) if i in started]
    return {
        "p50_ms": statistics.median(delays) if delays else float("nan"),
        "p95_ms": percentile(delays, 0.95) if delays else float("nan"),
        "max_ms": max(delays, default=float("nan")),
        "not_started": n - len(delays),
        "probe_ms": (started[n] - sent[n]) * 1000 if n in started else float("nan"),
    }


def _wait_for(ids: set[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = {i for i, _ in markers.read() if i in ids}
        if seen == ids:
            return
        time.sleep(0.05)
