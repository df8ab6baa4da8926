"""`runworkers --stop-after N`: a supervisor whose workers, together, run N jobs, then stop.

The supervisor keeps N job starts in memory its worker processes share. A worker reserves
starts before it claims, as many as it asks for, and gives back those its claim did not fill:
so the workers never claim more jobs than are left to run, and never run more than N in all.
Each start a worker holds is counted in its own slot until the job starts, so that the
supervisor can take back the starts of a worker that died, and can tell when all N jobs have
started. Then it stops each worker that has nothing left to run, and exits once the last job
in hand has finished: no job is cut short by a grace period.
"""

from __future__ import annotations

from typing import Any


class JobBudget:
    """The starts left to hand out (`remaining`), behind one lock for every process."""

    def __init__(self, context: Any, total: int) -> None:
        self.total = total
        self.lock = context.Lock()
        self.remaining = context.Value("q", total, lock=False)

    def slot(self, context: Any) -> WorkerBudget:
        """The share of one new worker process: starts it holds and has not used yet."""
        return WorkerBudget(self, context.Value("q", 0, lock=False))

    def reclaim(self, slot: WorkerBudget) -> None:
        """Take back what a worker that died held: the jobs it had not started go back to
        the queue unspent, so their starts go back to the budget."""
        with self.lock:
            self.remaining.value += slot.held.value
            slot.held.value = 0

    def all_started(self, slots: list[WorkerBudget]) -> bool:
        """True once every start is used: none left, and no worker holds one."""
        with self.lock:
            return self.remaining.value == 0 and all(slot.held.value == 0 for slot in slots)


class WorkerBudget:
    """One worker's side of the budget: reserve before claiming, use one per job started."""

    def __init__(self, budget: JobBudget, held: Any) -> None:
        self.budget = budget
        self.held = held

    def reserve(self, wanted: int) -> int:
        """Up to `wanted` starts for the next claim (0 when none is left for now)."""
        with self.budget.lock:
            granted = min(wanted, self.budget.remaining.value)
            self.budget.remaining.value -= granted
            self.held.value += granted
            return granted

    def give_back(self, count: int) -> None:
        """Return starts this worker holds but will not use: its claim found fewer jobs, or
        it hands claimed jobs back to the queue."""
        with self.budget.lock:
            count = min(count, self.held.value)
            self.held.value -= count
            self.budget.remaining.value += count

    def use_one(self) -> None:
        """A job of this worker starts: one start used for good."""
        with self.budget.lock:
            self.held.value -= 1
