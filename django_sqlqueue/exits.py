"""Every way a job leaves `running`, as data: what the one door out of `running` writes.

An `Exit` names its transition (states.py) and target status, and carries what the row
records of the attempt. Which columns it changes follows from the transition alone
(`ExitShape`): the vendor's door (`QueueDatabase.leave_running`, databases/exits.py) builds one
fenced UPDATE per shape and writes any exit through it, for one job or a batch. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache

from .attempts import AttemptOutcome
from .states import (
    COMPLETE,
    EXITS,
    FAIL,
    FINISHED,
    PARK,
    PARKED_OWNER,
    RELEASE,
    STOP,
    UNCLAIM,
    Status,
    Transition,
)


@dataclass(frozen=True)
class ExitShape:
    """The columns one kind of exit writes, besides those every exit writes (the status, the
    lease cleared, `updated_at`). Derived from the transition and target; see `shape_of`."""

    transition: Transition
    status: Status
    #: Appends the attempt's history entry (ENTRY_FIELDS); unclaim and park write none.
    entry: bool
    #: The entry's `started_at` is the row's (the attempt ran); NULL for a hand-back.
    started: bool
    #: `attempts - 1`: the attempt is not spent.
    unspent: bool
    #: `lease_owner` afterwards: "" (free) or PARKED_OWNER (a parked job, for WAKE).
    owner_after: str
    writes_result: bool
    writes_finished_at: bool
    writes_run_at: bool
    writes_last_error: bool


@cache
def shape_of(transition: Transition, status: Status) -> ExitShape:
    """What the exit `transition` → `status` writes; ValueError for anything that is not an
    exit from `running` the state machine allows."""
    if transition not in EXITS or status not in transition.targets:
        raise ValueError(f"{transition.name} → {status} is not an exit from running.")
    hand_back = transition in (RELEASE, UNCLAIM, PARK)
    return ExitShape(
        transition=transition,
        status=status,
        entry=transition not in (UNCLAIM, PARK),
        started=not hand_back,
        unspent=hand_back,
        owner_after=PARKED_OWNER if transition is PARK else "",
        writes_result=transition is COMPLETE,
        writes_finished_at=status in FINISHED,
        writes_run_at=transition in (RELEASE, PARK) or status == Status.FAILED,
        writes_last_error=transition in (FAIL, STOP),
    )


@dataclass(frozen=True, slots=True)
class Exit:
    """One exit from `running`, for one job or for every job of a batch."""

    shape: ExitShape
    #: When it happens: `updated_at`, `finished_at` and the entry's `finished_at`.
    at: datetime
    #: The history entry's outcome (None for an exit that writes no entry).
    outcome: AttemptOutcome | None = None
    error: str = ""
    traceback: str = ""
    #: Dotted path of the exception class that ended the attempt ("" when none did).
    exception: str = ""
    #: COMPLETE: the handler's result as JSON text (None for a null result).
    result: str | None = None
    #: When the job is due again (a retry, a hand-back, a parked job).
    run_at: datetime | None = None

    def __post_init__(self) -> None:
        shape = self.shape
        if shape.entry != (self.outcome is not None):
            raise ValueError(f"{shape.transition.name}: an entry needs an outcome, and only it.")
        if shape.writes_run_at != (self.run_at is not None):
            raise ValueError(f"{shape.transition.name} → {shape.status}: run_at is required.")


def completed(at: datetime, result: str | None) -> Exit:
    """The attempt succeeded; `result` is its JSON text."""
    return Exit(COMPLETED_SHAPE, at, AttemptOutcome.COMPLETED, result=result)


COMPLETED_SHAPE = shape_of(COMPLETE, Status.COMPLETED)
