"""The life of a worker process the supervisor started: set up, work, and really end.

A worker's process ends when its loop does, whatever its handlers left behind: a
non-daemon thread still running would otherwise keep it alive for as long as that thread
lives (Python waits for such threads at exit), and with `--max-jobs` its slot would be lost
to the supervisor, which waits for it to exit before starting a fresh one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading

from django.db import connections

from .. import outcomes
from ..words import counted
from .budget import WorkerBudget
from .forks import guard_forks
from .in_flight import InFlight
from .worker import JobWorker, WorkerOptions

logger = logging.getLogger("django_sqlqueue")


def worker_main(
    worker_id: str,
    options: WorkerOptions,
    shared_current: InFlight | None = None,
    budget: WorkerBudget | None = None,
) -> None:
    """Entry point of a worker process started by the supervisor (which closed its database
    connections before forking, so this process opens its own)."""
    guard_forks()
    worker = JobWorker(worker_id, options, shared_current=shared_current, budget=budget)
    worker.install_signal_handlers()
    logger.info("Worker %s started (pid %d)", worker_id, os.getpid())
    code = worker.run()
    outcomes.flush()
    logger.info("Worker %s stopped after %s", worker_id, counted(worker.jobs_done, "job"))
    connections.close_all()
    end_process(worker_id, code)


def lingering_threads() -> list[threading.Thread]:
    """Non-daemon threads other than this one: Python would wait for them at exit."""
    current = threading.current_thread()
    return [t for t in threading.enumerate() if t is not current and not t.daemon and t.is_alive()]


def end_process(worker_id: str, code: int) -> None:
    """Exit with `code`; at once, with logs flushed, if a handler left a thread running."""
    lingering = lingering_threads()
    if not lingering:
        raise SystemExit(code)
    logger.warning(
        "Worker %s: a handler left %d thread(s) running (%s); exiting without waiting for them",
        worker_id,
        len(lingering),
        ", ".join(t.name for t in lingering[:5]),
    )
    # A broken log handler or stream must not keep the process alive either.
    for flushable in [*logging.getLogger().handlers, *logger.handlers, sys.stdout, sys.stderr]:
        with contextlib.suppress(Exception):
            flushable.flush()
    os._exit(code)
