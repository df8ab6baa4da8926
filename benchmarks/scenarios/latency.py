"""Latency: one idle worker; jobs enqueued at a steady interval; enqueue -> start times.

The clock starts just before the enqueue call (as a view would call it) and stops when the
job's code starts, read from its execution marker.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from django.db import connections

from .. import markers
from ..systems import System
from ..systems.base import wait_for_markers


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def enqueue_steadily(n: int, interval: float, enqueue: Callable[[int], object]) -> dict[int, float]:
    """Enqueue jobs 0..n-1, one every `interval` seconds; when each was sent (epoch)."""
    sent: dict[int, float] = {}
    first = time.monotonic()
    for i in range(n):
        pause = first + i * interval - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        sent[i] = time.time()
        enqueue(i)
    return sent


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    n, interval = params["jobs"], params["interval_ms"] / 1000
    markers.clear()
    connections.close_all()
    workers = system.start_workers(1, burst=False)
    try:
        # A probe job proves the worker is up; then it idles before the measured jobs.
        system.enqueue_in_transaction(n)
        wait_for_markers(1, timeout=60)
        time.sleep(params["idle_s"])
        sent = enqueue_steadily(n, interval, system.enqueue_in_transaction)
        wait_for_markers(n + 1, timeout=60)
    finally:
        workers.stop()
    started = dict(markers.read())
    delays = [(started[i] - sent[i]) * 1000 for i in range(n) if i in started]
    return {
        "p50_ms": statistics.median(delays),
        "p95_ms": percentile(delays, 0.95),
        "max_ms": max(delays),
        "problems": markers.verify_exactly_once(range(n + 1)),
    }
