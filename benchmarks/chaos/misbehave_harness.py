"""A `--misbehave` run: the normal job mix, and misbehaving handlers among it, on two
supervisors that nobody kills.

The misbehaviour is the chaos: producer 0 enqueues the misbehaving jobs of misbehave.py in
turn (MISBEHAVE_RATE a second), the others the normal mix. No worker or supervisor is killed
and no database fault is injected, so every normal job must complete exactly once. Twice a
second the harness counts each supervisor's live workers (its child processes that have a
worker row): no slot may stay empty. At the end both supervisors get SIGTERM.
"""

from __future__ import annotations

import time
from typing import Any

from .fleet import children_of
from .harness import Harness
from .misbehave import B_MAX_JOBS, SLOT_GAP_SECONDS

#: Misbehaving jobs enqueued per second (by producer 0).
MISBEHAVE_RATE = 1.0
#: Seconds between two counts of live workers.
SLOT_SAMPLE_SECONDS = 0.5


class MisbehaveHarness(Harness):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        grace = ("--grace-period", str(self.options.grace))
        self.slot_args = {"A": grace, "B": (*grace, "--max-jobs", str(B_MAX_JOBS))}
        self.last_sample = 0.0

    def producer_command(self, index: int, until: float, run_id: str) -> list[str]:
        command = super().producer_command(index, until, run_id)
        if index == 0:
            command = [c for c in command if not c.startswith("--rate=")]
            command += [f"--rate={MISBEHAVE_RATE}", "--misbehave"]
        return command

    def live_workers(self) -> dict[str, list[int]] | None:
        """Per live supervisor, its children that have a worker row (None: no database)."""
        from django.db import DatabaseError, connection

        from django_sqlqueue.models import Worker

        try:
            registered = set(Worker.objects.values_list("pid", flat=True))
        except DatabaseError:
            connection.close()
            return None
        return {s.name: sorted(set(children_of(s.pid)) & registered) for s in self.fleet.live()}

    def sample_slots(self, force: bool = False) -> None:
        now = time.time()
        if not force and now - self.last_sample < SLOT_SAMPLE_SECONDS:
            return
        self.last_sample = now
        live = self.live_workers()
        if live is not None:
            self.event("slots", counts={name: len(pids) for name, pids in live.items()})

    def watch_supervisors(self) -> None:
        super().watch_supervisors()
        self.sample_slots()

    def chaos(self, start: float, until: float) -> None:
        """No kills, no faults: watch the supervisors and count their workers."""
        last_report = start
        while time.time() < until:
            self.watch_supervisors()
            self.snapshot_workers()
            if time.time() - last_report >= 15:
                last_report = time.time()
                self.say(
                    f"  {last_report - start:5.0f} s: {self.unfinished_jobs()} jobs unfinished"
                )
            time.sleep(0.1)

    def drain(self) -> tuple[bool, float]:
        drained, seconds = super().drain()
        # The last count, before the final SIGTERM: a worker replaced a moment ago may still
        # be starting, so wait for full slots as long as a gap may last.
        deadline = time.monotonic() + SLOT_GAP_SECONDS
        while True:
            live = self.live_workers()
            full = live is not None and all(len(p) == self.options.workers for p in live.values())
            if full or time.monotonic() > deadline:
                break
            time.sleep(SLOT_SAMPLE_SECONDS)
        self.sample_slots(force=True)
        return drained, seconds
