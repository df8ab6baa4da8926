"""The body of every benchmark job: mark it as run, then sleep if asked (I/O-like work)."""

from __future__ import annotations

import time

from benchmarks.markers import mark


def work(i: int, sleep_ms: int = 0) -> None:
    mark(i)
    if sleep_ms:
        time.sleep(sleep_ms / 1000)
