"""`python -m benchmarks.chaos`: run the chaos harness on one or more databases.

    python -m benchmarks.chaos --db sqlite --seconds 60         # the CI-sized run
    python -m benchmarks.chaos --db all --seconds 60            # sqlite, postgres, mysql
    python -m benchmarks.chaos --db postgres --long             # five minutes
    python -m benchmarks.chaos --db mysql --restart-db          # restarts the server mid-run
    python -m benchmarks.chaos --db all --misbehave --seconds 25  # misbehaving handlers
    python -m benchmarks.chaos --db postgres --concurrency 8      # runworkers --concurrency 8

Exits 0 when every check passed, 1 when one failed, 2 when the harness itself broke.
Logs, producer records and a JSON summary stay in --out (default /tmp/chaos_sqlqueue).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import config

LONG_SECONDS = 300.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.chaos",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument(
        "--db", default="sqlite", help="sqlite, postgres, mysql, a comma list, or all"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="chaos phase length")
    parser.add_argument("--long", action="store_true", help=f"{LONG_SECONDS:g} s per database")
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=8.0, help="jobs/s per producer")
    parser.add_argument("--workers", type=int, default=3, help="worker processes per supervisor")
    parser.add_argument(
        "-c",
        "--concurrency",
        type=int,
        default=1,
        metavar="C",
        help="jobs each worker process runs at once (runworkers --concurrency C); above 1, "
        "io jobs that wait join the mix, so that kills meet many jobs in flight",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (printed)")
    parser.add_argument(
        "--db-fault",
        choices=["terminate-connections", "restart", "none"],
        default="terminate-connections",
        help="PostgreSQL/MariaDB fault mid-run: cut the chaos database's connections "
        "(default), restart the server, or nothing",
    )
    parser.add_argument(
        "--restart-db",
        action="store_true",
        help="same as --db-fault=restart: restarts the whole server, affecting its other users",
    )
    parser.add_argument(
        "--misbehave",
        action="store_true",
        help="misbehaving handlers among the normal mix (open transactions, forks, "
        "os._exit(0), lingering threads, huge results, GIL hogs), no kills or faults",
    )
    parser.add_argument("--lease", type=float, default=4.0, help="LEASE_SECONDS of the run")
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    parser.add_argument("--db-name", default=config.DEFAULT_DB_NAME)
    parser.add_argument("--out", type=Path, default=Path("/tmp/chaos_sqlqueue"))
    parser.add_argument("--keep-db", action="store_true", help="do not drop the database")
    parser.add_argument("-v", "--verbose", action="store_true", help="examples for every check")
    parser.add_argument(
        "--recheck", type=Path, metavar="RUN_DIR", help="check a finished run's files again"
    )
    parser.add_argument(
        "--table",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="print the figures of finished runs as a Markdown table",
    )
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if args.long:
        args.seconds = LONG_SECONDS
    if args.restart_db:
        args.db_fault = "restart"
    args.dbs = list(config.VENDORS) if args.db == "all" else args.db.split(",")
    unknown = set(args.dbs) - set(config.VENDORS)
    if unknown:
        parser.error(f"unknown database(s) {', '.join(sorted(unknown))}")
    return args


def say(line: str) -> None:
    print(line, flush=True)


def run_many(args: argparse.Namespace, argv: list[str]) -> int:
    """One child process per database: Django can be set up only once per process."""
    passthrough = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--db":
            skip = True
            continue
        if not arg.startswith("--db="):
            passthrough.append(arg)
    results = {}
    for vendor in args.dbs:
        started = time.monotonic()
        command = [sys.executable, "-m", "benchmarks.chaos", "--db", vendor, *passthrough]
        code = subprocess.call(command)
        results[vendor] = (code, time.monotonic() - started)
    for vendor, (code, seconds) in results.items():
        verdict = {0: "PASS", 1: "FAIL"}.get(code, f"ERROR (exit {code})")
        say(f"chaos {vendor}: {verdict} in {seconds:.0f} s")
    return max((code for code, _ in results.values()), default=0)


def run_one(args: argparse.Namespace) -> int:
    vendor = args.dbs[0]
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    run_dir = args.out / f"{vendor}-{time.strftime('%Y%m%dT%H%M%S')}-{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    os.environ.update(
        {
            config.ENV_VENDOR: vendor,
            config.ENV_DB_NAME: args.db_name,
            config.ENV_DIR: str(args.out),
            config.ENV_LEASE: str(args.lease),
            "DJANGO_SETTINGS_MODULE": config.SETTINGS_MODULE,
        }
    )
    import django

    django.setup()
    from django.db import connections

    from . import dbadmin
    from .harness import Harness, Options
    from .misbehave_harness import MisbehaveHarness
    from .report import print_report, save_summary

    options = Options(
        vendor=vendor,
        seconds=args.seconds,
        producers=args.producers,
        rate=args.rate,
        workers=args.workers,
        seed=seed,
        db_fault=args.db_fault,
        drain_timeout=args.drain_timeout,
        misbehave=args.misbehave,
        concurrency=args.concurrency,
    )
    slots = f" x {args.concurrency} slots" if args.concurrency > 1 else ""
    if args.misbehave:
        say(
            f"chaos {vendor} --misbehave: {args.seconds:g} s, {args.producers - 1} producers x "
            f"{args.rate:g} jobs/s and one of misbehaving jobs, 2 supervisors x {args.workers} "
            f"workers{slots}, lease {args.lease:g} s, no kills, seed {seed}, files {run_dir}"
        )
    else:
        say(
            f"chaos {vendor}: {args.seconds:g} s, {args.producers} producers x {args.rate:g} "
            f"jobs/s, 2 supervisors x {args.workers} workers{slots}, lease {args.lease:g} s, "
            f"db fault {args.db_fault if vendor != 'sqlite' else 'write-lock'}, seed {seed}, "
            f"files {run_dir}"
        )
    try:
        kind = MisbehaveHarness if options.misbehave else Harness
        evidence = kind(options, run_dir, say).run()
        checks = checks_of(evidence, asdict(options))
        numbers = print_report(evidence, checks, say, verbose=args.verbose)
        save_summary(run_dir / "summary.json", numbers, checks)
    except Exception:
        traceback.print_exc()
        say(f"RESULT {vendor}: ERROR (the harness broke; files in {run_dir})")
        return 2
    finally:
        connections.close_all()
        if not args.keep_db:
            try:
                dbadmin.drop_database()
            except Exception as exc:
                say(f"could not drop the chaos database: {exc}")
    return 0 if all(c.passed for c in checks) else 1


def checks_of(evidence: Any, options: dict[str, Any]) -> list[Any]:
    """The checks of a run of either kind, from its evidence and its options."""
    from django_sqlqueue.runtime.supervisor import INTERRUPT_GRACE

    from .checks import run_checks
    from .misbehave_checks import run_misbehave_checks

    if options.get("misbehave"):
        return run_misbehave_checks(evidence, options["grace"], INTERRUPT_GRACE, options["workers"])
    return run_checks(evidence, options["grace"], INTERRUPT_GRACE)


def recheck(args: argparse.Namespace) -> int:
    """Run the checks again on the evidence a run saved (no database needed)."""
    import json

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", config.SETTINGS_MODULE)
    django.setup()
    from .evidence import read_evidence
    from .report import print_report

    evidence = read_evidence(args.recheck / "evidence.json")
    checks = checks_of(evidence, json.loads((args.recheck / "options.json").read_text()))
    print_report(evidence, checks, say, verbose=args.verbose)
    return 0 if all(c.passed for c in checks) else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.recheck:
        return recheck(args)
    if args.table:
        import json

        from .report import markdown_table

        summaries = [json.loads((path / "summary.json").read_text()) for path in args.table]
        say(markdown_table(summaries))
        return 0
    if len(args.dbs) > 1:
        return run_many(args, argv)
    return run_one(args)
