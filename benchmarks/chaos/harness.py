"""One chaos run on one database: set up, disturb, drain, collect the evidence.

The timeline of a run of S seconds, cut into cycles of about two minutes:
- producers enqueue the job mix for S seconds;
- every few seconds, SIGKILL of a random worker process (mostly busy ones; half of them
  aimed at a worker inside an atomic job's transaction or holding a claimed batch, aim.py);
- in each cycle, at 25%: SIGKILL of supervisor A's whole process group, a new A a second
  later; at 50%: SIGTERM of supervisor B and a new B at once; at 75% (PostgreSQL, MariaDB):
  a database fault — every connection to the chaos database cut twice a second apart, or,
  with --restart-db, a restart of the server; on SQLite, the write lock held for 3 s;
- then the drain: supervisors keep working until every job is finished and every batch has
  stored its callback, and stop on SIGTERM.

With --concurrency C > 1 every supervisor runs `runworkers --concurrency C`, the producers add
io jobs (mix.py: IO_SHARE of the jobs wait about long enough to keep half the slots busy), and
the kills aimed at "a batch" go to the worker holding the most jobs: kills meet several jobs
in flight in one process, each of which may run again once.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import aim, config, dbadmin, ledger, mix
from .evidence import (
    Evidence,
    count_log_patterns,
    load_batches,
    load_database,
    load_dependencies,
    load_units,
    save_evidence,
)
from .fleet import ROOT, Fleet, Supervisor

#: Seconds between the two cuts of a connection fault.
CUT_INTERVAL = 1.0
#: Seconds between a supervisor's SIGKILL and the start of its replacement.
RESTART_AFTER_KILL = 1.0
CYCLE_SECONDS = 120.0
#: How long the SQLite "fault" holds the write lock (well under SQLITE_BUSY_TIMEOUT).
SQLITE_LOCK_SECONDS = 3.0
#: Supervisor B recycles its workers after this many jobs (exercises --max-jobs under fire).
B_MAX_JOBS = 250


@dataclass
class Options:
    vendor: str
    seconds: float
    producers: int = 3
    rate: float = 8.0
    workers: int = 3
    seed: int = 0
    db_fault: str = "terminate-connections"
    drain_timeout: float = 120.0
    kill_min: float = 2.0
    kill_max: float = 5.0
    grace: float = 2.0
    #: A `--misbehave` run (misbehave_harness.py): misbehaving handlers, no kills.
    misbehave: bool = False
    #: Jobs each worker process runs at once (`runworkers --concurrency`).
    concurrency: int = 1


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = config.SETTINGS_MODULE
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


class Harness:
    def __init__(self, options: Options, run_dir: Path, say: Callable[[str], None]) -> None:
        self.options = options
        self.run_dir = run_dir
        self.say = say
        self.rng = random.Random(options.seed)
        self.env = child_env()
        self.events: list[dict[str, Any]] = []
        self.fleet = Fleet(options.workers, run_dir, self.env, options.concurrency)
        self.producers: list[subprocess.Popen[bytes]] = []
        self.worker_ids: dict[int, str] = {}
        self.slot_args = {
            "A": ("--grace-period", str(options.grace)),
            "B": ("--grace-period", str(options.grace), "--max-jobs", str(B_MAX_JOBS)),
        }

    # Events ---------------------------------------------------------------------------

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        record = {"type": kind, "t": time.time(), **fields}
        self.events.append(record)
        return record

    # Set-up -----------------------------------------------------------------------------

    def setup_database(self) -> None:
        from django.core.management import call_command
        from django.db import connections

        dbadmin.create_database()
        call_command("migrate", verbosity=0)
        connections.close_all()

    def slots(self) -> list[str]:
        """The supervisors a run starts with: A (killed) and B (stopped, --max-jobs)."""
        return ["A", "B"]

    def start_supervisor(self, slot: str) -> Supervisor:
        supervisor = self.fleet.start(slot, *self.slot_args[slot])
        self.event("start_supervisor", supervisor=supervisor.name, pid=supervisor.pid)
        return supervisor

    def io_jobs(self) -> tuple[float, tuple[float, float]]:
        """(share of io jobs, range of their waits): none unless --concurrency C > 1."""
        options = self.options
        if options.concurrency <= 1:
            return 0.0, (0.0, 0.0)
        slots = len(self.slots()) * options.workers * options.concurrency
        return mix.IO_SHARE, mix.io_seconds(slots, options.producers * options.rate)

    def producer_command(self, index: int, until: float, run_id: str) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "benchmarks.chaos.producer",
            f"--index={index}",
            f"--until={until}",
            f"--rate={self.options.rate}",
            f"--seed={self.options.seed}",
            f"--run={run_id}",
            f"--out={self.run_dir / f'producer-{index}.jsonl'}",
        ]
        share, (shortest, longest) = self.io_jobs()
        if share:
            command += [f"--io-share={share}", "--io-seconds", str(shortest), str(longest)]
        return command

    def start_producers(self, until: float, run_id: str) -> None:
        for index in range(self.options.producers):
            log = (self.run_dir / f"producer-{index}.log").open("wb")
            self.producers.append(
                subprocess.Popen(
                    self.producer_command(index, until, run_id),
                    cwd=ROOT,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    # Faults -------------------------------------------------------------------------------

    def snapshot_workers(self) -> set[int]:
        """Note the worker id of every registered worker pid (a job's history names workers
        by id); return the pids of those running a job right now."""
        from django.db import DatabaseError, connection

        from django_sqlqueue.models import Worker

        try:
            rows = list(Worker.objects.values_list("pid", "id", "current_job_id"))
        except DatabaseError:
            connection.close()
            return set()
        for pid, worker_id, _ in rows:
            self.worker_ids[pid] = worker_id
        return {pid for pid, _, job in rows if job}

    def worker_candidates(self) -> tuple[dict[int, Supervisor], set[int]]:
        """Worker pids of live supervisors, and those of them running a job right now."""
        pids = self.fleet.worker_pids()
        busy = self.snapshot_workers() & set(pids)
        return pids, busy

    def ids_of(self, pids: list[int]) -> list[str]:
        return [self.worker_ids[pid] for pid in pids if pid in self.worker_ids]

    def kill_worker(self) -> None:
        pids, busy = self.worker_candidates()
        if not pids:
            return
        target, victims = self.aim(set(pids))
        pool = sorted(busy) if busy and self.rng.random() < 0.7 else sorted(pids)
        pid = self.rng.choice(sorted(victims) or pool)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
            self.event(
                "kill_worker",
                pids=[pid],
                worker_ids=self.ids_of([pid]),
                supervisor=pids[pid].name,
                busy=pid in busy or bool(victims),
                aimed_at=target if victims else None,
            )

    def aim(self, pids: set[int]) -> tuple[str | None, set[int]]:
        """Maybe pick a target kind for this kill (aim.py), and the workers that are one."""
        target = aim.choose(self.rng.random(), self.target_still_missing())
        if target == "atomic":
            return target, aim.wait_for(
                lambda: aim.in_atomic_job(pids), aim.AIM_WAIT_SECONDS[target]
            )
        if target == "batch":
            pid_of = {worker_id: pid for pid, worker_id in self.worker_ids.items()}
            most = self.options.concurrency > 1
            found = aim.wait_for(
                lambda: aim.holding_a_batch(pids, pid_of, most), aim.AIM_WAIT_SECONDS[target]
            )
            return target, found
        return None, set()

    def target_still_missing(self) -> str | None:
        """A target the run's checks ask a kill to have met, and none has yet: a worker
        inside an atomic job; under --concurrency, one holding two or more jobs."""
        killed = {pid for e in self.events if e["type"].startswith("kill_") for pid in e["pids"]}
        if not aim.atomic_kill_landed(killed):
            return "atomic"
        met_a_batch = any(e.get("aimed_at") == "batch" for e in self.events)
        if self.options.concurrency > 1 and not met_a_batch:
            return "batch"
        return None

    def kill_supervisor(self, slot: str) -> None:
        for supervisor in self.fleet.live():
            if supervisor.name.startswith(slot):
                self.snapshot_workers()
                pids = self.fleet.kill(supervisor)
                self.event(
                    "kill_supervisor",
                    supervisor=supervisor.name,
                    pids=pids,
                    worker_ids=self.ids_of(pids),
                )
                self.say(f"  SIGKILL supervisor {supervisor.name} and workers {pids}")

    def terminate_supervisor(self, slot: str) -> None:
        for supervisor in self.fleet.live():
            if supervisor.name.startswith(slot):
                self.fleet.terminate(supervisor)
                self.event("term_supervisor", supervisor=supervisor.name)
                self.say(f"  SIGTERM supervisor {supervisor.name}")
        self.start_supervisor(slot)

    def database_fault(self) -> None:
        mode = self.options.db_fault
        start = time.time()
        if self.options.vendor == "sqlite":
            mode, cut = "write-lock", 0
            dbadmin.hold_write_lock(SQLITE_LOCK_SECONDS)
            self.say(f"  held the SQLite write lock for {SQLITE_LOCK_SECONDS:g} s")
        elif mode == "restart":
            seconds = dbadmin.restart_server()
            cut = -1
            self.say(f"  database server restarted, answering again after {seconds:.1f} s")
        else:
            cut = dbadmin.terminate_connections()
            time.sleep(CUT_INTERVAL)
            cut += dbadmin.terminate_connections()
            self.say(f"  cut {cut} connections to the chaos database")
        self.event("db_fault", mode=mode, start=start, end=time.time(), cut=cut)

    def schedule(self, start: float) -> list[tuple[float, str, Callable[[], None]]]:
        seconds = self.options.seconds
        cycles = max(1, round(seconds / CYCLE_SECONDS))
        length = seconds / cycles
        plan: list[tuple[float, str, Callable[[], None]]] = []
        for cycle in range(cycles):
            base = start + cycle * length
            plan.append((base + 0.25 * length, "kill A", lambda: self.kill_supervisor("A")))
            plan.append(
                (
                    base + 0.25 * length + RESTART_AFTER_KILL,
                    "restart A",
                    lambda: self.start_supervisor("A"),
                )
            )
            plan.append((base + 0.5 * length, "stop B", lambda: self.terminate_supervisor("B")))
            if self.options.db_fault != "none":
                plan.append((base + 0.75 * length, "db fault", self.database_fault))
        return sorted(plan, key=lambda item: item[0])

    # Watching -------------------------------------------------------------------------------

    def watch_supervisors(self) -> None:
        """Record the exits of stopped supervisors; restart any that died on its own."""
        for supervisor in self.fleet.supervisors:
            if supervisor.alive() or any(
                e["type"] == "supervisor_exit" and e["supervisor"] == supervisor.name
                for e in self.events
            ):
                continue
            how = supervisor.ended_by or "crash"
            ended = supervisor.ended_at or supervisor.exited_at or time.time()
            self.event(
                "supervisor_exit",
                supervisor=supervisor.name,
                how=how,
                code=supervisor.exit_code,
                seconds=(supervisor.exited_at or time.time()) - ended,
            )
            if how == "crash":
                self.say(f"  supervisor {supervisor.name} exited by itself: {supervisor.exit_code}")
                self.start_supervisor(supervisor.slot)

    def unfinished_jobs(self) -> int | None:
        from django.db import DatabaseError, connection

        from django_sqlqueue.models import Job
        from django_sqlqueue.states import FINISHED

        try:
            return Job.objects.exclude(status__in=list(FINISHED)).count()
        except DatabaseError:
            connection.close()
            return None

    def unfinished_batches(self) -> int | None:
        """Closed batches not finished yet: their callbacks are still to be stored."""
        from django.db import DatabaseError, connection

        from django_sqlqueue.models import JobBatch

        try:
            return JobBatch.objects.filter(
                closed_at__isnull=False, finished_at__isnull=True
            ).count()
        except DatabaseError:
            connection.close()
            return None

    # The run -------------------------------------------------------------------------------

    def chaos(self, start: float, until: float) -> None:
        plan = self.schedule(start)
        next_kill = start + self.rng.uniform(self.options.kill_min, self.options.kill_max)
        last_report = last_snapshot = start
        while time.time() < until:
            now = time.time()
            while plan and plan[0][0] <= now:
                _, _, action = plan.pop(0)
                action()
            if now >= next_kill:
                self.kill_worker()
                next_kill = now + self.rng.uniform(self.options.kill_min, self.options.kill_max)
            self.watch_supervisors()
            if now - last_snapshot >= 1:
                last_snapshot = now
                self.snapshot_workers()
            if now - last_report >= 15:
                last_report = now
                kills = sum(1 for e in self.events if e["type"] == "kill_worker")
                self.say(
                    f"  {now - start:5.0f} s: {kills} workers killed, "
                    f"{self.unfinished_jobs()} jobs unfinished"
                )
            time.sleep(0.1)

    def wait_producers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for producer in self.producers:
            try:
                producer.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                producer.kill()
                producer.wait()
                self.event("producer_stuck", pid=producer.pid)
        for producer in self.producers:
            if producer.returncode:
                self.event("producer_failed", pid=producer.pid, code=producer.returncode)

    def drain(self) -> tuple[bool, float]:
        started = time.monotonic()
        deadline = started + self.options.drain_timeout
        while time.monotonic() < deadline:
            self.watch_supervisors()
            # Batches first: once none is left to finish, no callback can be stored after
            # the count of jobs that follows (the producers are done).
            if self.unfinished_batches() == 0 and self.unfinished_jobs() == 0:
                return True, time.monotonic() - started
            time.sleep(0.5)
        return False, time.monotonic() - started

    def run(self) -> Evidence:
        from django.db import connections

        from django_sqlqueue.runtime.supervisor import INTERRUPT_GRACE

        options = self.options
        ledger.clear()
        self.setup_database()
        run_id = f"r{options.seed}"
        for slot in self.slots():
            self.start_supervisor(slot)
        start = time.time()
        until = start + options.seconds
        self.start_producers(until, run_id)
        share, (shortest, longest) = self.io_jobs()
        if share:
            self.say(f"  io jobs: {share:.0%} of the mix, each waiting {shortest:g}-{longest:g} s")
        self.say(f"  chaos for {options.seconds:g} s")
        try:
            self.chaos(start, until)
            self.wait_producers(timeout=60)
            self.say("  producers done; draining")
            drained, drain_seconds = self.drain()
            stuck = self.fleet.stop_all(timeout=options.grace + INTERRUPT_GRACE + 15)
            for supervisor in stuck:
                self.event("supervisor_stuck", supervisor=supervisor.name)
            self.watch_supervisors()
        finally:
            for producer in self.producers:
                if producer.poll() is None:
                    producer.kill()
            self.fleet.stop_all(timeout=5)
        connections.close_all()
        collected = time.time()
        jobs, executions, orders, counter = load_database()
        dependencies = load_dependencies()
        batches = load_batches()
        connections.close_all()
        logs = [s.log for s in self.fleet.supervisors]
        logs += [self.run_dir / f"producer-{i}.log" for i in range(options.producers)]
        evidence = Evidence(
            vendor=options.vendor,
            seconds=options.seconds,
            lease=config.lease_seconds(),
            jobs=jobs,
            executions=executions,
            orders=orders,
            units=load_units(
                [self.run_dir / f"producer-{i}.jsonl" for i in range(options.producers)]
            ),
            events=self.events,
            log_counts=count_log_patterns(logs),
            drained=drained,
            drain_seconds=drain_seconds,
            counter=counter,
            concurrency=options.concurrency,
            dependencies=dependencies,
            collected=collected,
            batches=batches,
        )
        save_evidence(evidence, self.run_dir / "evidence.json")
        (self.run_dir / "options.json").write_text(json.dumps(asdict(options), indent=1))
        return evidence
