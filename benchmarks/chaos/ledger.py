"""Executions of atomic jobs, kept in files: a row written inside an atomic job's transaction
rolls back with it, so the Execution table cannot show the attempts that were killed or
failed. Each worker process appends one JSON line when a handler starts and one when its body
returns or raises, with one `write()` each (a SIGKILL loses nothing already written).

Under `runworkers --concurrency C` several slot threads of one process run atomic jobs at
once: each execution's key is drawn under a lock (two executions never share one, which would
merge them when the file is read), and the file is opened once per process.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from . import config

_fd: int | None = None
_fd_pid: int | None = None
_serial = 0
#: Guards the three above against the slot threads of one process.
_lock = threading.Lock()


def _new_lock_after_fork() -> None:
    """A fork from a slot thread copies the lock as it was, perhaps held by another thread."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


def ledger_dir() -> Path:
    """One directory per run database, under the run's work directory."""
    return config.work_dir() / f"{config.db_name()}-atomic-executions"


def clear() -> None:
    """Forget the executions of an earlier run (before any worker starts)."""
    shutil.rmtree(ledger_dir(), ignore_errors=True)


def _file() -> int:
    """This process's file (opened on its first write, or its first after a fork)."""
    global _fd, _fd_pid
    with _lock:
        if _fd is None or _fd_pid != os.getpid():
            path = ledger_dir()
            path.mkdir(parents=True, exist_ok=True)
            _fd = os.open(path / f"{os.getpid()}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            _fd_pid = os.getpid()
        return _fd


def _append(record: dict[str, Any]) -> None:
    # One O_APPEND write per line: lines of concurrent threads never interleave.
    os.write(_file(), (json.dumps(record) + "\n").encode())


def _next_key() -> tuple[int, int]:
    global _serial
    with _lock:
        _serial += 1
        return os.getpid(), _serial


def started(job_id: int, token: str, kind: str, attempt: int, worker_id: str) -> tuple[int, int]:
    """Note that a handler starts now; the key to pass to `finished`."""
    key = _next_key()
    _append(
        {
            "key": list(key),
            "job_id": job_id,
            "token": token,
            "kind": kind,
            "attempt": attempt,
            "pid": os.getpid(),
            "worker_id": worker_id,
            "started": time.time(),
        }
    )
    return key


def finished(key: tuple[int, int]) -> None:
    _append({"key": list(key), "finished": time.time()})


def read() -> list[dict[str, Any]]:
    """Every execution noted, each with `finished` (None if its process died first)."""
    executions: dict[tuple[int, int], dict[str, Any]] = {}
    ends: dict[tuple[int, int], float] = {}
    for path in sorted(ledger_dir().glob("*.jsonl")) if ledger_dir().exists() else []:
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill
            key = (record["key"][0], record["key"][1])
            if "finished" in record:
                ends[key] = record["finished"]
            else:
                executions[key] = record
    return [
        {**{k: v for k, v in record.items() if k != "key"}, "finished": ends.get(key)}
        for key, record in sorted(executions.items(), key=lambda item: item[1]["started"])
    ]


def running_pids() -> set[int]:
    """Processes in the middle of an atomic job now (or killed in the middle of one)."""
    return {record["pid"] for record in read() if record["finished"] is None}
