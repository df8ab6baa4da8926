"""The price of `BEGIN IMMEDIATE` on SQLite: read-only `atomic()` blocks beside busy workers.

django-sqlqueue makes every `atomic()` block on the queue's SQLite database begin IMMEDIATE
(docs/databases.md), so that a block that reads and then writes waits for the write lock
instead of failing with `database is locked`. The price falls on blocks that only read: they
take the write lock too, one at a time, and the workers wait for them. This measures it.

`readers` processes run read-only blocks for `seconds` (each reads 20 rows, then waits
`hold_ms` inside the block, as a page rendering under ATOMIC_REQUESTS would), beside
`workers` workers draining no-op jobs. `mode=immediate` is the app's default;
`mode=deferred` is Django's (`SQLITE_TRANSACTION_MODE = None`), where such blocks take no
lock. Metrics: read blocks per second (all readers), their p99 and worst latency, and the
workers' jobs per second meanwhile. (django-sqlqueue on SQLite only.)
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from django.db import connection, connections, transaction

from ..systems import System, Unsupported
from .latency import percentile

#: Jobs waiting when the readers start: more than the workers can run meanwhile.
BACKLOG = 60_000


def _read(mode: str, seconds: float, hold: float, results: Any) -> None:
    from django_sqlqueue.models import Job as JobRow

    connection.ensure_connection()
    if mode == "deferred":
        connection.transaction_mode = None  # type: ignore[attr-defined]  # SQLite's, Django 5.1+
    latencies: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        began = time.perf_counter()
        with transaction.atomic():
            list(JobRow.objects.order_by("-id").values_list("id", "status")[:20])
            time.sleep(hold)
        latencies.append((time.perf_counter() - began) * 1000)
    connection.close()
    results.put(latencies)


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    if system.name != "sqlqueue" or system.vendor != "sqlite":
        raise Unsupported("the transaction mode is django-sqlqueue's SQLite tuning")
    readers, seconds = params["readers"], params["seconds"]
    system.fill([(i, 0) for i in range(BACKLOG)])
    connections.close_all()
    workers = system.start_workers(params["workers"], burst=False)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    try:
        time.sleep(1.0)  # the workers are up and draining
        done_before = system.count_finished() or 0
        connections.close_all()
        began = time.monotonic()
        processes = [
            context.Process(
                target=_read, args=(params["mode"], seconds, params["hold_ms"] / 1000, results)
            )
            for _ in range(readers)
        ]
        for process in processes:
            process.start()
        latencies = [value for _ in processes for value in results.get(timeout=seconds + 120)]
        for process in processes:
            process.join()
        elapsed = time.monotonic() - began
        done_after = system.count_finished() or 0
    finally:
        workers.stop()
    failed = [p.exitcode for p in processes if p.exitcode]
    return {
        "reads_per_s": len(latencies) / elapsed,
        "read_p99_ms": percentile(latencies, 0.99),
        "read_max_ms": max(latencies),
        "worker_jobs_per_s": (done_after - done_before) / elapsed,
        "problems": f"readers exited with {failed}" if failed else "",
    }
