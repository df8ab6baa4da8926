"""What a supervisor does for observability: the rollup and queue samples the admin's dashboard
draws, JSON outcome lines, and, with `--metrics-port`, Prometheus metrics and a health check.

Watchers of finished attempts (outcomes.py) are installed here, before the workers are forked,
so every worker inherits them; each keeps its own per-process state. The supervisor's main loop
calls `tick()`: that is where the database is read for the gauges and the health check, so the
HTTP thread never opens a connection (which a fork could then share with a worker).
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import tempfile
import threading
import time
from datetime import datetime
from typing import Any, Protocol

from django.db import DatabaseError, connections
from django.utils import timezone

from .. import outcomes
from ..conf import QueueSettings
from ..logs import OutcomeLog
from ..metrics import rollups
from ..metrics.state import SLOTS_BUSY, SLOTS_FREE, QueueState, read_state
from .chores import Chores
from .worker import EXIT_RECYCLE

logger = logging.getLogger("django_sqlqueue")

#: Seconds between two readings of the queue's state, while someone asks for it.
STATE_INTERVAL = 5.0
#: The state is read only while a scrape or health check came within this many seconds.
WANTED_FOR = 60.0
#: /healthz fails when the main loop has not run for this long.
STALL_SECONDS = 15.0
#: /healthz fails when fewer workers than asked for have run for this long,
SHORT_SECONDS = 10.0
#: or when this many workers died (not recycled, not stopped) within DEATH_WINDOW seconds.
DEATHS = 3
DEATH_WINDOW = 60.0


class QueueSampling:
    """Once a minute: each queue's backlog into QueueSample (the dashboard's backlog chart)."""

    def __init__(self, conf: QueueSettings) -> None:
        self.alias = conf.database
        self.last_minute: datetime | None = None

    def run(self) -> None:
        minute = rollups.minute_of(time.time())
        if minute == self.last_minute:
            return
        state = read_state(self.alias)
        rollups.write_samples(minute, state.counts, state.oldest_wait, self.alias)
        self.last_minute = minute


class RollupKeeping:
    """Write the supervisor's own tally (attempts its recovery ended) and prune old rollups."""

    def __init__(self, conf: QueueSettings) -> None:
        self.alias = conf.database
        self.days = conf.prune_completed_after_days

    def run(self) -> None:
        outcomes.flush()
        rollups.prune(self.days, self.alias)


class Supervised(Protocol):
    """What the telemetry reads of its supervisor (runtime/supervisor.py)."""

    size: int
    stop_deadline: float | None
    #: pid → child, each with its running jobs shared (`current_job`: in_flight.py).
    children: dict[int, Any]
    #: Why the loop itself failed, if it did.
    failure: str | None
    chores: Chores

    @property
    def finished_slots(self) -> int: ...


