"""Worker processes the harness starts, and what /proc says about them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def django_command(*args: str) -> list[str]:
    """`manage.py ARGS` for the benchmark project."""
    return [sys.executable, "-m", "django", *args]


@dataclass
class Workers:
    """Worker processes started by the harness, each in its own session (process group)."""

    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started: float = 0.0  # time.monotonic() just before the first one was started
    started_wall: float = 0.0  # the same moment by time.time(), to compare with markers
    log: IO[bytes] | None = None

    @classmethod
    def start(cls, commands: Sequence[Sequence[str]], log_path: Path) -> Workers:
        log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        workers = cls(log=log, started=time.monotonic(), started_wall=time.time())
        for command in commands:
            workers.processes.append(
                subprocess.Popen(
                    list(command),
                    cwd=ROOT,
                    env=os.environ.copy(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        return workers

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def wait_all(self, timeout: float) -> float:
        """Wait until every process exited; the monotonic time the last one was seen gone."""
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in self.processes):
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers still running after {timeout:g} s")
            time.sleep(0.002)
        done = time.monotonic()
        failed = [p.returncode for p in self.processes if p.returncode != 0]
        if failed:
            raise RuntimeError(f"worker exited with status {failed}; see {self.log_name}")
        return done

    @property
    def log_name(self) -> str:
        return getattr(self.log, "name", "?")

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM each process group, then SIGKILL what is left after `grace` seconds."""
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # stragglers, and orphaned children
            process.wait()
        if self.log:
            self.log.close()
            self.log = None


def children(pid: int) -> list[int]:
    """Direct children of `pid`."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found.extend(int(x) for x in task.read_text().split())
    return found


def tree(pid: int) -> list[int]:
    """`pid` and all its descendants."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo.extend(children(current))
    return pids


def rss_mb(pid: int) -> float:
    """Resident set size from /proc/PID/statm, in MiB."""
    resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return resident * PAGE_SIZE / 2**20


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def descendants() -> list[int]:
    """Every process this one started, and theirs: the workers of a measurement."""
    return tree(os.getpid())[1:]


def open_paths(pid: int) -> list[str]:
    """What `pid`'s file descriptors point to: paths, or 'socket:[INODE]' and the like."""
    targets = []
    with contextlib.suppress(OSError):  # the process may exit meanwhile
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                targets.append(os.readlink(fd))
    return targets


def tcp_sockets_to(port: int) -> set[str]:
    """'socket:[INODE]' of every established TCP connection to remote `port` (IPv4, IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                    found.add(f"socket:[{fields[9]}]")
    return found
