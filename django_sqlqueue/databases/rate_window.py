"""The starts a rate limit counted in its last period, as stored on its `FlowKey` row.

A limit of up to `EXACT_UP_TO` starts keeps the time of each start: the exact sliding window.
A larger limit (`100000/h`) would make its row grow with every start and each decision read
and write it whole, so it keeps counts per slice of the period instead (`SLICES` of them):
bounded, and conservative — a slice counts in full until its end has left the period, so the
window never lets more than the limit start in any period, and at most one slice's share of
the allowance (1 %) is left unused.

Starts are recorded `START_MARGIN` seconds after the decision, as a reservation: the limit
holds measured at the handlers' start as long as each recorded time is no earlier than its
handler's start, so a job whose handler would start later is counted again first
(`gate.FlowGate.admit_start`). The margin costs a saturated limit `START_MARGIN / period` of
its rate.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

from ..options import RateLimit

#: Limits of at most this many starts keep each start's time.
EXACT_UP_TO = 1000
#: Slices of the period that larger limits count starts in.
SLICES = 100
#: Seconds between a start's decision and its stamp: more than the decision's commit and
#: the handler's call take.
START_MARGIN = 0.05


@dataclass
class RateWindow:
    rate: RateLimit
    #: Exact: the start times (epoch seconds) within the period, oldest first.
    stamps: list[float] = field(default_factory=list)
    #: Sliced: slice index → starts in that slice (a slice is `period / SLICES` seconds).
    slices: dict[int, int] = field(default_factory=dict)
    #: Whether a start was added or given up since the window was loaded.
    changed: bool = False

    @property
    def sliced(self) -> bool:
        return self.rate.limit > EXACT_UP_TO

    @property
    def width(self) -> float:
        return self.rate.period / SLICES

    @classmethod
    def load(cls, stored: Any, rate: RateLimit, now: float) -> RateWindow:
        """The window as of `now` from what the row holds (either form, whichever the limit
        was when it was written), with what left the period dropped."""
        window = cls(rate)
        if isinstance(stored, dict):
            width = float(stored.get("slice") or 0) or window.width
            counts = {int(k): int(v) for k, v in (stored.get("counts") or {}).items()}
            if window.sliced and width == window.width:
                window.slices = counts
            else:  # the limit changed: a slice's starts are taken at its end, never earlier
                for index, count in counts.items():
                    window.add((index + 1) * width, count)
        elif window.sliced:
            for stamp in stored or []:
                window.add(float(stamp))
        else:
            window.stamps = sorted(float(stamp) for stamp in stored or [])
        window.forget(now)
        return window

    def add(self, stamp: float, count: int = 1) -> None:
        if self.sliced:
            index = math.floor(stamp / self.width)
            self.slices[index] = self.slices.get(index, 0) + count
        else:
            for _ in range(count):
                bisect.insort(self.stamps, stamp)

    def start(self, now: float) -> float:
        """Count a start decided at `now`; the time it is recorded at."""
        stamp = now + START_MARGIN
        self.add(stamp)
        self.changed = True
        return stamp

    def forget_start(self, stamp: float) -> None:
        """Give up a start recorded at `stamp` (a reservation replaced or not used)."""
        if self.sliced:
            index = math.floor(stamp / self.width)
            if self.slices.get(index, 0) > 0:
                self.slices[index] -= 1
                self.changed = True
        elif stamp in self.stamps:
            self.stamps.remove(stamp)
            self.changed = True

    def forget(self, now: float) -> None:
        since = now - self.rate.period
        if self.sliced:
            first = math.floor(since / self.width)
            self.slices = {i: n for i, n in self.slices.items() if i >= first}
        else:
            self.stamps = [stamp for stamp in self.stamps if stamp > since]

    def count(self) -> int:
        return sum(self.slices.values()) if self.sliced else len(self.stamps)

    def free(self) -> int:
        return max(0, self.rate.limit - self.count())

    def frees_at(self) -> float:
        """When one more start fits (epoch seconds): once enough of the oldest starts have
        left the period. Only meaningful when the window is full."""
        excess = self.count() - self.rate.limit + 1
        if excess <= 0:
            return 0.0
        if not self.sliced:
            return self.stamps[excess - 1] + self.rate.period
        for index in sorted(self.slices):
            excess -= self.slices[index]
            if excess <= 0:
                return (index + 1) * self.width + self.rate.period
        return 0.0  # pragma: no cover - the counts sum to more than the excess

    def stored(self) -> Any:
        if self.sliced:
            return {"slice": self.width, "counts": {str(i): n for i, n in self.slices.items()}}
        return self.stamps