class SupervisorTelemetry:
    def __init__(
        self,
        supervisor: Supervised,
        conf: QueueSettings,
        metrics_address: tuple[str, int] | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.conf = conf
        self.metrics_address = metrics_address
        self.directory: str | None = None
        self.server: Any = None
        self.files_lock = threading.Lock()
        self.last_tick = time.monotonic()
        self.short_since: float | None = None
        self.deaths: collections.deque[float] = collections.deque(maxlen=DEATHS)
        self.state: QueueState | None = None
        self.db_checked = 0.0
        self.db_error: str | None = None
        self.wanted = 0.0

    # Life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Install the watchers (before any worker is forked) and start the HTTP server."""
        outcomes.unwatch_all()
        tally = rollups.RollupTally(self.conf.database)
        outcomes.watch(tally, tally.flush)
        if self.conf.json_logs:
            outcomes.watch(OutcomeLog())
        if self.metrics_address is None:
            return
        from ..metrics import prometheus
        from ..metrics.server import MetricsServer

        self.directory = tempfile.mkdtemp(prefix="sqlqueue-metrics-")
        prometheus.use_directory(self.directory)
        outcomes.watch(prometheus.PrometheusWatcher())
        host, port = self.metrics_address
        try:
            self.server = MetricsServer(host, port, self)
        except Exception:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self.server.start()
        logger.info("Metrics on http://%s:%d/metrics, health on /healthz", *self.server.address)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        try:
            outcomes.flush()
        finally:
            outcomes.unwatch_all()
            if self.directory is not None:
                shutil.rmtree(self.directory, ignore_errors=True)

    # The supervisor's main loop -------------------------------------------------------------

    def tick(self) -> None:
        now = time.monotonic()
        self.last_tick = now
        expected = self.supervisor.size - self.supervisor.finished_slots
        if len(self.supervisor.children) < expected:
            self.short_since = self.short_since or now
        else:
            self.short_since = None
        if self.server is None or now - self.db_checked < STATE_INTERVAL:
            return
        if self.db_checked and now - self.wanted > WANTED_FOR:
            return
        self.db_checked = now
        try:
            self.state = read_state(self.conf.database)
            self.db_error = None
        except DatabaseError as exc:
            self.db_error = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            connections[self.conf.database].close()

    def worker_exited(self, pid: int, code: int) -> None:
        """Note a worker that died; fold its metric files into the archive (so a supervisor
        that recycles workers keeps a bounded number of files)."""
        if code not in (0, EXIT_RECYCLE):
            self.deaths.append(time.monotonic())
        if self.directory is None:
            return
        from ..metrics.prometheus import absorb

        with self.files_lock:
            try:
                absorb(self.directory, pid)
            except OSError as exc:
                logger.warning("Could not fold the metrics of process %d: %s", pid, exc)

    # Endpoints (called from the HTTP server's threads) -------------------------------------

    def render_metrics(self) -> tuple[bytes, str]:
        from ..metrics.prometheus import StateCollector, render

        self.wanted = time.monotonic()
        collector = StateCollector(lambda: self.state, self.worker_states)
        with self.files_lock:
            return render([collector], self.directory)

    def worker_states(self) -> dict[str, int]:
        """Worker processes busy or idle, and their slots busy or free (the slots gauge)."""
        states = {"busy": 0, "idle": 0, SLOTS_BUSY: 0, SLOTS_FREE: 0}
        for child in list(self.supervisor.children.values()):
            running = len(child.current_job.ids())
            states["busy" if running else "idle"] += 1
            states[SLOTS_BUSY] += running
            states[SLOTS_FREE] += len(child.current_job) - running
        return states

    def health(self) -> tuple[bool, str]:
        """(healthy, one line saying why)."""
        self.wanted = time.monotonic()
        now = time.monotonic()
        supervisor = self.supervisor
        if supervisor.failure is not None:
            return False, f"the supervisor's loop failed ({supervisor.failure}); exiting"
        if supervisor.stop_deadline is not None:
            return False, "shutting down"
        trouble = supervisor.chores.trouble()
        if trouble is not None:
            return False, trouble
        stalled = now - self.last_tick
        if stalled > STALL_SECONDS:
            return False, f"the supervisor's loop has not run for {stalled:.0f} s"
        if len(self.deaths) == DEATHS and now - self.deaths[0] < DEATH_WINDOW:
            return False, (
                f"{DEATHS} workers died in the last {now - self.deaths[0]:.0f} s; "
                f"{len(supervisor.children)} running (see the log)"
            )
        if self.short_since is not None and now - self.short_since > SHORT_SECONDS:
            expected = supervisor.size - supervisor.finished_slots
            return False, (
                f"{len(supervisor.children)} of {expected} workers running for "
                f"{now - self.short_since:.0f} s (they keep dying; see the log)"
            )
        if self.db_error is not None:
            return False, f"the database does not answer: {self.db_error}"
        if self.state is None:
            return True, f"ok: {len(supervisor.children)} workers; database not checked yet"
        age = (timezone.now() - self.state.taken_at).total_seconds()
        return True, (
            f"ok: {len(supervisor.children)} workers, pid {os.getpid()}; "
            f"database answered {age:.0f} s ago"
        )
