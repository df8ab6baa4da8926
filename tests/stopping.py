"""Stopping a `runworkers` started by a test, with the evidence when it does not stop.

A supervisor given SIGTERM with idle workers exits within a second; its own bound with busy
ones is GRACE_PERIOD + 5 s. When one does not exit in time, a failing test that only says
"timed out" tells nobody why: the processes are then sent SIGABRT, on which Python's
faulthandler (PYTHONFAULTHANDLER=1, set by `with_stack_dumps`) prints every thread's stack
to their log, and the assertion shows that log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any


def with_stack_dumps(env: dict[str, str]) -> dict[str, str]:
    """The environment for a process whose stacks a test may need: faulthandler on."""
    return {**env, "PYTHONFAULTHANDLER": "1"}


def stop_group(process: subprocess.Popen[Any], log: Path, timeout: float = 60) -> int:
    """SIGTERM the process group of `process` (started with start_new_session=True) and wait
    for its leader; on a timeout, dump the group's stacks into `log` and fail with it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    return wait_or_dump(process, log, timeout, " of SIGTERM")


def wait_or_dump(process: subprocess.Popen[Any], log: Path, timeout: float, after: str = "") -> int:
    """Wait for the leader of `process`'s group to exit; on a timeout, dump the group's
    stacks into `log` (SIGABRT), kill it, and fail with the log. `after` ends the message's
    "did not exit within N s" (" of SIGTERM")."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        raise AssertionError(
            f"process group {process.pid} did not exit within {timeout:g} s{after}; its log"
            f", with the stacks it had then:\n{log.read_text(errors='replace')[-20000:]}"
        ) from None
