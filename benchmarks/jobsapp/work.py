"""The body of every benchmark job: mark it as run, then sleep if asked (I/O-like work)."""

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
