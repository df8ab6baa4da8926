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
