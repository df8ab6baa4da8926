"""What a `takes_context=True` handler receives as its first argument."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class JobContext:
    job_id: int
    name: str
    attempt: int
    max_attempts: int
    queue: str
    enqueued_at: datetime
    worker_id: str
