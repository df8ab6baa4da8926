"""An I/O queue beside a busy CPU queue: does the I/O queue keep its rate while the CPU queue is
busy? (django-sqlqueue only: queues with slots of their own, `runworkers --queues io:50,cpu:1`.)

`io_jobs` jobs on queue `io` each wait `sleep_ms` (0.1 s, as in the io scenario); `cpu_jobs`
jobs on queue `cpu` each compute for `cpu_ms` of their thread's CPU time (0.2 s of pure
Python, holding the GIL), enough of them to keep a process busy for the whole io drain. Each
measurement runs three phases on the same database, emptied before each, every one from a full
queue with burst workers (`runworkers -n 1 --burst ...`):

- `beside` (B): the io and the cpu jobs, `--queues io:50,cpu:1`: a process for `io` with
  `io_slots` (50) slots, threads, and a process of its own for `cpu` with `cpu_slots` (1);
- `alone` (A, the baseline): the io jobs only, the same command (its `cpu` process finds
  nothing to do);
- `shared` (C, the contrast): the io and the cpu jobs, `--concurrency 51` (io_slots +
  cpu_slots): one pool for both queues, where cpu jobs run as threads in the process that
  runs the io jobs and compete for its GIL, as many at once as they get slots.

B runs first, so that what a first phase may pay (cold caches) counts against the ratio, not
for it. The cpu jobs are enqueued interleaved among the io jobs (one every io_jobs /
(cpu_jobs + 1)), as jobs of both kinds arriving together would be; the order matters only to
C's shared pool, which takes both in enqueue order.

Measured on the io jobs alone, per phase: `<phase>_jobs_per_s`, io jobs over the time from
the workers' start to the last io job recorded as finished (its `finished_at`), start-up
included as in drain; `<phase>_steady_jobs_per_s`, first io job start -> last io job start
(markers). Once every io job is recorded the workers are stopped: the cpu jobs left neither
block nor count in the io clock. `io_rate_ratio` = beside / alone (the promise: >= 0.9),
`steady_ratio` the same for the steady rates, `shared_rate_ratio` = shared / alone;
`cpu_jobs_meanwhile`, the cpu jobs started before the io drain ended (`shared_` in C).

Checked (problems): every io job ran exactly once (markers) and was recorded as completed, no
cpu job ran twice; in B, no cpu job ran in the process that ran io jobs, and the cpu queue did
not run dry before the io drain ended (else the io jobs were not measured beside a busy CPU
queue: more cpu_jobs are needed).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from django.db import connections
from django.db.models import Max

from .. import markers
from ..procs import Workers, django_command
from ..systems import System, Unsupported
from .mixed import arrange, runs

#: Marker ids of the cpu jobs start here (the io jobs are 0..io_jobs).
CPU = 1_000_000
IO_QUEUE, CPU_QUEUE = "io", "cpu"
#: In running order: see the module's docstring.
PHASES = ("beside", "alone", "shared")
#: How often the harness looks whether every io job has run and been recorded.
POLL_S = 0.02


def command(phase: str, io_slots: int, cpu_slots: int) -> list[str]:
    """The worker command of a phase: queues with slots of their own, or one shared pool."""
    if phase == "shared":
        pool = ["--concurrency", str(io_slots + cpu_slots)]
    else:
        pool = ["--queues", f"{IO_QUEUE}:{io_slots},{CPU_QUEUE}:{cpu_slots}"]
    return django_command("runworkers", "-n", "1", "--burst", *pool)


def enqueue_order(io_jobs: int, cpu_jobs: int) -> list[tuple[bool, list[int]]]:
    """(cpu?, marker ids) in enqueue order: the cpu jobs interleaved among the io jobs."""
    order, io_next, cpu_next = [], 0, CPU
    for is_cpu, ids in runs(arrange(io_jobs, cpu_jobs, "interleaved")):
        first = cpu_next if is_cpu else io_next
        order.append((is_cpu, list(range(first, first + len(ids)))))
        if is_cpu:
            cpu_next += len(ids)
        else:
            io_next += len(ids)
    return order


def ratio(over: float, under: float) -> float:
    return over / under if under else float("nan")


def ran_dry(cpu_finished: list[float], cpu_jobs: int, io_end: float) -> bool:
    """Whether every cpu job had finished (wall times) before the io drain ended."""
    return len(cpu_finished) == cpu_jobs and max(cpu_finished, default=0.0) < io_end


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    if system.name != "sqlqueue":
        raise Unsupported(f"{system.label} has no queues with slots of their own")
    metrics: dict[str, Any] = {}
    problems = []
    for phase in PHASES:
        result = run_phase(system, phase, params)
        found = result.pop("problems")
        if found:
            problems.append(f"{phase}: {found}")
        metrics.update({f"{phase}_{key}": value for key, value in result.items()})
    alone = metrics["alone_jobs_per_s"]
    return {
        "io_rate_ratio": ratio(metrics["beside_jobs_per_s"], alone),
        "steady_ratio": ratio(
            metrics["beside_steady_jobs_per_s"], metrics["alone_steady_jobs_per_s"]
        ),
        "shared_rate_ratio": ratio(metrics["shared_jobs_per_s"], alone),
        "cpu_jobs_meanwhile": metrics.pop("beside_cpu_jobs_meanwhile"),
        **metrics,
        "problems": "; ".join(problems),
    }


def run_phase(system: System, phase: str, params: dict[str, Any]) -> dict[str, Any]:
    from django_sqlqueue.models import Job as JobRow

    from ..jobsapp.jobs import bench_cpu_job, bench_job

    io_jobs, cpu_ms = params["io_jobs"], params["cpu_ms"]
    cpu_jobs = 0 if phase == "alone" else params["cpu_jobs"]
    JobRow.objects.all().delete()  # the previous phase's rows, and its cpu jobs left
    io = bench_job.using(queue=IO_QUEUE)
    for is_cpu, ids in enqueue_order(io_jobs, cpu_jobs):
        if is_cpu:
            bench_cpu_job.enqueue_many([{"i": i, "cpu_ms": cpu_ms} for i in ids])
        else:
            io.enqueue_many([{"i": i, "sleep_ms": params["sleep_ms"]} for i in ids])
    markers.clear()
    connections.close_all()  # hold no connection, lock or snapshot while workers run
    running = Workers.start(
        [command(phase, params["io_slots"], params["cpu_slots"])], system.log_path
    )
    try:
        wait_for_io(running, io_jobs, params.get("timeout", 900))
    finally:
        running.stop()

    finished = JobRow.objects.filter(status="completed")
    io_done = finished.filter(queue=IO_QUEUE)
    io_end = io_done.aggregate(last=Max("finished_at"))["last"].timestamp()
    cpu_finished = [
        at.timestamp()
        for at in finished.filter(queue=CPU_QUEUE).values_list("finished_at", flat=True)
    ]
    recorded = io_done.count()
    connections.close_all()
    by_process = markers.read_by_process()
    marks = [mark for mine in by_process.values() for mark in mine]
    io_marks = [(i, t) for i, t in marks if i < CPU]
    cpu_marks = [(i, t) for i, t in marks if i >= CPU]
    starts = sorted(t for _, t in io_marks)

    problems = [markers.verify_exactly_once(range(io_jobs), io_marks)]
    if recorded != io_jobs:
        problems.append(f"{recorded} io jobs recorded as completed")
    twice = sum(1 for n in Counter(i for i, _ in cpu_marks).values() if n > 1)
    if twice:
        problems.append(f"{twice} cpu jobs ran more than once")
    io_pids = {pid for pid, mine in by_process.items() if any(i < CPU for i, _ in mine)}
    cpu_in_io = sum(1 for pid in io_pids for i, _ in by_process[pid] if i >= CPU)
    if phase == "beside":
        if cpu_in_io:
            problems.append(f"{cpu_in_io} cpu jobs ran in the io jobs' process")
        if ran_dry(cpu_finished, cpu_jobs, io_end):
            problems.append("the cpu queue ran dry before the io drain ended: more cpu_jobs")
    elapsed = io_end - running.started_wall
    return {
        "jobs_per_s": io_jobs / elapsed,
        "seconds": elapsed,
        "startup_s": starts[0] - running.started_wall if starts else float("nan"),
        "steady_jobs_per_s": (
            (len(starts) - 1) / (starts[-1] - starts[0])
            if len(starts) > 1 and starts[-1] > starts[0]
            else float("nan")
        ),
        "cpu_jobs_meanwhile": sum(1 for _, t in cpu_marks if t < io_end),
        "cpu_jobs_in_io_process": cpu_in_io,
        "problems": ", ".join(filter(None, problems)),
    }


def wait_for_io(running: Workers, io_jobs: int, timeout: float) -> None:
    """Until every io job has run (markers) and been recorded as completed (database)."""
    from django_sqlqueue.models import Job as JobRow

    deadline = time.monotonic() + timeout
    while True:
        exited = all(p.poll() is not None for p in running.processes)
        if sum(1 for i, _ in markers.read() if i < CPU) >= io_jobs:
            done = JobRow.objects.filter(queue=IO_QUEUE, status="completed").count()
            if done >= io_jobs:
                return
        if exited:  # burst workers gone (or failed) with io jobs not done
            codes = [p.returncode for p in running.processes]
            raise RuntimeError(f"workers exited ({codes}) before every io job was recorded")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the io jobs were not all recorded in {timeout:g} s")
        time.sleep(POLL_S)
