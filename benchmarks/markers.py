"""Proof of execution: every benchmark job appends `id start_time` to its process's file.

One unbuffered O_APPEND write per job (a few microseconds, the same for every system) lets
the harness check, independently of each system's own bookkeeping, that every job ran
exactly once, and read when each one started (for latency).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

_fd: int | None = None
_fd_pid: int | None = None


def marker_dir() -> Path:
    """Set by the measuring process for its workers; one per benchmark database name."""
    default = Path(os.environ.get("BENCH_DIR", "/tmp/bench")) / (
        "markers-" + os.environ.get("BENCH_DB_NAME", "bench_sqlqueue")
    )
    path = Path(os.environ.get("BENCH_MARKER_DIR", str(default)))
    path.mkdir(parents=True, exist_ok=True)
    return path


def mark(job_id: int) -> None:
    """Record that job `job_id` starts now, in this process's marker file."""
    global _fd, _fd_pid
    now = time.time()
    if _fd is None or _fd_pid != os.getpid():  # reopen after a fork
        name = marker_dir() / f"{os.getpid()}-{os.urandom(3).hex()}.marks"
        _fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _fd_pid = os.getpid()
    os.write(_fd, f"{job_id} {now:.6f}\n".encode())


def clear() -> None:
    """Forget all marks. Only before workers start: a running process would keep writing
    to its deleted file (this process reopens its own)."""
    global _fd
    if _fd is not None and _fd_pid == os.getpid():
        os.close(_fd)
    _fd = None
    for path in marker_dir().glob("*.marks"):
        path.unlink(missing_ok=True)


def read() -> list[tuple[int, float]]:
    """Every (job id, start time) recorded so far, complete lines only."""
    marks = []
    for path in marker_dir().glob("*.marks"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                marks.append((int(parts[0]), float(parts[1])))
    return marks


def read_by_process() -> dict[int, list[tuple[int, float]]]:
    """The marks of each process (by pid, from the file name): which process ran which job."""
    marks: dict[int, list[tuple[int, float]]] = {}
    for path in marker_dir().glob("*.marks"):
        mine = marks.setdefault(int(path.name.split("-", 1)[0]), [])
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                mine.append((int(parts[0]), float(parts[1])))
    return marks


def count() -> int:
    return sum(path.read_bytes().count(b"\n") for path in marker_dir().glob("*.marks"))


def verify_exactly_once(
    expected: range | list[int], marks: list[tuple[int, float]] | None = None
) -> str:
    """'' when every expected job ran exactly once, else what went wrong; among `marks` if
    given (the jobs of one kind), else every mark recorded."""
    runs = Counter(job_id for job_id, _ in (read() if marks is None else marks))
    wanted = set(expected)
    missing = len(wanted - runs.keys())
    twice = sum(1 for job_id, n in runs.items() if n > 1)
    unknown = len(runs.keys() - wanted)
    problems = []
    if missing:
        problems.append(f"{missing} never ran")
    if twice:
        problems.append(f"{twice} ran more than once")
    if unknown:
        problems.append(f"{unknown} unexpected")
    return ", ".join(problems)


def most_within(starts: Sequence[float], window: float) -> int:
    """The most starts (sorted) that fall within any `window` seconds: the jobs running at
    once when each runs `window` seconds, or the starts in a rate limit's window."""
    most, first = 0, 0
    for last, start in enumerate(starts):
        while starts[first] <= start - window:
            first += 1
        most = max(most, last - first + 1)
    return most
