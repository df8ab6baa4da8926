"""Where a worker SIGKILL tests the most: a worker in the middle of an atomic job's
transaction (its increment must roll back), or one holding a claimed batch (only the job it
was running may run again) — under --concurrency, the worker with the most jobs in flight
(each may run again, once). Random kills rarely land there: atomic transactions last tens
of milliseconds, and batches exist only while a burst is being drained.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from . import ledger

#: Share of worker SIGKILLs aimed at each kind of target, and how long a kill waits for one
#: (it falls back to a random worker when none comes): producers send a burst every few
#: seconds, and atomic jobs come several a second.
AIM_AT = {"atomic": 0.25, "batch": 0.25}
AIM_WAIT_SECONDS = {"atomic": 1.5, "batch": 3.0}
POLL_SECONDS = 0.02


def choose(draw: float, still_missing: str | None = None) -> str | None:
    """The target of a kill, from a uniform draw in [0, 1): a key of AIM_AT, or None.

    `still_missing` names a target no kill has met yet in this run: every kill aims at it
    until one does. A run's check asks for at least one of each, and a quarter's share of a
    dozen kills missed them all in about one run in seventy (CI met it)."""
    if still_missing is not None:
        return still_missing
    for target, share in AIM_AT.items():
        if draw < share:
            return target
        draw -= share
    return None


def atomic_kill_landed(killed: set[int]) -> bool:
    """Whether one of the `killed` processes died inside an atomic job (its ledger record
    has a start and no end)."""
    return bool(ledger.running_pids() & killed)


def in_atomic_job(pids: set[int]) -> set[int]:
    """Workers of `pids` whose atomic job has started and not ended."""
    return ledger.running_pids() & pids


def holding_a_batch(pids: set[int], pid_of: dict[str, int], most: bool = False) -> set[int]:
    """Workers of `pids` holding two or more claimed jobs (`pid_of`: worker id -> pid); with
    `most`, only those holding the most. Under --concurrency a worker claims no more jobs than
    it has free slots, so the jobs it holds are the jobs in flight in it: `most` aims the kill
    at the process with the most of them."""
    from django.db import DatabaseError, connection

    from django_sqlqueue.models import Job

    try:
        owners = Counter(Job.objects.filter(status="running").values_list("lease_owner", flat=True))
    except DatabaseError:
        connection.close()
        return set()
    held = {pid_of[owner]: n for owner, n in owners.items() if n >= 2 and owner in pid_of}
    held = {pid: n for pid, n in held.items() if pid in pids}
    if most and held:
        top = max(held.values())
        return {pid for pid, n in held.items() if n == top}
    return set(held)


def wait_for(find: Callable[[], set[int]], seconds: float) -> set[int]:
    """What `find` returns once it returns something, or an empty set after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        found = find()
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(POLL_SECONDS)
