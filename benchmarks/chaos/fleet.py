"""The `runworkers` supervisors of a run: started, killed, stopped, and their worker pids."""

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

ROOT = Path(__file__).resolve().parents[2]


def children_of(pid: int) -> list[int]:
    """Pids whose parent is `pid`, read from /proc (worker processes of a supervisor)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command name: state, ppid, ...; a zombie (Z) is already dead.
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@dataclass
class Supervisor:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    #: The slot it fills: a replacement started after a crash fills the same one.
    slot: str = ""
    #: What it was started with (a cluster host's namespace prefix, its environment).
    prefix: Sequence[str] = ()
    env: dict[str, str] | None = None
    started: float = field(default_factory=time.time)
    #: How the harness ended it: "sigkill", "sigterm", "stop" (at the end of the run).
    ended_by: str = ""
    ended_at: float | None = None
    exit_code: int | None = None
    exited_at: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        if self.process.poll() is None:
            return True
        if self.exited_at is None:
            self.exit_code = self.process.returncode
            self.exited_at = time.time()
        return False


class Fleet:
    def __init__(
        self, workers: int, log_dir: Path, env: dict[str, str], concurrency: int = 1
    ) -> None:
        self.workers = workers
        #: Jobs each worker process runs at once (`runworkers --concurrency`; 1: not passed).
        self.concurrency = concurrency
        self.log_dir = log_dir
        self.env = env
        self.supervisors: list[Supervisor] = []

    def command(self, *extra: str) -> list[str]:
        """The `runworkers` command line of every supervisor of the fleet."""
        command = [sys.executable, "-m", "django", "runworkers", "-n", str(self.workers)]
        if self.concurrency != 1:
            command += ["--concurrency", str(self.concurrency)]
        return [*command, *extra]

    def start(
        self,
        slot: str,
        *extra: str,
        prefix: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> Supervisor:
        """Start a supervisor in its own process group, so it can be killed whole.

        `prefix` runs it elsewhere (`ip netns exec ...`: a cluster host), as long as the
        prefix execs the command in the same process; `env` replaces the fleet's.
        """
        generation = sum(1 for s in self.supervisors if s.slot == slot) + 1
        name = f"{slot}{generation}" if len(slot) == 1 else f"{slot}.{generation}"
        log = self.log_dir / f"supervisor-{name}.log"
        process = subprocess.Popen(
            [*prefix, *self.command(*extra)],
            cwd=ROOT,
            env=env or self.env,
            stdin=subprocess.DEVNULL,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        supervisor = Supervisor(name, process, log, slot, tuple(prefix), env)
        self.supervisors.append(supervisor)
        return supervisor

    def live(self) -> list[Supervisor]:
        return [s for s in self.supervisors if not s.ended_by and s.alive()]

    def worker_pids(self) -> dict[int, Supervisor]:
        return {pid: s for s in self.live() for pid in children_of(s.pid)}

    def kill(self, supervisor: Supervisor) -> list[int]:
        """SIGKILL the supervisor and its workers at once; return the workers' pids."""
        workers = children_of(supervisor.pid)
        supervisor.ended_by, supervisor.ended_at = "sigkill", time.time()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(supervisor.pid, signal.SIGKILL)
        supervisor.process.wait(timeout=30)
        supervisor.alive()
        return workers

    def terminate(self, supervisor: Supervisor, how: str = "sigterm") -> None:
        """SIGTERM the supervisor alone, as a process manager would; it stops its workers."""
        supervisor.ended_by, supervisor.ended_at = how, time.time()
        with contextlib.suppress(ProcessLookupError):
            os.kill(supervisor.pid, signal.SIGTERM)

    def wait_exited(self, timeout: float) -> list[Supervisor]:
        """Wait for every terminated supervisor; return those still running after `timeout`."""
        deadline = time.monotonic() + timeout
        pending = [s for s in self.supervisors if s.alive()]
        while pending and time.monotonic() < deadline:
            time.sleep(0.1)
            pending = [s for s in pending if s.alive()]
        return pending

    def stop_all(self, timeout: float) -> list[Supervisor]:
        for supervisor in self.live():
            self.terminate(supervisor, "stop")
        stuck = self.wait_exited(timeout)
        for supervisor in self.supervisors:
            # Whatever is left of any process group: a stuck supervisor, orphaned workers.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(supervisor.pid, signal.SIGKILL)
        for supervisor in stuck:
            supervisor.process.wait(timeout=30)
            supervisor.alive()
        return stuck
