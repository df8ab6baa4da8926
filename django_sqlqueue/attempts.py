"""One attempt of a job: how it can end, and the history entry that records it.

A job's `history` is a list of `AttemptEntry` dicts, oldest first, one per attempt (and one
per attempt handed back unspent). Every exit from `running` appends one through the vendor's
door (databases/exits.py), which builds it in SQL from `ENTRY_FIELDS`; the admin and the
django.tasks results read it; `entry_for` is the same entry in Python. This module is the one
definition they share.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from .rows import ClaimedJob


class AttemptOutcome(str, enum.Enum):
    """How an attempt ended, as recorded in its history entry."""

    COMPLETED = "completed"
    #: The handler raised.
    ERROR = "error"
    #: The handler raised `Retry`.
    RETRY = "retry"
    #: The handler raised `Discard`.
    DISCARD = "discard"
    #: The attempt ran past its timeout.
    TIMEOUT = "timeout"
    #: No handler for the job's name in the worker's deployment.
    UNKNOWN = "unknown"
    #: The handler returned a value the database cannot store.
    BAD_RESULT = "bad_result"
    #: The worker died or stopped renewing the lease while the attempt ran.
    LOST = "lost"
    #: Handed back unspent (shutdown, or never started by a worker that died).
    RELEASED = "released"
    #: Stopped because someone cancelled the job while it ran.
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    @property
    def spends_attempt(self) -> bool:
        return self is not AttemptOutcome.RELEASED

    @property
    def gives_up(self) -> bool:
        """Outcomes that skip the remaining attempts: trying again would not help."""
        return self in (AttemptOutcome.DISCARD, AttemptOutcome.UNKNOWN, AttemptOutcome.BAD_RESULT)


class AttemptEntry(TypedDict):
    """One entry of `Job.history`. Times are ISO 8601 text; `exception` is the dotted path
    of the exception class that ended the attempt ("" when none did)."""

    attempt: int
    worker: str
    started_at: str | None
    finished_at: str
    outcome: str
    error: str
    traceback: str
    exception: str


@dataclass(frozen=True)
class EntryField:
    """One key of a history entry and where its value comes from: a column of the job's row
    as the claim left it (`column`), or a value the exit brings (`column` None)."""

    key: str
    column: str | None = None
    #: The column holds a timestamp, written as ISO 8601 text.
    timestamp: bool = False


#: A history entry's keys, in order. The attempt's number, worker and start are the row's
#: own (the claim wrote them); how it ended is the exit's.
ENTRY_FIELDS: tuple[EntryField, ...] = (
    EntryField("attempt", "attempts"),
    EntryField("worker", "lease_owner"),
    EntryField("started_at", "started_at", timestamp=True),
    EntryField("finished_at"),
    EntryField("outcome"),
    EntryField("error"),
    EntryField("traceback"),
    EntryField("exception"),
)


def clean_text(text: str) -> str:
    """Text as every database stores it: no NUL characters, no lone surrogates."""
    text = text.replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def entry_for(
    job: ClaimedJob,
    outcome: AttemptOutcome | str,
    started_at: datetime | None,
    finished_at: datetime,
    error: str = "",
    traceback: str = "",
    exception: str = "",
) -> AttemptEntry:
    """The history entry of `job`'s current attempt (its number and worker come from the
    claim), ended with `outcome`: in Python what the door writes in SQL from ENTRY_FIELDS
    (an attempt handed back unspent never started: its `started_at` is None)."""
    return {
        "attempt": job.attempts,
        "worker": job.lease_owner,
        "started_at": started_at.isoformat() if started_at else None,
        "finished_at": finished_at.isoformat(),
        "outcome": AttemptOutcome(outcome).value,
        "error": clean_text(error),
        "traceback": clean_text(traceback),
        "exception": exception,
    }


def exception_path(exc: BaseException) -> str:
    """`module.QualName` of an exception's class; builtins as `builtins.ValueError`."""
    cls = type(exc)
    return f"{cls.__module__}.{cls.__qualname__}"


#: Recorded as the exception of an attempt whose worker was lost (the job raised nothing).
WORKER_LOST = "django_sqlqueue.exceptions.WorkerLost"
