"""How many jobs a worker takes at once, and which of them it keeps.

A worker claims as many jobs as it expects to finish within a short budget: short jobs travel
in batches (fewer round trips), slow ones one by one, so no job waits in a busy worker's hand
while another worker is idle. Durations are estimated per job name, since one slow job name
must not make every other job travel alone, nor a stream of fast jobs hide a slow one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..rows import ClaimedJob

#: Seconds of work a worker claims at once.
CLAIM_BUDGET_SECONDS = 0.05
#: Weight of the newest duration in the moving averages.
SMOOTHING = 0.2


class DurationEstimates:
    """Moving averages of job durations: one per job name, and one over every job."""

    def __init__(self, budget: float | None = None) -> None:
        # Read when a worker starts, not when this module loads: tests set it per process.
        self.budget = CLAIM_BUDGET_SECONDS if budget is None else budget
        self.overall: float | None = None
        self.by_name: dict[str, float] = {}

    def observe(self, name: str, seconds: float) -> None:
        self.overall = _smoothed(self.overall, seconds)
        self.by_name[name] = _smoothed(self.by_name.get(name), seconds)

    def estimate(self, name: str) -> float:
        """Expected seconds of a job of `name`: its own average, else the overall one."""
        known = self.by_name.get(name)
        if known is not None:
            return known
        return self.overall or 0.0

    def claim_size(self, batch_size: int) -> int:
        """Jobs to claim: what fits the budget at the overall average, 1 to `batch_size`."""
        if self.overall is None:
            return 1
        if self.overall <= 0:
            return batch_size
        return max(1, min(batch_size, int(self.budget / self.overall)))

    def keep(self, jobs: Sequence[ClaimedJob]) -> tuple[list[ClaimedJob], list[ClaimedJob]]:
        """Split a claimed batch into what fits the budget by each job's own estimate (at
        least the first job) and the surplus, to hand back at once for idle workers.

        A job whose name this worker has never run counts as the whole budget: it may be
        slow, and the overall average of other jobs says nothing about it."""
        kept: list[ClaimedJob] = []
        planned = 0.0
        for index, job in enumerate(jobs):
            planned += self.by_name.get(job.name, self.budget)
            if kept and planned > self.budget:
                return kept, list(jobs[index:])
            kept.append(job)
        return kept, []


def _smoothed(previous: float | None, value: float) -> float:
    return value if previous is None else previous * (1 - SMOOTHING) + value * SMOOTHING
