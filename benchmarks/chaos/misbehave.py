"""The misbehaving handlers of `--misbehave` runs, and what each must end as.

A misbehaving producer enqueues them in turn among the normal job mix (producer.py): a
transaction left open (an atomic block never left; autocommit turned off), a fork whose child
returns, `os._exit(0)`, a non-daemon thread left running, a result over MAX_RESULT_BYTES, the
GIL held longer than the lease, and a plain exception. Each may cost its own attempt, never a
worker, a slot, or a second run of another job (docs/reliability.md).

Pure data and functions, like mix.py: producers, handlers and checks share them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from .mix import BAD_RESULT, COMPLETED, ERROR, Kind

DEAD, LOST, RELEASED = "dead", "lost", "released"

MISBEHAVING = {
    kind.name: kind
    for kind in (
        Kind("leak_atomic", "chaos.leak", 0, 2),
        Kind("leak_autocommit", "chaos.leak", 0, 2),
        Kind("fork", "chaos.fork", 0, 2),
        Kind("exit0", "chaos.exit0", 0, 2),
        Kind("linger", "chaos.linger", 0, 2),
        Kind("big_result", "chaos.big_result", 0, 3),
        Kind("gil", "chaos.gil", 0, 2),
        Kind("raise", "chaos.raise", 0, 2),
    )
}

#: A lingering thread sleeps this long: past the end of a short run, so that supervisor B's
#: recycled workers (--max-jobs) and the final SIGTERM meet workers that still have one.
LINGER_SECONDS = 120.0
#: A GIL-bound handler computes for this many leases (its speed is estimated on a short probe
#: first, which a busy machine can skew by a third either way).
GIL_LEASES = 2.0
#: Supervisor B recycles its workers after this many jobs in a misbehave run, so that workers
#: with a lingering thread must exit and be replaced several times.
B_MAX_JOBS = 40
#: Longest a supervisor may run with fewer live workers than asked for: a replacement starts
#: within a second or two, slower on a busy machine; a lost slot stays empty.
SLOT_GAP_SECONDS = 10.0


@dataclass(frozen=True)
class Expected:
    """How a misbehaving job must end: its status, the outcome of every attempt, and a text
    each attempt's error must contain (empty: none)."""

    status: str
    outcome: str
    attempts: int
    error: str = ""
    exception: str = ""


def expected_end(kind: str) -> Expected:
    """The documented end of each misbehaving kind (docs/reliability.md, docs/workers.md)."""
    spent = MISBEHAVING[kind].max_attempts
    if kind.startswith("leak_"):
        how = "never exited" if kind == "leak_atomic" else "autocommit turned off"
        return Expected(DEAD, ERROR, spent, how, "TransactionLeftOpen")
    if kind == "exit0":
        return Expected(DEAD, LOST, spent, "exited with status 0 while running job")
    if kind == "big_result":
        return Expected(DEAD, BAD_RESULT, 1, "the limit is MAX_RESULT_BYTES", "TypeError")
    if kind == "raise":
        return Expected(DEAD, ERROR, spent, "misbehaving on purpose", "LookupError")
    return Expected(COMPLETED, COMPLETED, 1)  # fork, linger, gil


def params_for(kind: str, lease: float, max_result_bytes: int) -> dict[str, Any]:
    if kind.startswith("leak_"):
        return {"how": kind.removeprefix("leak_")}
    if kind == "linger":
        return {"seconds": LINGER_SECONDS}
    if kind == "big_result":
        return {"size": max_result_bytes + 1000}
    if kind == "gil":
        return {"seconds": round(lease * GIL_LEASES, 2)}
    return {}


class Rotation:
    """Every misbehaving kind once per round, in a random order: a short run sees them all."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pending: list[str] = []

    def next(self) -> str:
        if not self.pending:
            self.pending = list(MISBEHAVING)
            self.rng.shuffle(self.pending)
        return self.pending.pop()
