"""`python -m benchmarks run`: every scenario, on every database, for us and each peer.

Runs are interleaved (run 1 of every system, then run 2 in a rotated order, ...) so drift
of a shared machine cannot favour one side; every measurement gets a fresh database and a
fresh process. Raw results go to benchmarks/results/local/<timestamp>.json, which git
ignores; `--publish` writes them to benchmarks/results/, where the published runs are kept.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .databases import PEER_SQLITE_TUNING, VENDORS, bench_dir, server_version
from .measure import RESULT_PREFIX
from .ratios import ratio_table
from .report import LABELS, pivot, table
from .scenarios import SCENARIOS, variant_label
from .systems import DRIVER_MODULES, PEER_MODULES, SYSTEMS, system_class, systems_for

#: Published results (tracked); a run writes to LOCAL_RESULTS unless told otherwise.
RESULTS = Path(__file__).resolve().parent / "results"
LOCAL_RESULTS = RESULTS / "local"
WARMUP = {"jobs": 200, "workers": 2}
#: Ours with BATCH_COMPLETION=True.
OURS_BATCHED = "sqlqueue_batch"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the benchmarks")
    run.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    run.add_argument("--db", default=",".join(VENDORS), help="sqlite,postgres,mysql")
    run.add_argument("--scenarios", default=",".join(SCENARIOS), help=",".join(SCENARIOS))
    run.add_argument("--systems", default=",".join(SYSTEMS), help=",".join(SYSTEMS))
    run.add_argument("--runs", type=int, default=None, help="repetitions (default 3; quick 1)")
    run.add_argument("--variants", default="", help="only variants whose label matches this regex")
    run.add_argument(
        "--tune-peers",
        action="store_true",
        help="give Django-based peers persistent connections (CONN_MAX_AGE=None) and, on "
        "SQLite, django-sqlqueue's own tuning (WAL, synchronous=NORMAL, busy timeout)",
    )
    run.add_argument("--no-warmup", action="store_true", help="skip the discarded warm-up")
    where = run.add_mutually_exclusive_group()
    where.add_argument(
        "--output", type=Path, default=None, help="JSON path (default: results/local/, ignored)"
    )
    where.add_argument(
        "--publish",
        action="store_true",
        help="write the JSON to benchmarks/results/, with the published runs",
    )
    run.add_argument("--timeout", type=float, default=3600, help="seconds per measurement")
    show = sub.add_parser("table", help="print the table of one or more results files")
    show.add_argument("files", nargs="+", type=Path)
    return parser.parse_args(argv)


def split(value: str, known: Any, what: str) -> list[str]:
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)}; choose from {', '.join(known)}")
    return chosen


def plan(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every measurement in the order it runs: warm-ups first, then interleaved runs."""
    dbs = split(args.db, VENDORS, "database")
    scenarios = split(args.scenarios, SCENARIOS, "scenario")
    wanted = split(args.systems, SYSTEMS, "system")
    runs = args.runs or (1 if args.quick else 3)
    steps: list[dict[str, Any]] = []
    for db in dbs:
        # The batch-completion variant of ours runs only where a scenario asks for it.
        queues = [s for s in systems_for(db) if s in wanted and s != OURS_BATCHED]
        batched = OURS_BATCHED in wanted and OURS_BATCHED in systems_for(db)
        if not args.no_warmup:
            for system in queues:
                steps.append(
                    dict(db=db, system=system, scenario="drain", params=WARMUP, run=0, warmup=True)
                )
        for name in scenarios:
            scenario = SCENARIOS[name]
            systems = ["raw"] if scenario.systems == "raw" else list(queues)
            if scenario.systems == "ours":
                systems = [s for s in systems if s == "sqlqueue"]
            if batched and scenario.batch_completion_too and "sqlqueue" in systems:
                systems.insert(systems.index("sqlqueue") + 1, OURS_BATCHED)
            if not systems:
                continue
            for params in scenario.variants(args.quick):
                if args.variants and not re.search(args.variants, variant_label(params)):
                    continue
                chosen = [s for s in systems if s in params.get("only", systems)]
                if not chosen:
                    continue
                for run in range(1, runs + 1):
                    shift = (run - 1) % len(chosen)
                    for system in chosen[shift:] + chosen[:shift]:
                        steps.append(
                            dict(
                                db=db,
                                system=system,
                                scenario=name,
                                params=params,
                                run=run,
                                warmup=False,
                            )
                        )
    return steps


def missing_modules(steps: list[dict[str, Any]]) -> list[str]:
    """What the planned measurements need and this Python lacks: 'module (package, for X)'."""
    missing = []
    for system in dict.fromkeys(step["system"] for step in steps):
        for module, package in PEER_MODULES.get(system, ()):
            if importlib.util.find_spec(module) is None:
                missing.append(f"{module} ({package}, for {system}; extra `bench`)")
    for db in dict.fromkeys(step["db"] for step in steps):
        if db in DRIVER_MODULES:
            module, package, extra = DRIVER_MODULES[db]
            if importlib.util.find_spec(module) is None:
                missing.append(f"{module} ({package}, for {db}; extra `{extra}`)")
    return missing


def output_path(args: argparse.Namespace, stamp: str) -> Path:
    """Where the raw results go: --output, the published folder, or the ignored local one."""
    if args.output is not None:
        return Path(args.output)
    name = f"{stamp}{'-quick' if args.quick else ''}.json"
    return (RESULTS if args.publish else LOCAL_RESULTS) / name


