"""Which worker processes a supervisor runs.

Without queues of their own, `-n N` worker processes alike. Queues given slots of their own
(`runworkers --queues webhooks:50,reports:1`, or the QUEUES setting) each get N processes
that claim only from them, with that many slots each; the other queues get N processes of
their own too, which leave those queues out. So a flooded queue never takes another queue's
slots, and a CPU-bound queue with one slot per process runs in its own processes, where its
time limits interrupt it, beside an I/O queue running fifty at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from .worker_options import WorkerOptions


@dataclass(frozen=True)
class WorkerPlan:
    """`count` worker processes run with `options`."""

    options: WorkerOptions
    count: int

    def describe(self) -> str:
        options = self.options
        if options.queues:
            queues = ", ".join(options.queues)
        elif options.excluded:
            queues = "every queue but " + ", ".join(options.excluded)
        else:
            queues = "every queue"
        slots = options.concurrency
        return f"{self.count} x {queues} ({slots} slot{'s' if slots != 1 else ''} each)"


def plan_workers(
    workers: int, options: WorkerOptions, queue_slots: Mapping[str, int] | None = None
) -> list[WorkerPlan]:
    """The processes for `-n workers` with `options`, given the slots of queues that have
    their own (from the command line, or the QUEUES setting for the queues served)."""
    own = dict(queue_slots or {})
    if options.queues:
        own = {queue: slots for queue, slots in own.items() if queue in options.queues}
    own = {queue: slots for queue, slots in own.items() if queue not in options.excluded}
    if not own:
        return [WorkerPlan(options, workers)]
    plans = [
        WorkerPlan(replace(options, queues=(queue,), concurrency=slots, excluded=()), workers)
        for queue, slots in own.items()
    ]
    if options.queues:
        rest = tuple(queue for queue in options.queues if queue not in own)
        if rest:
            plans.append(WorkerPlan(replace(options, queues=rest, excluded=()), workers))
    else:
        left_out = (*options.excluded, *own)
        plans.append(WorkerPlan(replace(options, queues=(), excluded=left_out), workers))
    return plans
