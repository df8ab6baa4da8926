"""The queues staff see in `manage.py queues list` and the admin: every queue that has jobs
(read with bounded work) or a `QueueState` row, with its counts and whether it is paused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..models import QueueState
from ..states import Status
from .state import count_by_queue


@dataclass(frozen=True)
class QueueRow:
    queue: str
    paused_at: datetime | None
    paused_by: str
    reason: str
    #: Jobs per status (bounded counts: a status with very many rows is capped).
    counts: dict[str, int]

    @property
    def paused(self) -> bool:
        return self.paused_at is not None

    def as_dict(self) -> dict[str, object]:
        return {
            "queue": self.queue,
            "paused": self.paused,
            "paused_at": self.paused_at.isoformat() if self.paused_at else None,
            "paused_by": self.paused_by,
            "reason": self.reason,
            "counts": self.counts,
        }


def queue_rows(alias: str) -> list[QueueRow]:
    counts, _capped = count_by_queue(alias)
    states = {state.queue: state for state in QueueState.objects.using(alias)}
    names = sorted({queue for queue, _status in counts} | set(states))
    rows = []
    for name in names:
        state = states.get(name)
        rows.append(
            QueueRow(
                queue=name,
                paused_at=state.paused_at if state else None,
                paused_by=state.paused_by if state else "",
                reason=state.reason if state else "",
                counts={s.value: counts.get((name, s.value), 0) for s in Status},
            )
        )
    return rows