def execute(step: dict[str, Any], log_dir: Path, timeout: float) -> dict[str, Any]:
    log = log_dir / f"{step['db']}-{step['system']}-{step['scenario']}.log"
    spec = {**step, "log": str(log)}
    with open(log, "a") as handle:
        handle.write(f"\n=== {json.dumps(step)}\n")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.measure", json.dumps(spec)],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        if lines:
            return {**step, **json.loads(lines[-1][len(RESULT_PREFIX) :])}
        problem = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return {
            **step,
            "status": "error",
            "problems": " / ".join(problem),
            "metrics": {},
            "loadavg_before": os.getloadavg(),
            "loadavg_after": os.getloadavg(),
        }
    except subprocess.TimeoutExpired:
        return {
            **step,
            "status": "error",
            "problems": f"timed out after {timeout:g} s",
            "metrics": {},
            "loadavg_before": os.getloadavg(),
            "loadavg_after": os.getloadavg(),
        }


def describe(result: dict[str, Any]) -> str:
    metrics = ", ".join(
        f"{k}={v:,.2f}" for k, v in result["metrics"].items() if isinstance(v, (int, float))
    )
    tag = "warm-up " if result.get("warmup") else f"run {result['run']} "
    load = "/".join(f"{x:.2f}" for x in result["loadavg_before"])
    status = "" if result["status"] == "ok" else f"[{result['status']}] "
    problems = f" !! {result['problems']}" if result["problems"] else ""
    return (
        f"{result['db']:8} {result['scenario']:9} {variant_label(result['params']):28} "
        f"{LABELS.get(result['system'], result['system']):16} {tag}{status}{metrics} "
        f"(loadavg {load}){problems}"
    )


def machine(dbs: list[str]) -> dict[str, Any]:
    versions = {}
    for db in dbs:
        try:
            versions[db] = server_version(db)
        except Exception as exc:  # the run will report the failure per measurement
            versions[db] = f"unavailable: {exc}"
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "databases": versions,
        "loadavg_at_start": os.getloadavg(),
    }


def compile_sources() -> list[str]:
    """Byte-compile this checkout's packages, as pip does on install: a process start then
    reads their bytecode instead of compiling ~100 modules from source. Measured processes
    can run where bytecode is never written (PYTHONDONTWRITEBYTECODE=1, which this machine
    sets), and every start-up figure, ours and the peers' (whose installs are compiled, while
    they too load benchmarks/ from the checkout), would then count a compilation no installed
    project pays. compileall writes the files even under that variable."""
    root = Path(__file__).resolve().parent.parent
    packages = [root / "django_sqlqueue", root / "benchmarks"]
    for package in packages:
        if not compileall.compile_dir(package, quiet=1):
            raise SystemExit(f"python -m benchmarks: could not byte-compile {package}")
    return [package.name for package in packages]


def system_notes() -> dict[str, str]:
    """Each system's guarantees and the defaults it runs with, from its adapter."""
    return {name: system_class(name).notes for name in SYSTEMS}


def run(args: argparse.Namespace) -> int:
    steps = plan(args)
    missing = missing_modules(steps)
    if missing:
        print(
            "python -m benchmarks: this Python lacks what the run needs: "
            + "; ".join(missing)
            + ".\nInstall the peers with the `bench` extra: pip install -e '.[dev,bench]' "
            "(or leave them out: --systems sqlqueue).",
            file=sys.stderr,
        )
        return 2
    if args.tune_peers:
        os.environ["BENCH_TUNE_PEERS"] = "1"  # read by benchmarks.settings in each process
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    log_dir = bench_dir() / "logs" / stamp
    log_dir.mkdir(parents=True, exist_ok=True)
    output = output_path(args, stamp)
    compiled = compile_sources()
    dbs = sorted({step["db"] for step in steps})
    notes = system_notes()
    print(f"{len(steps)} measurements; worker logs in {log_dir}")
    print(f"Byte-compiled {', '.join(compiled)}, as an install would be")
    print("Systems, with the defaults they run with:")
    for name in SYSTEMS:
        print(f"  {LABELS[name]}: {notes[name]}")
    print(
        "Django-based peers: "
        + (
            f"tuned (CONN_MAX_AGE=None; SQLite: {PEER_SQLITE_TUNING})"
            if args.tune_peers
            else "Django's default database settings (CONN_MAX_AGE=0, SQLite rollback journal)"
        )
    )
    print(
        "Load average is printed with every result: this machine may be shared, and final\n"
        "numbers must come from a quiet machine (load average well below 1 per core)."
    )
    record: dict[str, Any] = {
        "started": stamp,
        "quick": args.quick,
        "tune_peers": args.tune_peers,
        "argv": sys.argv,
        "machine": machine(dbs),
        "byte_compiled": compiled,
        "systems": notes,
        "results": [],
    }
    began = time.monotonic()
    for step in steps:
        result = execute(step, log_dir, args.timeout)
        print(describe(result), flush=True)
        record["results"].append(result)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(record, indent=1))
    record["finished_after_s"] = time.monotonic() - began
    record["loadavg_at_end"] = os.getloadavg()
    output.write_text(json.dumps(record, indent=1))
    print()
    print(table(record["results"]))
    targets = ratio_table(record["results"])
    if targets:
        print("\nThe per-job cost targets (issue 27), medians of this run:\n")
        print(targets)
    print(f"\nRaw results: {output}")
    return 0 if all(r["status"] != "error" for r in record["results"]) else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "run":
        return run(args)
    results = [r for path in args.files for r in json.loads(path.read_text())["results"]]
    print(pivot(results))
    print()
    print(table(results))
    targets = ratio_table(results)
    if targets:
        print()
        print(targets)
    return 0
