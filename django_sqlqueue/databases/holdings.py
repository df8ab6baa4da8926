"""What each lease owner of this process holds: the jobs its claims returned that no exit has
taken out of `running` yet, and the claims still on their way.

The database may say a worker holds a job that the worker does not have: a claim committed
whose reply a cut connection lost, or, after a PostgreSQL failover, a claim that reached the
standby while the completion that followed it did not. Nothing would hand such a job back
before its lease ran out, since the worker keeps renewing its lease (a live worker's heartbeat
renews what it holds) or nobody looks until it expires. Each heartbeat compares the table
with this ledger (`runtime.transitions.release_stranded`): a job running under the worker's
name, claimed before every claim still in flight, that the ledger does not hold, is stranded.

The ledger is kept where claims and exits are written, so no path of the worker (a batch being
started, a slot's handoff, a success not yet recorded) can make a held job look stranded: a
claim adds its jobs as its statement returns, and the door (`QueueDatabase.leave_running`)
takes them out once the exit commits, whether or not its fenced UPDATE wrote them.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..rows import ClaimedJob


@dataclass
class Holding:
    """One lease owner's jobs, the start times of its claims in flight, and the cutoff of
    its last snapshot."""

    #: (job id, attempts): an attempt, so that a late exit of an earlier attempt of a job
    #: this owner claimed again does not take the new one out.
    jobs: set[tuple[int, int]] = field(default_factory=set)
    claims: dict[int, datetime] = field(default_factory=dict)
    cutoff: datetime | None = None


class Holdings:
    """The ledger of every lease owner in this process, safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[str, Holding] = {}
        self._tokens = itertools.count()

    @contextlib.contextmanager
    def claiming(self, owner: str, now: datetime) -> Iterator[ClaimInFlight]:
        """Around one claim statement: its jobs must get `started_at` (which is `now`, or
        the cutoff of a snapshot taken since `now` was read, if later): until the block
        ends, no job of `owner` that started then or later counts as stranded. The block
        adds the jobs the statement returned (`ClaimInFlight.took`)."""
        token = next(self._tokens)
        with self._lock:
            holding = self._owners.setdefault(owner, Holding())
            started_at = now if holding.cutoff is None else max(now, holding.cutoff)
            holding.claims[token] = started_at
        try:
            yield ClaimInFlight(self, owner, started_at)
        finally:
            with self._lock:
                current = self._owners.get(owner)
                if current is not None:
                    current.claims.pop(token, None)

    def add(self, owner: str, ids: Iterable[tuple[int, int]]) -> None:
        with self._lock:
            self._owners.setdefault(owner, Holding()).jobs.update(ids)

    def discard(self, owner: str, ids: Iterable[tuple[int, int]]) -> None:
        """The jobs left `running` (or were fenced out: either way no longer the owner's)."""
        with self._lock:
            holding = self._owners.get(owner)
            if holding is not None:
                holding.jobs.difference_update(ids)

    def snapshot(self, owner: str, now: datetime) -> tuple[datetime, frozenset[tuple[int, int]]]:
        """(cutoff, held): a job of `owner` that started before the cutoff and is not held is
        stranded. The cutoff is `now`, or the start of the oldest claim still in flight."""
        with self._lock:
            holding = self._owners.setdefault(owner, Holding())
            cutoff = min([now, *holding.claims.values()])
            # A claim that read its clock before this snapshot but starts after it starts
            # its jobs at this cutoff, never before it (`claiming`).
            holding.cutoff = now if holding.cutoff is None else max(now, holding.cutoff)
            return cutoff, frozenset(holding.jobs)

    def forget(self, owner: str) -> None:
        """The owner (a worker) has ended."""
        with self._lock:
            self._owners.pop(owner, None)


@dataclass
class ClaimInFlight:
    holdings: Holdings
    owner: str
    #: The `started_at` (and lease start) the claim must write.
    started_at: datetime

    def took(self, jobs: Iterable[ClaimedJob]) -> None:
        self.holdings.add(self.owner, [(job.id, job.attempts) for job in jobs])


#: The one ledger of this process.
HOLDINGS = Holdings()
