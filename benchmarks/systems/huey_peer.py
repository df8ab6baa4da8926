"""Huey with SqliteHuey (SQLite only): no Django, its own database file."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..databases import huey_path
from ..procs import Workers, children
from .base import Job, System, wait_for_markers


class Huey(System):
    name = "huey"
    label = "Huey (SqliteHuey)"
    notes = (
        "at-most-once (a task is deleted from the queue before it runs); its own SQLite file; "
        "`huey_consumer -w N -k process` (N worker processes; N threads, "
        "`-k thread`, in the io scenario); no drain mode, so the clock "
        "stops when the last job has run and the queue is empty; other defaults (polling "
        "0.1 s backing off to 10 s, WAL)"
    )

    def __init__(self, vendor: str, log_path: Path) -> None:
        super().__init__(vendor, log_path)
        os.environ["BENCH_HUEY_FILE"] = str(huey_path())
        from ..jobsapp.huey_app import bench_slow_task, bench_task, huey

        self.huey = huey
        self.tasks = {"bench": bench_task, "bench_slow": bench_slow_task}

    def setup(self) -> None:
        self.huey.storage.queue_size()  # opens the file and creates the tables

    def teardown(self) -> None:
        self.huey.storage.close()

    def enqueue_in_transaction(self, i: int) -> None:
        self.enqueue_one(i)  # every Huey enqueue is its own SQLite transaction

    def enqueue_one(self, i: int, sleep_ms: int = 0, task: str = "bench") -> None:
        self.tasks[task](i, sleep_ms)

    def fill(self, jobs: Sequence[Job], task: str = "bench") -> None:
        for i, sleep_ms in jobs:
            self.enqueue_one(i, sleep_ms, task)

    def worker_commands(self, n: int, burst: bool, concurrency: int = 1) -> list[list[str]]:
        """One consumer: `n` worker processes or, to run several jobs at once per worker,
        `n * concurrency` worker threads (a consumer's workers are all of one kind)."""
        consumer = str(Path(sys.executable).parent / "huey_consumer")
        workers, kind = (n, "process") if concurrency == 1 else (n * concurrency, "thread")
        return [[consumer, "benchmarks.jobsapp.huey_app.huey", "-w", str(workers), "-k", kind]]

    def wait_until_drained(self, workers: Workers, expected: int, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        wait_for_markers(expected, timeout)
        while self.huey.storage.queue_size():
            if time.monotonic() > deadline:
                raise TimeoutError("Huey's queue did not empty")
            time.sleep(0.002)
        return time.monotonic()

    def job_processes(self, workers: Workers) -> list[int]:
        return [pid for consumer in workers.pids for pid in children(consumer)]

    def count_finished(self) -> int | None:
        return None  # Huey keeps no record of finished tasks; the markers are the count

    def count_queued(self) -> int:
        return int(self.huey.storage.queue_size())
