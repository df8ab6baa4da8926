"""Which workers are known to be alive without asking the database: a lock is not a crash.

Lease recovery takes a job whose lease expired for a job whose worker died. That is only a
guess: a worker that could not renew its lease (SQLite locked by a long transaction, a
handler holding the GIL) is alive and still running the job, and recovering it runs the job
twice. Where the process can be seen, it is asked instead: a supervisor knows its own
children, and on Linux a worker of any supervisor on this host is alive if its pid is, and
that process started before the worker registered (so a reused pid does not count).
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

from django.db.models import Q

from ..models import Worker

#: Seconds a worker's row may be written before its process started (clock granularity).
START_SLACK = 2.0


@functools.cache
def boot_time() -> float | None:
    """When this machine booted (epoch seconds, Linux; None elsewhere): read once."""
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def process_started(pid: int) -> float | None:
    """When process `pid` started (epoch seconds); None if it is gone, a zombie, stopped
    (SIGSTOP, a debugger: it makes no progress and renews nothing), or unknown."""
    boot = boot_time()
    fields = stat_fields(pid)
    if boot is None or fields is None or fields[0] in ("Z", "X", "x", "T", "t"):
        return None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), None if unknown."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def alive_since(pid: int, registered: datetime) -> bool:
    started = process_started(pid)
    return started is not None and started <= registered.timestamp() + START_SLACK


def live_workers(alias: str, own: Mapping[str, int] | None = None) -> dict[str, datetime | None]:
    """The workers known alive, id → the last heartbeat of theirs on record (None: no row
    yet, or it was removed as stale). Of `own` (a supervisor's children, id → pid), those
    not stopped; and the workers of this host whose process is alive and the one that
    registered (Linux; elsewhere only `own`, taken as alive)."""
    own = own or {}
    host = socket.gethostname()[:255]
    rows = Worker.objects.using(alias).filter(Q(hostname=host) | Q(id__in=list(own)))
    seen = {
        worker_id: (pid, started_at, last_seen_at)
        for worker_id, pid, started_at, last_seen_at in rows.values_list(
            "id", "pid", "started_at", "last_seen_at"
        )
    }
    on_linux = boot_time() is not None
    alive: dict[str, datetime | None] = {}
    for worker_id, pid in own.items():
        if not on_linux or process_started(pid) is not None:
            row = seen.get(worker_id)
            alive[worker_id] = row[2] if row else None
    if not on_linux:
        return alive
    for worker_id, (pid, started_at, last_seen_at) in seen.items():
        if worker_id not in own and alive_since(pid, started_at):
            alive[worker_id] = last_seen_at
    return alive


#: A supervisor's live children: worker id → pid.
LiveWorkers = Callable[[], Mapping[str, int]]
