"""Start-up floor: what Django itself takes to start a command, `manage.py check`.

The `startup` scenario's figure means little alone: most of a worker's start is the
interpreter, Django and the project's imports, which every command pays. This scenario times
`python -m django check` of the benchmark project *without* django-sqlqueue in
INSTALLED_APPS (BENCH_SYSTEM=bare), from exec to exit, `starts` times; issue 27's target is
our start-up (exec of `runworkers` to the first job running) within 1.5x of it.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from ..procs import ROOT, django_command
from ..systems import System
from .startup import summarise

#: The settings' name for a project of just the benchmark's own app (benchmarks/settings.py).
BARE_SYSTEM = "bare"


def one_check() -> float:
    """Seconds from exec to exit of one `manage.py check` of the bare project."""
    env = {**os.environ, "BENCH_SYSTEM": BARE_SYSTEM}
    began = time.monotonic()
    subprocess.run(
        django_command("check"),
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=True,
    )
    return time.monotonic() - began


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    samples = [one_check() for _ in range(params["starts"])]
    return {**summarise(samples), "samples": samples, "problems": ""}
