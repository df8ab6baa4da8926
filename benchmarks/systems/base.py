"""What the harness needs from a queue: the same small interface for ours and each peer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from django.core.management import call_command
from django.db import connection, transaction

from .. import markers
from ..procs import Workers

#: A benchmark job: its id and how long it sleeps (0 for a no-op).
Job = tuple[int, int]
#: The benchmark's tasks, defined for every system (benchmarks/jobsapp): `bench`, and
#: `bench_slow` for the slow jobs of the mixed scenario.
TASKS = ("bench", "bench_slow")


class Unsupported(Exception):
    """The system has no equivalent of this operation (reported as n/a, not as zero)."""


class System:
    #: Short name used on the command line and in the JSON.
    name = ""
    #: Name shown in the table.
    label = ""
    #: What a guarantee-minded reader needs to know, and the defaults it runs with.
    notes = ""
    #: Django apps to migrate on a fresh database.
    migrate_apps: tuple[str, ...] = ()

    def __init__(self, vendor: str, log_path: Path) -> None:
        self.vendor = vendor
        self.log_path = log_path

    # Lifecycle ---------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the system's tables in the fresh database."""
        for app in self.migrate_apps:
            call_command("migrate", app, verbosity=0)

    def teardown(self) -> None:
        connection.close()

    # Producing ---------------------------------------------------------------------------

    def enqueue_one(self, i: int, sleep_ms: int = 0, task: str = "bench") -> None:
        raise NotImplementedError

    def enqueue_in_transaction(self, i: int) -> None:
        """One enqueue in its own transaction, as a view (or a request) does it."""
        with transaction.atomic():
            self.enqueue_one(i)

    def enqueue_bulk(self, jobs: Sequence[Job], task: str = "bench") -> None:
        """Enqueue many (id, sleep_ms) jobs with the system's own bulk call."""
        raise Unsupported(f"{self.label} has no bulk enqueue")

    def fill(self, jobs: Sequence[Job], task: str = "bench") -> None:
        """Get these jobs of `task` ready to run, the fastest way the system offers, to be
        taken after any already queued (untimed preparation, in most scenarios)."""
        try:
            self.enqueue_bulk(jobs, task)
        except Unsupported:
            with transaction.atomic():
                for i, sleep_ms in jobs:
                    self.enqueue_one(i, sleep_ms, task)

    def seed_history(self, count: int) -> None:
        """Insert `count` finished jobs with SQL, as months of history would leave them."""
        raise Unsupported(f"{self.label} keeps no history of finished jobs")

    # Consuming ---------------------------------------------------------------------------

    def worker_commands(self, n: int, burst: bool, concurrency: int = 1) -> list[list[str]]:
        """The commands that start `n` workers, each running `concurrency` jobs at once (1:
        the system's default of one job per worker process; more raises Unsupported where
        the system cannot run several jobs in one process)."""
        raise NotImplementedError

    def start_workers(self, n: int, burst: bool, concurrency: int = 1) -> Workers:
        return Workers.start(self.worker_commands(n, burst, concurrency), self.log_path)

    def wait_until_drained(self, workers: Workers, expected: int, timeout: float) -> float:
        """Block until `expected` jobs are finished; the monotonic time they were."""
        return workers.wait_all(timeout)

    def job_processes(self, workers: Workers) -> list[int]:
        """The processes that run jobs (for RSS per worker)."""
        return workers.pids

    def count_finished(self) -> int | None:
        """Jobs the system recorded as finished successfully (None: it keeps no record)."""
        raise NotImplementedError

    def count_queued(self) -> int:
        """Jobs waiting to run."""
        raise NotImplementedError


def wait_for_markers(expected: int, timeout: float, poll: float = 0.002) -> float:
    """For systems without a burst mode: wait until `expected` jobs have started."""
    deadline = time.monotonic() + timeout
    while markers.count() < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {markers.count()} of {expected} jobs ran in {timeout:g} s")
        time.sleep(poll)
    return time.monotonic()
