"""How an idle worker waits for work: adaptive polling, short right after work and doubling
while the queue stays idle. Vendors that can be told of new work sooner wake earlier
(PostgreSQL: LISTEN; SQLite: PRAGMA data_version). Every waiter also wakes every
`max_interval` seconds, for jobs whose `run_at` comes due.
"""

from __future__ import annotations

import threading

from ..probes import probe


class Waiter:
    """Adaptive sleep: `min_interval` after work, doubling up to `max_interval` while idle."""

    min_interval = 0.01

    def __init__(self, alias: str, max_interval: float, stop: threading.Event) -> None:
        self.alias = alias
        self.max_interval = max(max_interval, self.min_interval)
        self.stop = stop
        self.interval = self.min_interval

    def worked(self) -> None:
        self.interval = self.min_interval

    def wait(self) -> None:
        probe("worker-idle", waiter="poll", seconds=self.interval)
        stopped = self.stop.wait(self.interval)
        probe("worker-woke", reason="stop" if stopped else "timeout")
        self.interval = min(self.interval * 2, self.max_interval)

    def close(self) -> None:
        return None
