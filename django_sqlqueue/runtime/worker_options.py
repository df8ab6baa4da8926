"""How a worker process works: the runworkers options each worker gets from its supervisor."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerOptions:
    queues: Sequence[str] = ()
    burst: bool = False
    max_jobs: int | None = None
    batch_size: int | None = None
    #: Jobs run at once by one worker process (runworkers --concurrency): above 1, in slot
    #: threads (runtime/slots.py).
    concurrency: int = 1
    #: With no `queues`: the queues not to claim from (runworkers --exclude-queues), and those
    #: other workers of the same supervisor serve with slots of their own (--queues name:N).
    excluded: Sequence[str] = ()
