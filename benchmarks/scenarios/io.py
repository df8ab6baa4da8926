"""I/O-bound: N jobs that each wait `sleep_ms` (0.1 s) on I/O, drained from a full queue.

The drain scenario's measurement (workers started -> every job finished, each job run exactly
once by the markers), but with jobs that wait rather than compute: throughput is bound by
how many jobs a system runs at once, not by its cost per job, so `in_flight` jobs run at
once, each system the way it does that (`layout`):

- django-sqlqueue: `runworkers -n W --concurrency in_flight/W`, W = `ours_workers` (threads in
  W processes); `ours_workers = in_flight` is one job per process, its mode before threads.
- Huey: one consumer with `in_flight` worker threads (`-w N -k thread`).
- Procrastinate: one worker, `--concurrency in_flight`. Its sync tasks run in the event
  loop's default thread pool, so `peak_in_flight` can be lower than asked.
- django-tasks-db runs one task per process: n/a.

`handler=async` runs `async def` jobs that await asyncio.sleep (ours only).

Besides jobs/s and seconds: `peak_in_flight`, the most jobs seen running at once (from the
start markers, a job running `sleep_ms` after its start), and, sampled from /proc every
SAMPLE_S while the workers run, `rss_mb_peak` (all the system's processes together, at its
highest), `rss_mb_per_in_flight` (that over `peak_in_flight`: what a job running at once
costs) and `db_connections_peak` (established TCP connections to the database server's port,
as the client sees them, or, on SQLite, descriptors open on the database file: one per
connection). Past the server's max_connections the surplus waits in its accept queue, then
is let in or refused ("too many clients"), which the workers' log shows.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from .. import markers
from ..databases import bench_dir, mysql_params, pg_params
from ..procs import descendants, open_paths, rss_mb, tcp_sockets_to
from ..systems import System
from .drain import drain

#: How often the worker processes' RSS and connections are read: a few times per job length.
SAMPLE_S = 0.05


def layout(system: str, in_flight: int, ours_workers: int) -> tuple[int, int]:
    """(worker processes, jobs at once in each) for `in_flight` jobs at once."""
    if system.startswith("sqlqueue"):
        return ours_workers, in_flight // ours_workers
    return 1, in_flight


def connection_counter(vendor: str) -> Callable[[list[int]], int]:
    """Counts the database connections that processes hold open."""
    if vendor == "sqlite":
        folder = str(bench_dir().resolve())

        def on_files(pids: list[int]) -> int:
            return sum(
                1
                for pid in pids
                for target in open_paths(pid)
                if target.startswith(folder) and target.endswith(".sqlite3")
            )

        return on_files
    port = pg_params()["port"] if vendor == "postgres" else mysql_params()["port"]

    def on_sockets(pids: list[int]) -> int:
        sockets = tcp_sockets_to(port)
        return sum(1 for pid in pids for target in open_paths(pid) if target in sockets)

    return on_sockets


def total_rss_mb(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):  # exited meanwhile
            total += rss_mb(pid)
    return total


class Peaks(threading.Thread):
    """While in its `with` block, samples every process this one started: the highest total
    RSS and the most database connections open at once."""

    def __init__(self, count_connections: Callable[[list[int]], int]) -> None:
        super().__init__(name="io-peaks", daemon=True)
        self.count_connections = count_connections
        self.rss_mb = 0.0
        self.connections = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_S):
            pids = descendants()
            self.rss_mb = max(self.rss_mb, total_rss_mb(pids))
            self.connections = max(self.connections, self.count_connections(pids))

    def __enter__(self) -> Peaks:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.done.set()
        self.join()


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    in_flight, job_s = params["in_flight"], params["sleep_ms"] / 1000
    workers, each = layout(system.name, in_flight, params.get("ours_workers", 1))
    system.worker_commands(workers, True, each)  # raises Unsupported before filling the queue
    jobs = [(i, params["sleep_ms"]) for i in range(params["jobs"])]
    system.fill(jobs, "bench_async" if params.get("handler") == "async" else "bench")
    with Peaks(connection_counter(system.vendor)) as peaks:
        result = drain(system, jobs, workers, params.get("timeout", 900), each, job_s)
    at_once = markers.most_within(sorted(t for _, t in markers.read()), job_s)
    return {
        **result,
        "peak_in_flight": at_once,
        "rss_mb_peak": peaks.rss_mb,
        "rss_mb_per_in_flight": peaks.rss_mb / at_once if at_once else float("nan"),
        "db_connections_peak": peaks.connections,
        "workers": workers,
        "jobs_at_once_per_worker": each,
    }
