"""The worker's view of a claimed job: plain data, no ORM instance on the hot path."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime

#: Columns every claimer returns, in this order.
CLAIM_COLUMNS = (
    "id",
    "name",
    "queue",
    "args",
    "kwargs",
    "attempts",
    "max_attempts",
    "priority",
    "run_at",
    "created_at",
    "history",
    "backend",
)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, (str, bytes, bytearray)) else value


def to_datetime(value: Any) -> datetime:
    """A database datetime as an aware UTC datetime (naive when USE_TZ is off)."""
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            raise ValueError(f"not a datetime: {value!r}")
        value = parsed
    if settings.USE_TZ and value.tzinfo is None:
        value = value.replace(tzinfo=dt_timezone.utc)
    return value


@dataclass
class ClaimedJob:
    id: int
    name: str
    queue: str
    args: list[Any]
    kwargs: dict[str, Any]
    attempts: int
    max_attempts: int
    priority: int
    run_at: datetime
    created_at: datetime
    history: list[dict[str, Any]] = field(default_factory=list)
    backend: str = ""
    lease_owner: str = ""

    @classmethod
    def from_row(cls, row: tuple[Any, ...], lease_owner: str) -> ClaimedJob:
        values = dict(zip(CLAIM_COLUMNS, row, strict=True))
        return cls(
            id=int(values["id"]),
            name=values["name"],
            queue=values["queue"],
            args=_json(values["args"]),
            kwargs=_json(values["kwargs"]),
            attempts=int(values["attempts"]),
            max_attempts=int(values["max_attempts"]),
            priority=int(values["priority"]),
            run_at=to_datetime(values["run_at"]),
            created_at=to_datetime(values["created_at"]),
            history=_json(values["history"]) or [],
            backend=values["backend"] or "",
            lease_owner=lease_owner,
        )

    @property
    def order_key(self) -> tuple[int, datetime, int]:
        """The claim order: highest priority, then earliest run_at, then lowest id."""
        return (-self.priority, self.run_at, self.id)
