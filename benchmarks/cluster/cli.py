"""`python -m benchmarks.cluster`: many hosts on one private PostgreSQL, across network faults.

    python -m benchmarks.cluster --hosts 3 --seconds 60 --partition --restart-db  # CI's run
    python -m benchmarks.cluster --hosts 1,2,4 --seconds 60 --latency 20 --json out.json
    python -m benchmarks.cluster --hosts 2 --seconds 120 --partition --loss 1

Needs root (network namespaces) and PostgreSQL's server programs. Exits 0 when every check
passed, 1 when one failed, 2 when the harness itself broke (no namespaces, say). Logs,
producer records and evidence stay in --out; namespaces, links, qdiscs, the relay and the
private server are removed on every exit, Ctrl+C included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from . import net, plan

#: The private server's settings: defaults but for room for every host's connections.
PG_SETTINGS = {"max_connections": 200}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cluster",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--hosts", default="2", help="host count, or counts run in turn: 1,2,4")
    parser.add_argument("--seconds", type=float, default=60.0, help="producers' time per step")
    parser.add_argument("--partition", action="store_true", help="cut one host off mid-run")
    parser.add_argument("--cut-seconds", type=float, default=None, help="default: 3 leases")
    parser.add_argument("--restart-db", action="store_true", help="restart PostgreSQL mid-run")
    parser.add_argument("--latency", type=float, default=0.0, metavar="MS", help="added RTT")
    parser.add_argument("--loss", type=float, default=0.0, metavar="PCT", help="each way")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the summary here too")
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=8.0, help="jobs/s per producer")
    parser.add_argument("--lease", type=float, default=4.0, help="LEASE_SECONDS of the run")
    parser.add_argument("--no-kills", action="store_true", help="no worker SIGKILLs")
    parser.add_argument("--drain-jobs", type=int, default=2000, help="backlog of the drain")
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("/tmp/cluster_sqlqueue"))
    parser.add_argument("-v", "--verbose", action="store_true", help="examples for every check")
    args = parser.parse_args(argv)
    try:
        args.host_counts = plan.parse_hosts(args.hosts)
        for hosts in args.host_counts:
            plan.plan_faults(
                args.seconds,
                hosts,
                partition=args.partition,
                restart_db=args.restart_db,
                lease=args.lease,
                cut_seconds=args.cut_seconds,
            )
    except ValueError as exc:
        parser.error(str(exc))
    if not 0 <= args.loss < 100 or args.latency < 0:
        parser.error("--loss is a percentage below 100 and --latency is not negative")
    return args


def say(line: str) -> None:
    print(line, flush=True)


def _stop_on_signal(signum: int, frame: Any) -> None:
    """Ctrl+C, SIGTERM and SIGHUP end the run through every cleanup (SIGINT too, as a
    background job starts with it ignored)."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def remove_stale_workdirs() -> list[str]:
    """Private servers' directories left by runs whose harness is gone (their servers died
    with their namespace)."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob("sqlqueue-cluster-*-*"):
        pid = path.name.split("-")[2]
        if pid.isdigit() and not net.pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    return removed


class Run:
    """The machinery of a run, made once for all its steps and removed whatever happens."""

    def __init__(self, args: argparse.Namespace, run_dir: Path) -> None:
        from .pgserver import PrivatePostgres

        self.args = args
        self.run_dir = run_dir
        self.network = net.Network(max(args.host_counts))
        workdir = Path(tempfile.mkdtemp(prefix=f"sqlqueue-cluster-{os.getpid()}-"))
        self.server = PrivatePostgres(
            workdir, self.network.exec_prefix(self.network.db_ns), net.DB_ADDRESS
        )
        self.relay: Any = None
        self.mode = "none"

    def __enter__(self) -> Run:
        try:
            self._build()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _build(self) -> None:
        from .harness import start_relay

        args = self.args
        removed = net.remove_stale() + remove_stale_workdirs()
        if removed:
            say(f"removed namespaces of runs that are gone: {', '.join(removed)}")
        self.network.create()
        netem = bool(args.latency or args.loss) and net.netem_available()
        if args.latency or args.loss:
            kernel_free = [("relay", args.latency), ("nftables", args.loss)]
            self.mode = "netem" if netem else "+".join(name for name, on in kernel_free if on)
            for host in range(1, self.network.hosts + 1):
                self.network.shape(host, args.latency, args.loss, netem)
        self.server.init(PG_SETTINGS)
        self.server.start()
        if args.latency and not netem:
            log = self.run_dir / "relay.log"
            self.relay = start_relay(
                self.network, self.server, self.network.hosts, args.latency, log
            )

    def __exit__(self, *exc: object) -> None:
        if self.relay is not None and self.relay.poll() is None:
            self.relay.kill()
            self.relay.wait()
        self.server.cleanup()
        self.network.destroy()


def run_step(run: Run, hosts: int, seed: int) -> dict[str, Any]:
    from django_sqlqueue.runtime.supervisor import INTERRUPT_GRACE

    from ..chaos.harness import Options
    from ..chaos.report import print_report
    from .checks import numbers, run_checks
    from .harness import ClusterHarness, ClusterOptions
    from .summary import step_summary

    args = run.args
    step_dir = run.run_dir / f"hosts-{hosts}"
    step_dir.mkdir(parents=True, exist_ok=True)
    kill_every = (float("inf"), float("inf")) if args.no_kills else (6.0, 12.0)
    options = Options(
        vendor="postgres",
        seconds=args.seconds,
        producers=args.producers,
        rate=args.rate,
        workers=2,
        seed=seed,
        db_fault="none",
        drain_timeout=args.drain_timeout,
        kill_min=kill_every[0],
        kill_max=kill_every[1],
    )
    cluster = ClusterOptions(
        hosts=hosts,
        seconds=args.seconds,
        partition=args.partition,
        restart_db=args.restart_db,
        cut_seconds=args.cut_seconds,
        latency_ms=args.latency,
        loss_pct=args.loss,
        drain_jobs=args.drain_jobs,
        lease=args.lease,
    )
    harness = ClusterHarness(
        options, cluster, run.network, run.server, run.relay is not None, step_dir, say
    )
    say(
        f"step: {hosts} host(s) x runworkers -n 2, {args.seconds:g} s, faults "
        f"{[f'{f.kind} at {f.at:g} s' for f in harness.faults] or 'none'}, files {step_dir}"
    )
    evidence = harness.run()
    planned = {
        "cut": any(f.kind == "cut" for f in harness.faults),
        "restart": args.restart_db,
        "kills": not args.no_kills,
    }
    checks = run_checks(evidence, planned, options.grace, INTERRUPT_GRACE)
    print_report(evidence, checks, say, verbose=args.verbose)
    say(f"  drain of {args.drain_jobs} no-op jobs on {hosts} host(s)")
    drain = harness.measure_drain()
    say(
        f"  drained {drain['jobs_per_second']} jobs/s with {drain['workers']} workers, "
        f"database CPU {drain['db_cpu_cores']} cores; tables: {drain['tables']}"
    )
    return step_summary(hosts, numbers(evidence), drain, checks)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    run_dir = args.out / f"{time.strftime('%Y%m%dT%H%M%S')}-{seed}-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_on_signal)
    say(
        f"cluster: hosts {args.host_counts} x runworkers -n 2 on a private PostgreSQL, "
        f"{args.seconds:g} s per step, partition {args.partition}, restart-db "
        f"{args.restart_db}, latency {args.latency:g} ms, loss {args.loss:g}%, lease "
        f"{args.lease:g} s, seed {seed}, load average {os.getloadavg()}, files {run_dir}"
    )
    from .summary import print_summary, run_summary

    steps = []
    try:
        with Run(args, run_dir) as run:
            os.environ.update(
                {
                    "DJANGO_SETTINGS_MODULE": "benchmarks.cluster.settings",
                    "CLUSTER_PG_HOST": str(run.server.sockets),
                    "CHAOS_DB": "postgres",
                    "CHAOS_LEASE": str(args.lease),
                    "CHAOS_DIR": str(run_dir),
                }
            )
            import django

            django.setup()
            version = run.server.version()
            for hosts in args.host_counts:
                steps.append(run_step(run, hosts, seed))
            from django.db import connections

            connections.close_all()
    except net.NetworkError as exc:
        say(f"CLUSTER ERROR: cannot build the hosts' network: {exc}")
        return 2
    except KeyboardInterrupt as exc:
        say(f"CLUSTER INTERRUPTED ({exc or 'Ctrl+C'}); everything it made is removed")
        return 130
    except Exception:
        traceback.print_exc()
        say(f"CLUSTER ERROR: the harness broke; files in {run_dir}")
        return 2
    meta = {
        "seconds": args.seconds,
        "partition": args.partition,
        "restart_db": args.restart_db,
        "latency_ms": args.latency,
        "loss_pct": args.loss,
        "network": run.mode,
        "lease_seconds": args.lease,
        "seed": seed,
        "postgres": version,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    summary = run_summary(steps, meta)
    text = json.dumps(summary, indent=1)
    (run_dir / "summary.json").write_text(text)
    if args.json:
        args.json.write_text(text)
    print_summary(summary, say)
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
