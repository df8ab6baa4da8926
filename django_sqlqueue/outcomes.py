"""Where a finished attempt is told to whoever watches: metrics, the dashboard's rollup, JSON logs.

An attempt's outcome is decided by the fenced UPDATE that wrote it (the door out of `running`,
databases/exits.py), and told from one place, `runtime/reporting.py`, only once that UPDATE
said the row was its writer's: so each attempt is reported exactly once however many processes
race over it. The outcomes:

- `completed`: the worker recorded its success (one by one, in batches, or in an atomic job's
  own transaction);
- `failed` (a retry is scheduled) and `dead`: the worker recorded its failure, or gave up on a
  handler deaf to its timeout (runtime/hard_stop.py);
- `cancelled`: the attempt stopped after a cancel request, or recovery stopped it for a worker
  that is gone;
- `lost`: recovery failed the attempt of a worker that died or stopped renewing its lease
  (runtime/transitions.py, run by the supervisor), whether the job retries or goes dead.

Jobs handed back unspent (shutdown, a dead worker's unstarted batch, a claim's surplus, a
parked job) did not finish an attempt and are not reported. With no watcher installed,
`attempt_ended` is one truth test.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from .rows import ClaimedJob

logger = logging.getLogger("django_sqlqueue")

COMPLETED = "completed"
FAILED = "failed"
DEAD = "dead"
CANCELLED = "cancelled"
LOST = "lost"
#: Every outcome a finished attempt can have, in the order charts and metrics list them.
OUTCOMES = (COMPLETED, FAILED, DEAD, CANCELLED, LOST)


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """One finished attempt, as watchers see it."""

    job: ClaimedJob
    outcome: str
    #: Seconds the handler ran, measured by its worker (None for a lost attempt).
    duration: float | None
    #: Wall-clock time it ended (time.time()).
    ended: float
    error: str = ""

    @property
    def wait(self) -> float | None:
        """Seconds from the attempt's run_at to its start (its claim), never negative."""
        started: datetime | None = self.job.started_at
        if started is None:
            return None
        return max(0.0, (started - self.job.run_at).total_seconds())


Watcher = Callable[[AttemptEnd], None]

_watchers: list[Watcher] = []
_flushers: list[Callable[[], object]] = []


def watch(watcher: Watcher, flush: Callable[[], object] | None = None) -> None:
    """Call `watcher` for every attempt this process (and processes it forks) sees end;
    `flush`, if given, runs from `flush()` (a worker's heartbeat, a supervisor's round)."""
    if watcher not in _watchers:
        _watchers.append(watcher)
        if flush is not None:
            _flushers.append(flush)


def unwatch_all() -> None:
    """Forget every watcher (tests, and a supervisor that stops)."""
    _watchers.clear()
    _flushers.clear()


def attempt_ended(
    job: ClaimedJob, outcome: str, duration: float | None = None, error: str = ""
) -> None:
    """Report a finished attempt, once its outcome is written. A watcher that raises is
    logged and never disturbs the caller."""
    if not _watchers:
        return
    end = AttemptEnd(job, outcome, duration, time.time(), error)
    for watcher in list(_watchers):
        try:
            watcher(end)
        except Exception:
            logger.exception("Outcome watcher %r failed for job %s", watcher, job.id)


def flush() -> None:
    """Let watchers that buffer (the rollup) write what they hold; errors are logged."""
    for flusher in list(_flushers):
        try:
            flusher()
        except Exception as exc:
            logger.warning("Could not write job statistics (%s); will retry", exc)
