"""Real worker processes for the worker tests: spawned, signalled, killed and restarted."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.probes import Probes
from tests.stopping import wait_or_dump

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.05) -> object:
    """Poll until `predicate()` is truthy; fail the test with a clear message on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)


class WorkerProcesses:
    """Starts `manage.py runworkers` against the test database and cleans up after itself."""

    def __init__(self, env: dict[str, str], tmp_path: Path) -> None:
        self.env = env
        self.tmp_path = tmp_path
        self.started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = self.tmp_path / f"runworkers-{len(self.started)}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "django", "runworkers", *args],
            env={**self.env, **(env or {})},
            cwd=ROOT,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a test can kill it whole
        )
        self.started.append((process, log))
        return process

    def run(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> str:
        """Run to completion (`--burst` runs); return the log, failing on a non-zero exit."""
        process = self.start(*args, env=env)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_group(process)
            raise AssertionError(
                f"runworkers {args} did not finish in {timeout} s:\n{self.log(process)}"
            ) from None
        output = self.log(process)
        assert code == 0, f"runworkers {args} exited {code}:\n{output}"
        return output

    def log(self, process: subprocess.Popen[bytes]) -> str:
        return self.log_path(process).read_text(errors="replace")

    def log_path(self, process: subprocess.Popen[bytes]) -> Path:
        for started, path in self.started:
            if started is process:
                return path
        raise KeyError(process)

    def wait(self, process: subprocess.Popen[bytes], timeout: float) -> int:
        """The exit code of a supervisor the test expects to exit by itself; on a timeout,
        the test fails with its log and, if it was started `with_stack_dumps`, its stacks."""
        return wait_or_dump(process, self.log_path(process), timeout)

    @staticmethod
    def kill_group(process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def cleanup(self) -> None:
        for process, _ in self.started:
            if process.poll() is None:
                self.kill_group(process)
            else:
                # The supervisor is gone; make sure no orphaned worker survives it.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture
def worker_env(transactional_db: None) -> dict[str, str]:
    """Environment that points child processes at the test database pytest created."""
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["SQLQUEUE_TEST_DB_NAME"] = str(connection.settings_dict["NAME"])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.fixture
def probes(worker_env: dict[str, str], tmp_path: Path) -> Probes:
    """The probe lines of the processes this test spawns (django_sqlqueue/probes.py): the
    workers started after it is set up write them, and the test waits for them."""
    path = tmp_path / "probes.jsonl"
    worker_env["SQLQUEUE_PROBE_FILE"] = str(path)
    return Probes(path)


@pytest.fixture
def workers(worker_env: dict[str, str], tmp_path: Path) -> Iterator[WorkerProcesses]:
    processes = WorkerProcesses(worker_env, tmp_path)
    yield processes
    processes.cleanup()
