"""Where a worker SIGKILL tests the most: a worker in the middle of an atomic job's
transaction (its increment must roll back), or one holding a claimed batch (only the job it
was running may run again). Random kills rarely land there: atomic transactions last tens
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


def choose(draw: float) -> str | None:
    """The target of a kill, from a uniform draw in [0, 1): a key of AIM_AT, or None."""
    for target, share in AIM_AT.items():
        if draw < share:
            return target
        draw -= share
    return None


def in_atomic_job(pids: set[int]) -> set[int]:
    """Workers of `pids` whose atomic job has started and not ended."""
    return ledger.running_pids() & pids


def holding_a_batch(pids: set[int], pid_of: dict[str, int]) -> set[int]:
    """Workers of `pids` holding two or more claimed jobs (`pid_of`: worker id -> pid)."""
    from django.db import DatabaseError, connection

    from django_sqlqueue.models import Job

    try:
        owners = Counter(Job.objects.filter(status="running").values_list("lease_owner", flat=True))
    except DatabaseError:
        connection.close()
        return set()
    return {pid_of[owner] for owner, n in owners.items() if n >= 2 and owner in pid_of} & pids


def wait_for(find: Callable[[], set[int]], seconds: float) -> set[int]:
    """What `find` returns once it returns something, or an empty set after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        found = find()
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(POLL_SECONDS)
