"""Raw-driver floor: django-sqlqueue's claim/complete SQL through the bare driver.

The jobs are stored through the public API (`enqueue_many`); then N plain processes, each
with one driver connection and no Django, claim and complete them one at a time or in
batches (`commits=each`: a transaction per completion, as a worker's default mode commits
them; otherwise one per batch). Nothing is executed in between: this is the database's price
per job. On SQLite the raw connections get the PRAGMAs django-sqlqueue gave its own
connection (WAL, synchronous, busy timeout), read from that connection at run time.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from django.db import connection, connections

from ..raw_driver import RAW_QUEUES, sqlite_pragmas, work_through
from ..systems import System


def _worker(vendor: str, batch: int, pragmas: dict[str, Any], each: bool) -> None:
    work_through(vendor, batch, pragmas, each=each)


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    n, workers, batch = params["jobs"], params["workers"], params["batch"]
    each = params.get("commits") == "each"
    system.fill([(i, 0) for i in range(n)])
    pragmas = sqlite_pragmas(connection) if system.vendor == "sqlite" else {}
    connections.close_all()
    context = multiprocessing.get_context("fork")
    processes = [
        context.Process(target=_worker, args=(system.vendor, batch, pragmas, each))
        for _ in range(workers)
    ]
    began = time.monotonic()
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    elapsed = time.monotonic() - began
    failed = [p.exitcode for p in processes if p.exitcode]
    queue = RAW_QUEUES[system.vendor](pragmas)
    try:
        completed = queue.count_completed()
    finally:
        queue.close()
    problems = []
    if failed:
        problems.append(f"raw workers exited with {failed}")
    if completed != n:
        problems.append(f"{completed} of {n} completed")
    return {"jobs_per_s": n / elapsed, "seconds": elapsed, "problems": ", ".join(problems)}
