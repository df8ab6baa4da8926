"""How long a `sum(range(n))` must be to hold the GIL for a set time on this machine.

One such call is C code that never releases the GIL, so no other thread of its process runs
until it returns. A fixed `n` held it 8 s on one day and 45 s on another (2026-12-04), so the
misbehaving jobs of the chaos harness and of the test suite size theirs from short samples.
"""

from __future__ import annotations

import time

#: Items in each timing sample: a few milliseconds of work.
SAMPLE = 10**6


def items_for(seconds: float) -> int:
    """The `n` for which `sum(range(n))` takes about `seconds`, sized from the fastest of
    three samples: the hold lasts at least that long, and longer only when the machine slows."""
    fastest = min(_timed_sum(SAMPLE) for _ in range(3))
    return int(SAMPLE * seconds / max(fastest, 1e-9))


def _timed_sum(n: int) -> float:
    began = time.perf_counter()
    sum(range(n))
    return time.perf_counter() - began
