"""One step of a cluster run: N hosts on the private PostgreSQL, faults, drain, evidence,
and a timed drain of a no-op backlog for the throughput figures.

Built on the chaos harness: the same producers (in the app namespace), job mix, worker
SIGKILLs, fleet of supervisors and evidence; what changes is where the supervisors run (one
per host namespace) and the faults (a host cut off, the database restarted).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..chaos.fleet import ROOT
from ..chaos.harness import Harness, Options
from . import plan
from .net import DB_ADDRESS, Network
from .pgserver import PORT, PrivatePostgres

DB_NAME = "cluster_sqlqueue"
#: What a worker logs when fencing refused its result or failure (worker.py).
FENCED = re.compile(r"but its lease was lost")
#: First port of the delay relay (host i listens on RELAY_BASE + i).
RELAY_BASE = 56000


@dataclass
class ClusterOptions:
    hosts: int
    seconds: float
    partition: bool = False
    restart_db: bool = False
    cut_seconds: float | None = None
    latency_ms: float = 0.0
    loss_pct: float = 0.0
    drain_jobs: int = 2000
    lease: float = 4.0


class ClusterHarness(Harness):
    def __init__(
        self,
        options: Options,
        cluster: ClusterOptions,
        network: Network,
        server: PrivatePostgres,
        relay: bool,
        run_dir: Path,
        say: Callable[[str], None],
    ) -> None:
        super().__init__(options, run_dir, say)
        self.cluster = cluster
        self.network = network
        self.server = server
        self.relay = relay
        self.faults = plan.plan_faults(
            options.seconds,
            cluster.hosts,
            partition=cluster.partition,
            restart_db=cluster.restart_db,
            lease=cluster.lease,
            cut_seconds=cluster.cut_seconds,
        )
        # Producers run in the app namespace and reach the server over the bridge.
        self.env.update(
            {
                "DJANGO_SETTINGS_MODULE": "benchmarks.cluster.settings",
                "CLUSTER_PG_HOST": DB_ADDRESS,
                "CLUSTER_PG_PORT": str(PORT),
            }
        )

    # Where things run -----------------------------------------------------------------------

    def slots(self) -> list[str]:
        return [f"h{host}" for host in range(1, self.cluster.hosts + 1)]

    def host_env(self, host: int) -> dict[str, str]:
        port = plan.relay_port(RELAY_BASE, host) if self.relay else PORT
        return {**self.env, "CLUSTER_PG_PORT": str(port)}

    def start_supervisor(self, slot: str) -> Any:
        host = int(slot[1:])
        supervisor = self.fleet.start(
            slot,
            "--grace-period",
            str(self.options.grace),
            prefix=self.network.host_prefix(host),
            env=self.host_env(host),
        )
        self.event("start_supervisor", supervisor=supervisor.name, pid=supervisor.pid, host=host)
        return supervisor

    def producer_command(self, index: int, until: float, run_id: str) -> list[str]:
        command = super().producer_command(index, until, run_id)
        return [*self.network.exec_prefix(self.network.app_ns), *command]

    def setup_database(self) -> None:
        from django.core.management import call_command
        from django.db import connections

        connections.close_all()
        with self.server.admin() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {DB_NAME}")
        call_command("migrate", verbosity=0)
        connections.close_all()

    # Faults ---------------------------------------------------------------------------------

    def held_by_host(self) -> dict[int, list[int]]:
        """Running jobs per host, read from the lease owners (worker ids start with the
        host's name)."""
        from django.db import DatabaseError, connection

        from django_sqlqueue.models import Job

        held: dict[int, list[int]] = {}
        try:
            rows = list(Job.objects.filter(status="running").values_list("id", "lease_owner"))
        except DatabaseError:
            connection.close()
            return held
        for host in range(1, self.cluster.hosts + 1):
            name = self.network.hostname(host)
            held[host] = [job for job, owner in rows if owner.split(":", 1)[0] == name]
        return held

    def cut(self, seconds: float) -> None:
        """Cut off the busiest host (waiting up to 5 s for one to hold a job); the chaos loop
        goes on (kills elsewhere, watching) and heals it after `seconds`."""
        deadline = time.time() + 5
        held = self.held_by_host()
        while not any(held.values()) and time.time() < deadline:
            time.sleep(0.1)
            held = self.held_by_host()
        host = plan.pick_cut_host({h: len(j) for h, j in held.items()}, self.cluster.hosts)
        start = time.time()
        self.network.cut(host)
        record = self.event(
            "cut",
            host=host,
            hostname=self.network.hostname(host),
            start=start,
            end=start + seconds,
            held=held.get(host, []),
        )
        self.say(f"  cut host {host} off for {seconds:g} s; it held jobs {record['held']}")
        self.heal_at = (start + seconds, host, record)

    def heal_if_due(self) -> None:
        due = getattr(self, "heal_at", None)
        if due and time.time() >= due[0]:
            _, host, record = due
            self.network.heal(host)
            record["end"] = time.time()
            self.heal_at = None
            self.say(f"  host {host} is back after {record['end'] - record['start']:.1f} s")

    def database_fault(self) -> None:
        from django.db import connections

        start = time.time()
        connections.close_all()
        seconds = self.server.restart()
        self.event("db_fault", mode="restart", start=start, end=time.time(), cut=-1)
        self.say(f"  private PostgreSQL restarted, answering again after {seconds:.1f} s")

    def schedule(self, start: float) -> list[tuple[float, str, Callable[[], None]]]:
        actions: list[tuple[float, str, Callable[[], None]]] = []
        for fault in self.faults:
            if fault.kind == "cut":
                length = fault.seconds
                actions.append((start + fault.at, "cut", lambda s=length: self.cut(s)))
            else:
                actions.append((start + fault.at, "restart", self.database_fault))
        return actions

    def watch_supervisors(self) -> None:
        self.heal_if_due()
        super().watch_supervisors()

    def worker_candidates(self) -> tuple[dict[int, Any], set[int]]:
        # A cut host's workers are left alone: a kill there would blur whose fault a double
        # execution is (and its supervisor could not report the death until the link is back).
        pids, busy = super().worker_candidates()
        cut = {f"h{host}" for host in self.network.cut_hosts}
        pids = {pid: s for pid, s in pids.items() if s.slot not in cut}
        return pids, busy & set(pids)

    def run(self) -> Any:
        """The chaos run; then each cut notes how many zombie results its host's workers
        logged as discarded by fencing."""
        from ..chaos.evidence import save_evidence

        evidence = super().run()
        for event in (e for e in self.events if e["type"] == "cut"):
            logs = [s.log for s in self.fleet.supervisors if s.slot == f"h{event['host']}"]
            event["fenced"] = sum(
                len(FENCED.findall(log.read_text(errors="replace"))) for log in logs
            )
        save_evidence(evidence, self.run_dir / "evidence.json")
        return evidence

    # The drain for the figures --------------------------------------------------------------

    def registered_workers(self) -> int:
        from django_sqlqueue.models import Worker

        return Worker.objects.count()

    def unfinished_noops(self) -> int:
        from django_sqlqueue.models import Job

        return Job.objects.filter(name="cluster.noop", status__in=["pending", "running"]).count()

    def measure_drain(self) -> dict[str, Any]:
        """Start every host's supervisor, wait for all workers to register, then enqueue a
        backlog of no-op jobs in one transaction and time it until every one is done."""
        from django.db import connections, transaction

        from django_sqlqueue import registry
        from django_sqlqueue.models import Worker

        jobs = self.cluster.drain_jobs
        Worker.objects.all().delete()  # rows of workers killed earlier would count as ready
        for slot in self.slots():
            self.start_supervisor(slot)
        wanted = self.cluster.hosts * self.options.workers
        deadline = time.monotonic() + 60
        while self.registered_workers() < wanted and time.monotonic() < deadline:
            time.sleep(0.2)
        noop = registry.get("cluster.noop")
        cpu_before = self.server.cpu_seconds()
        started = time.monotonic()
        with transaction.atomic():
            noop.enqueue_many([{}] * jobs)
        deadline = started + self.options.drain_timeout
        left = jobs
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = self.unfinished_noops()
        seconds = time.monotonic() - started
        cpu = self.server.cpu_seconds() - cpu_before
        self.fleet.stop_all(timeout=30)
        tables = self.table_statistics()
        connections.close_all()
        return {
            "hosts": self.cluster.hosts,
            "workers": wanted,
            "latency_ms": self.cluster.latency_ms,
            "loss_pct": self.cluster.loss_pct,
            "jobs": jobs,
            "drained": left == 0,
            "seconds": round(seconds, 3),
            "jobs_per_second": round((jobs - left) / seconds, 1),
            "db_cpu_seconds": round(cpu, 2),
            "db_cpu_cores": round(cpu / seconds, 2),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "tables": tables,
        }

    def table_statistics(self) -> dict[str, dict[str, int]]:
        """Updates, HOT updates and dead rows of the queue's tables over the whole step: what
        fillfactor and autovacuum settings act on (docs/deployment.md)."""
        from django.db import connection

        time.sleep(1)  # backends flush their statistics at most once a second
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup, "
                "autovacuum_count FROM pg_stat_user_tables WHERE relname LIKE 'django_sqlqueue%'"
            )
            names = ("inserts", "updates", "hot_updates", "deletes", "dead_rows", "autovacuums")
            return {row[0]: dict(zip(names, row[1:], strict=True)) for row in cursor.fetchall()}


def start_relay(
    network: Network, server: PrivatePostgres, hosts: int, latency_ms: float, log: Path
) -> subprocess.Popen[bytes]:
    """The delay relay in the db namespace: one port per host, PostgreSQL's socket behind."""
    listen = [
        f"--listen={DB_ADDRESS}:{plan.relay_port(RELAY_BASE, h)}" for h in range(1, hosts + 1)
    ]
    target = server.sockets / f".s.PGSQL.{PORT}"
    process = subprocess.Popen(
        [
            *network.exec_prefix(network.db_ns),
            sys.executable,
            "-m",
            "benchmarks.cluster.relay",
            *listen,
            f"--target={target}",
            f"--delay-ms={latency_ms / 2:g}",
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != b"relay ready":
        process.kill()
        raise RuntimeError(f"the delay relay did not start; see {log}")
    return process
