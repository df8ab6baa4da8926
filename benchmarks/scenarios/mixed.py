"""Mixed workload: fast no-op jobs and slow ones (sleeping `slow_ms`), drained by 4 workers.

What it shows is dispatch: a queue that hands a worker several jobs at once must not let slow
ones pile up in one worker's hand while the others idle. Two phases per measurement:

1. the fast jobs alone: `fast_drain_s`, first job start -> last job start (the clock starts
   at the first job's marker);
2. the same fast jobs and the slow ones, in the variant's `order`: `after` (every fast job,
   then the slow ones: workers that have just learned "jobs are fast" meet slow ones) or
   `interleaved` (a slow job every fast/slow fast ones). The slow jobs are a task of their own
   (`slow_task=own`, as a slow job usually is another kind of job) or the fast jobs' task
   (`shared`: a queue that estimates durations per task name cannot tell them apart).

Workers run as in production (`mode=continuous`: started first and given SETTLE_SECONDS to
wait for work, then the jobs are enqueued; the harness stops them once every job has run) or
in each system's drain mode (`burst`: the jobs are enqueued first, and a worker exits as soon
as it finds nothing to take; Huey has none and runs as in continuous).

`makespan_s` is phase 2's first job start -> last job end (a job ends `sleep` after its start
marker). `ideal_s` is what perfect dispatch would take: the fast jobs' drain time plus the
slow jobs' total sleep spread evenly, `fast_drain_s + slow * slow_ms / workers`. `efficiency`
= ideal / makespan: 1.0 is perfect, 0.5 is the slow jobs run by half the workers. It can
exceed 1 where the fast jobs' drain is bound by the CPU or the database rather than by the
workers (a worker asleep in a slow job costs the others nothing), and is noisy where idle
workers wake at scattered times (polling back-off), which phase 1 pays in full. The spread:
`slow_per_worker` lists how many slow jobs each worker process ran (even: slow / workers),
`slow_max_per_worker` the most any ran, `slow_workers` how many ran at least one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.db import connections

from .. import markers
from ..systems import System
from ..systems.base import TASKS, Job, wait_for_markers
from .drain import drain

FAST, SLOW = TASKS
#: Seconds continuous workers are given to start and settle into waiting for work.
SETTLE_SECONDS = 2.0
#: How often the continuous mode looks whether every job has been recorded as finished.
POLL_SECONDS = 0.01


def arrange(fast: int, slow: int, order: str) -> list[bool]:
    """Which of the fast + slow jobs, in enqueue order (job id = position), are slow."""
    if order == "after":
        return [False] * fast + [True] * slow
    if order != "interleaved":
        raise ValueError(f"order must be 'after' or 'interleaved', not {order!r}")
    # The k-th slow job goes after about (k + 1) * fast / (slow + 1) fast ones.
    places = {math.floor((k + 1) * fast / (slow + 1)) + k for k in range(slow)}
    return [position in places for position in range(fast + slow)]


def runs(slow_flags: list[bool]) -> Iterable[tuple[bool, list[int]]]:
    """Consecutive job ids of one kind: each run is enqueued in one call, in order."""
    start = 0
    for position in range(1, len(slow_flags) + 1):
        if position == len(slow_flags) or slow_flags[position] != slow_flags[start]:
            yield slow_flags[start], list(range(start, position))
            start = position


def makespan(starts: dict[int, float], sleep_s: dict[int, float]) -> float:
    """First start -> last end, where a job ends `sleep_s` after its start."""
    if not starts:
        return float("nan")
    first = min(starts.values())
    return max(start + sleep_s.get(job, 0.0) for job, start in starts.items()) - first


def drain_time(starts: Iterable[float]) -> float:
    """First start -> last start (of no-op jobs, whose end is their start)."""
    times = list(starts)
    return max(times) - min(times) if times else float("nan")


def ideal(fast_drain_s: float, slow: int, slow_ms: int, workers: int) -> float:
    return fast_drain_s + slow * slow_ms / 1000 / workers


def spread(by_process: dict[int, list[int]], slow_ids: set[int], workers: int) -> list[int]:
    """Slow jobs run per worker process, most first; workers that ran none count as 0."""
    counts = sorted((len(slow_ids.intersection(ids)) for ids in by_process.values()), reverse=True)
    return counts + [0] * (workers - len(counts))


def run_continuous(
    system: System, jobs: list[Job], fill: Callable[[], None], params: dict[str, Any]
) -> str:
    """Start the workers, let them settle into waiting for work, as in production, then
    `fill` the queue; stop them once every job has run (and, where the system records it,
    finished). The problems found, as drain() reports them ('' if none)."""
    workers, timeout = params["workers"], params.get("timeout", 900)
    before = system.count_finished()
    markers.clear()
    connections.close_all()  # hold no connection, lock or snapshot while workers run
    running = system.start_workers(workers, burst=False)
    try:
        time.sleep(params.get("settle_s", SETTLE_SECONDS))
        fill()
        connections.close_all()
        wait_for_markers(len(jobs), timeout)
        deadline = time.monotonic() + timeout
        if before is None:  # no record of finished jobs (Huey): let the last sleepers end
            time.sleep(max((ms for _, ms in jobs), default=0) / 1000)
        while before is not None and (system.count_finished() or 0) - before < len(jobs):
            if time.monotonic() > deadline:
                raise TimeoutError(f"not every job was recorded as finished in {timeout:g} s")
            time.sleep(POLL_SECONDS)
    finally:
        running.stop()
    return markers.verify_exactly_once([i for i, _ in jobs])


def run_phase(
    system: System, jobs: list[Job], fill: Callable[[], None], params: dict[str, Any]
) -> str:
    """One phase in the variant's mode; the problems found ('' if none)."""
    if params.get("mode", "continuous") == "burst":
        fill()  # a burst worker exits on an empty queue: the jobs come first
        return str(drain(system, jobs, params["workers"], params.get("timeout", 900))["problems"])
    return run_continuous(system, jobs, fill, params)


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    fast, slow, slow_ms = params["fast"], params["slow"], params["slow_ms"]
    workers = params["workers"]
    slow_task = SLOW if params.get("slow_task", "own") == "own" else FAST

    alone = [(i, 0) for i in range(fast)]
    first = run_phase(system, alone, lambda: system.fill(alone), params)
    fast_drain_s = drain_time(t for _, t in markers.read())

    flags = arrange(fast, slow, params["order"])
    jobs = [(i, slow_ms if is_slow else 0) for i, is_slow in enumerate(flags)]

    def fill_mixed() -> None:
        for is_slow, ids in runs(flags):
            system.fill([jobs[i] for i in ids], slow_task if is_slow else FAST)

    second = run_phase(system, jobs, fill_mixed, params)

    starts = dict(markers.read())
    slow_ids = {i for i, is_slow in enumerate(flags) if is_slow}
    by_process = {
        pid: [job for job, _ in marks] for pid, marks in markers.read_by_process().items()
    }
    per_worker = spread(by_process, slow_ids, workers)
    span = makespan(starts, {i: slow_ms / 1000 for i in slow_ids})
    best = ideal(fast_drain_s, slow, slow_ms, workers)
    return {
        "efficiency": best / span,
        "makespan_s": span,
        "ideal_s": best,
        "fast_drain_s": fast_drain_s,
        "slow_max_per_worker": max(per_worker, default=0),
        "slow_workers": sum(1 for n in per_worker if n),
        "slow_per_worker": per_worker,
        "problems": "; ".join(
            f"{phase}: {problems}"
            for phase, problems in (("fast alone", first), ("mixed", second))
            if problems
        ),
    }
