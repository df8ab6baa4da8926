"""`python -m benchmarks.attempt_cost`: what one worker's path costs per job, and where.

    python -m benchmarks.attempt_cost                      # this checkout, both recordings
    python -m benchmarks.attempt_cost --against ../old     # and another checkout, side by side
    python -m benchmarks.attempt_cost --rounds 7 --jobs 20000

One worker drains N no-op jobs in-process on SQLite, each measurement in a fresh process on a
fresh database file; rounds are interleaved in a rotated order so the machine's drift favours
no variant. Besides this checkout (batch and per-job recording) and `--against`'s code (batch,
and per-job where it has that mode),
it measures this checkout with each per-attempt piece left out in turn, then all of them: the
difference from the full path is what that piece costs per job, give or take the difference
between the full path and its identical noise control. Needs the machine to itself: the load
average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Run as a script: its folder (with the job's app) is on sys.path, this checkout is not.
CHILD = Path(__file__).resolve().parent / "child.py"

#: The per-attempt pieces a variant can leave out, and what each is.
PIECES = {
    "rollup": "the dashboard's rollup tally",
    "leak_guard": "the open-transaction check before and after the handler",
    "otel": "the OpenTelemetry span (the tracer lookup, with the API installed)",
    "timer": "arming and disarming the timeout's interval timer",
    "watch": "the cancel/progress watch's bookkeeping",
}


@dataclass
class Variant:
    label: str
    code: Path
    mode: str
    without: tuple[str, ...] = ()
    rates: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.rates)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.attempt_cost",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--jobs", type=int, default=20000, help="jobs per drain (20000)")
    parser.add_argument("--rounds", type=int, default=5, help="measurements per variant (5)")
    parser.add_argument("--against", type=Path, help="another checkout to measure (batch)")
    parser.add_argument(
        "--pieces",
        default=",".join(PIECES),
        help=f"pieces to leave out, one variant each ({','.join(PIECES)}; '' for none)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.rounds < 1:
        parser.error("--jobs and --rounds must be at least 1")
    args.pieces = [p for p in args.pieces.split(",") if p]
    unknown = sorted(set(args.pieces) - set(PIECES))
    if unknown:
        parser.error(f"unknown pieces: {', '.join(unknown)} (known: {', '.join(PIECES)})")
    if args.against is not None and not (args.against / "django_sqlqueue").is_dir():
        parser.error(f"--against {args.against}: no django_sqlqueue package there")
    return args


def variants(args: argparse.Namespace) -> list[Variant]:
    found = [
        Variant("this checkout, batch recording", ROOT, "batch"),
        # The same again: how far two identical variants' medians fall apart is the noise
        # any piece's figure has to stand out of.
        Variant("the same again (noise control)", ROOT, "batch"),
        Variant("this checkout, per-job recording (default)", ROOT, "default"),
    ]
    if args.against is not None:
        against = args.against.resolve()
        found.append(Variant(f"{args.against}, batch recording", against, "batch"))
        if records_per_job(against):
            found.append(
                Variant(f"{args.against}, per-job recording (default)", against, "default")
            )
    for piece in args.pieces:
        found.append(Variant(f"batch, without {piece}", ROOT, "batch", (piece,)))
    if len(args.pieces) > 1:
        found.append(Variant("batch, without all of them", ROOT, "batch", tuple(args.pieces)))
    return found


def records_per_job(code: Path) -> bool:
    """Whether that checkout records each success before the next job by default (code from
    before the BATCH_COMPLETION setting always batched: it has no per-job mode to measure)."""
    conf = code / "django_sqlqueue" / "conf.py"
    return conf.exists() and "batch_completion" in conf.read_text().lower()


def measure(variant: Variant, jobs: int, db_file: Path) -> float:
    command = [
        sys.executable,
        str(CHILD),
        str(variant.code),
        str(db_file),
        str(jobs),
        variant.mode,
        ",".join(variant.without),
    ]
    done = subprocess.run(command, cwd=variant.code, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{variant.label}: the measurement failed\n{done.stderr[-3000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def report(found: list[Variant]) -> str:
    full = found[0].median
    lines = [f"{'variant':48} {'jobs/s median (min-max)':>26} {'us/job':>8} {'vs full':>8}"]
    for index, variant in enumerate(found):
        low, high = min(variant.rates), max(variant.rates)
        per_job = 1e6 / variant.median
        saved = 1e6 / full - per_job
        spread = f"{variant.median:,.0f} ({low:,.0f}-{high:,.0f})"
        versus = "" if index == 0 else f"{-saved:+8.1f}"
        lines.append(f"{variant.label:48} {spread:>26} {per_job:8.1f} {versus:>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    found = variants(args)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="attempt-cost-") as scratch:
        db_file = Path(scratch, "queue.sqlite3")
        for round_index in range(args.rounds):
            shift = round_index % len(found)
            for variant in found[shift:] + found[:shift]:
                variant.rates.append(measure(variant, args.jobs, db_file))
            print(f"round {round_index + 1} of {args.rounds} done", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"one worker in-process, SQLite, {args.jobs:,} no-op jobs, {args.rounds} rounds")
    print(report(found))
    for piece in args.pieces:
        print(f"  {piece}: {PIECES[piece]}")
    return 0
