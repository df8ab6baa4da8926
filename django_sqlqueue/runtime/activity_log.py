"""A worker's periodic INFO summary: what it did lately, in one line instead of one per job.

A log line per job is a large share of a short job's cost (docs/benchmarks.md), so successes
are logged one by one only at DEBUG (`runworkers -v 2`); this summary keeps the default log
telling an operator that each worker is working.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

#: Seconds between two summaries of one worker (none while it did nothing).
SUMMARY_INTERVAL = 30.0


class ActivitySummary:
    def __init__(
        self,
        worker_id: str,
        logger: logging.Logger,
        interval: float = SUMMARY_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.worker_id = worker_id
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self.completed = 0
        self.failed = 0
        self.since = clock()
        # Slot threads (runworkers --concurrency) count into one summary.
        self.lock = threading.Lock()

    def record(self, completed: int = 0, failed: int = 0) -> None:
        with self.lock:
            self.completed += completed
            self.failed += failed
            now = self.clock()
            if now - self.since >= self.interval:
                self.report(now)

    def report(self, now: float | None = None) -> None:
        """Log the counts since the last summary, if there is anything to say."""
        now = self.clock() if now is None else now
        if self.completed or self.failed:
            self.logger.info(
                "Worker %s: completed %d, failed %d in %.1f s",
                self.worker_id,
                self.completed,
                self.failed,
                now - self.since,
            )
        self.completed = self.failed = 0
        self.since = now
