"""The jobs a worker process is running, one cell per slot, in memory it shares with its
supervisor: after a crash the supervisor spends the attempts of these jobs (they may have
caused it) and hands the worker's other claimed jobs back unspent; while the worker runs,
its lease keeper renews them even when the worker's own threads cannot (a handler holding
the GIL)."""

from __future__ import annotations

from typing import Any


class InFlight:
    """`slots` cells of job ids (0: free). Each cell is written by its own slot only; the
    supervisor reads them. No lock: a cell is one aligned 64-bit word."""

    def __init__(self, context: Any, slots: int = 1) -> None:
        self.cells = context.Array("q", max(1, slots), lock=False)

    def __len__(self) -> int:
        return len(self.cells)

    def set(self, slot: int, job_id: int) -> None:
        self.cells[slot] = job_id

    def ids(self) -> list[int]:
        """The jobs running now, in slot order."""
        return [job_id for job_id in self.cells[:] if job_id]

    @property
    def value(self) -> int:
        """The first running job (0: none): a one-slot worker's job."""
        return next((job_id for job_id in self.cells[:] if job_id), 0)

    @value.setter
    def value(self, job_id: int) -> None:
        self.cells[0] = job_id
