"""The body of every benchmark job: mark it as run, then sleep if asked (I/O-like work), or
compute (`burn`, CPU-bound work)."""

from __future__ import annotations

import asyncio
import time

from benchmarks.markers import mark


def work(i: int, sleep_ms: int = 0) -> None:
    mark(i)
    if sleep_ms:
        time.sleep(sleep_ms / 1000)


async def awork(i: int, sleep_ms: int = 0) -> None:
    """The same for `async def` handlers: the wait is awaited, not blocked on."""
    mark(i)
    if sleep_ms:
        await asyncio.sleep(sleep_ms / 1000)


def burn(i: int, cpu_ms: int) -> None:
    """Mark the job as run, then compute in pure Python, holding the GIL, until this thread
    has used `cpu_ms` of CPU time. Thread time, not process time: a job among others in
    threads of one process burns its own `cpu_ms` whatever the others use."""
    mark(i)
    until = time.thread_time() + cpu_ms / 1000
    total = 0
    while time.thread_time() < until:
        for k in range(2_000):  # ~0.1 ms between looks at the clock
            total = (total * 31 + k) % 1_000_003
