"""Retry delays: exponential backoff with jitter, as a pure function."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """`base * 2 ** (attempt - 1)` seconds, capped at `cap`, then shrunk by up to `jitter`.

    With `jitter=0.5` the delay is drawn uniformly from [50%, 100%] of the exponential value,
    so retries of jobs that failed together spread out instead of stampeding.
    """

    base: float = 2.0
    cap: float = 3600.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.base < 0 or self.cap < 0:
            raise ValueError("Backoff base and cap must not be negative.")
        if not 0 <= self.jitter <= 1:
            raise ValueError("Backoff jitter must be between 0 and 1.")

    def bounds(self, attempt: int) -> tuple[float, float]:
        """The (lowest, highest) delay after failed attempt number `attempt` (1-based)."""
        exponent = min(max(attempt, 1) - 1, 64)
        high = min(self.cap, self.base * (2**exponent))
        return high * (1 - self.jitter), high

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        low, high = self.bounds(attempt)
        return low + (high - low) * rng()


BackoffSpec = Backoff | float | int | Callable[[int], float]

#: No retry is scheduled further out than this, whatever a backoff returns (one year).
MAX_DELAY = 366 * 24 * 3600.0


def compute_delay(spec: BackoffSpec | None, attempt: int, default: Backoff) -> float:
    """Seconds to wait after failed attempt `attempt`, for any accepted `backoff=` value.

    A bare number is the base; cap and jitter then come from `default` (the settings).
    """
    if spec is None:
        delay = default.delay(attempt)
    elif isinstance(spec, Backoff):
        delay = spec.delay(attempt)
    elif isinstance(spec, (int, float)):
        delay = Backoff(base=float(spec), cap=default.cap, jitter=default.jitter).delay(attempt)
    else:
        try:
            delay = float(spec(attempt))
        except Exception:
            delay = default.delay(attempt)
    if not math.isfinite(delay):
        delay = MAX_DELAY
    return min(max(0.0, delay), MAX_DELAY)


def validate_backoff(spec: object) -> None:
    """Raise ValueError for a `backoff=` value that `compute_delay` could not use."""
    if spec is None or isinstance(spec, Backoff) or callable(spec):
        return
    if isinstance(spec, bool) or not isinstance(spec, (int, float)) or spec < 0:
        raise ValueError(
            f"backoff must be a non-negative number of seconds, a Backoff or a callable "
            f"taking the attempt number; got {spec!r}."
        )
