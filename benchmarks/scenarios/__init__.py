"""The scenarios of issue 4, each a module with `run(system, params) -> metrics`.

A scenario has variants (sizes, worker counts); `--quick` shrinks them so a run over three
databases takes minutes. `primary` names the metric the table leads with. A variant with
`only` (system names) is measured for those systems alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from typing import Any


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    primary: str
    full: list[dict[str, Any]]
    quick: list[dict[str, Any]]
    #: "queues": ours and every peer; "raw": our SQL through the bare driver; "ours": only
    #: django-sqlqueue (a feature the peers lack).
    systems: str = "queues"
    metrics: tuple[str, ...] = field(default=())
    #: Also measure ours with BATCH_COMPLETION (system `sqlqueue_batch`): what recording each
    #: outcome before the next job costs, where that cost shows.
    batch_completion_too: bool = False

    def variants(self, quick: bool) -> list[dict[str, Any]]:
        return self.quick if quick else self.full

    def runner(self) -> Any:
        return import_module(f"{__name__}.{self.name}").run


def _drain(jobs: int, workers: int) -> dict[str, Any]:
    return {"jobs": jobs, "workers": workers}


def _beside(backlog: str, size: int, **params: Any) -> dict[str, Any]:
    return {"backlog": backlog, "backlog_jobs": size, **params}


def _mixed(
    fast: int, slow: int, order: str, slow_task: str = "own", mode: str = "continuous"
) -> dict[str, Any]:
    return {
        "fast": fast,
        "slow": slow,
        "slow_ms": 300,
        "order": order,
        "slow_task": slow_task,
        "mode": mode,
        "workers": 4,
    }


def _io(jobs: int, in_flight: int, ours_workers: int, **params: Any) -> dict[str, Any]:
    return {
        "jobs": jobs,
        "sleep_ms": 100,
        "in_flight": in_flight,
        "ours_workers": ours_workers,
        **params,
    }


def _io_beside_cpu(io_jobs: int, cpu_jobs: int) -> dict[str, Any]:
    return {
        "io_jobs": io_jobs,
        "sleep_ms": 100,
        "cpu_jobs": cpu_jobs,
        "cpu_ms": 200,
        "io_slots": 50,
        "cpu_slots": 1,
    }


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "enqueue",
            "enqueue (jobs/s)",
            "jobs_per_s",
            full=[{"mode": "single", "jobs": 3_000}, {"mode": "bulk", "jobs": 100_000}],
            quick=[{"mode": "single", "jobs": 300}, {"mode": "bulk", "jobs": 3_000}],
        ),
        Scenario(
            "enqueue_floor",
            "enqueue floor: our INSERT, one transaction each, without django-sqlqueue; and "
            "Django's create() of a row with the same columns (jobs/s)",
            "jobs_per_s",
            full=[{"mode": m, "jobs": 3_000} for m in ("driver", "django", "create")],
            quick=[{"mode": m, "jobs": 300} for m in ("driver", "django", "create")],
            systems="raw",
        ),
        Scenario(
            "drain",
            "drain no-op jobs (jobs/s)",
            "jobs_per_s",
            full=[_drain(3_000, 1), _drain(3_000, 4), _drain(30_000, 1), _drain(30_000, 4)],
            quick=[_drain(300, 1), _drain(300, 4)],
            metrics=("jobs_per_s", "steady_jobs_per_s", "startup_s"),
            batch_completion_too=True,
        ),
        Scenario(
            "latency",
            "latency enqueue -> start, one idle worker (ms)",
            "p50_ms",
            full=[{"jobs": 100, "interval_ms": 50, "idle_s": 2.0}],
            quick=[{"jobs": 20, "interval_ms": 50, "idle_s": 1.0}],
            metrics=("p50_ms", "p95_ms", "max_ms"),
        ),
        Scenario(
            "history",
            "drain with finished history in the table (jobs/s)",
            "jobs_per_s",
            full=[
                {"history": 0, "jobs": 3_000, "workers": 4},
                {"history": 1_000_000, "jobs": 3_000, "workers": 4},
            ],
            quick=[
                {"history": 0, "jobs": 300, "workers": 4},
                {"history": 20_000, "jobs": 300, "workers": 4},
            ],
        ),
        Scenario(
            "startup",
            "start-up: exec of the worker command -> first job running (s)",
            "startup_s",
            full=[{"workers": 1, "starts": 5}, {"workers": 4, "starts": 5}],
            quick=[{"workers": 1, "starts": 2}],
            metrics=("startup_s", "startup_min_s", "startup_max_s"),
        ),
        Scenario(
            "check_floor",
            "start-up floor: exec -> exit of `manage.py check`, without django-sqlqueue (s)",
            "startup_s",
            full=[{"starts": 5}],
            quick=[{"starts": 2}],
            systems="raw",
            metrics=("startup_s", "startup_min_s", "startup_max_s"),
        ),
        Scenario(
            "footprint",
            "footprint: RSS per worker (MiB), CPU of idle workers (% of a core)",
            "rss_mb_per_worker",
            full=[{"workers": 4, "warm_jobs": 200, "settle_s": 3.0, "window_s": 30.0}],
            quick=[{"workers": 4, "warm_jobs": 40, "settle_s": 1.0, "window_s": 5.0}],
            metrics=("rss_mb_per_worker", "idle_cpu_pct_total", "idle_cpu_pct_per_worker"),
        ),
        Scenario(
            "mix",
            "realistic mix: jobs sleeping 10-50 ms, 4 workers (jobs/s)",
            "jobs_per_s",
            full=[{"jobs": 1_000, "workers": 4}],
            quick=[{"jobs": 80, "workers": 4}],
            metrics=("jobs_per_s", "efficiency"),
        ),
        Scenario(
            "mixed",
            "mixed workload: fast no-op jobs and slow 0.3 s ones, 4 workers (ideal / makespan)",
            "efficiency",
            full=[
                _mixed(3_000, 40, "after"),
                _mixed(3_000, 40, "interleaved"),
                _mixed(3_000, 40, "after", slow_task="shared"),
                _mixed(3_000, 40, "after", mode="burst"),
            ],
            quick=[
                _mixed(300, 8, "after"),
                _mixed(300, 8, "interleaved"),
                _mixed(300, 8, "after", mode="burst"),
            ],
            metrics=("efficiency", "makespan_s", "ideal_s", "slow_max_per_worker", "slow_workers"),
            batch_completion_too=True,
        ),
        Scenario(
            "io",
            "I/O-bound: jobs waiting 0.1 s, in_flight of them at once (jobs/s)",
            "jobs_per_s",
            # One job per process, our mode before threads, and `async def` jobs: ours only.
            full=[
                _io(2_000, 100, 2),
                _io(2_000, 4, 4, only=["sqlqueue"]),
                _io(2_000, 100, 2, handler="async", only=["sqlqueue"]),
            ],
            quick=[
                _io(200, 100, 2),
                _io(200, 4, 4, only=["sqlqueue"]),
                _io(200, 100, 2, handler="async", only=["sqlqueue"]),
            ],
            metrics=(
                "jobs_per_s",
                "seconds",
                "peak_in_flight",
                "rss_mb_per_in_flight",
                "db_connections_peak",
            ),
        ),
        Scenario(
            "io_beside_cpu",
            "I/O queue beside a busy CPU queue: io jobs/s beside cpu jobs over io jobs/s alone",
            "io_rate_ratio",
            # Phases beside (--queues io:50,cpu:1), alone (the same, no cpu jobs) and shared
            # (--concurrency 51) in each measurement; 40 cpu jobs of 0.2 s outlast the drain.
            full=[_io_beside_cpu(1_000, 40)],
            quick=[_io_beside_cpu(200, 10)],
            systems="ours",
            metrics=(
                "io_rate_ratio",
                "steady_ratio",
                "alone_jobs_per_s",
                "beside_jobs_per_s",
                "cpu_jobs_meanwhile",
                "shared_jobs_per_s",
                "shared_rate_ratio",
            ),
        ),
        Scenario(
            "flow",
            "flow control: concurrency-limited and rate-limited drains (share of the limit used)",
            "limit_use",
            full=[
                {"limit": "concurrency", "jobs": 2_000, "workers": 8, "keys": 4, "sleep_ms": 20},
                {"limit": "concurrency", "jobs": 800, "workers": 8, "keys": 4, "sleep_ms": 100},
                {"limit": "rate", "jobs": 1_000, "workers": 4},
            ],
            quick=[
                {"limit": "concurrency", "jobs": 80, "workers": 4, "keys": 2, "sleep_ms": 20},
                {"limit": "rate", "jobs": 120, "workers": 2},
            ],
            systems="ours",
            metrics=("limit_use", "jobs_per_s", "max_overlap", "max_in_window"),
        ),
        Scenario(
            "workflow",
            "workflows: a chain's handoff (ms); a fan-in and a batch beside a plain drain",
            "handoff_ms",
            full=[
                {"shape": "chain", "jobs": 1_000, "workers": 4},
                {"shape": "fanin", "jobs": 1_000, "workers": 4},
                {"shape": "batch", "jobs": 10_000, "workers": 4},
            ],
            quick=[
                {"shape": "chain", "jobs": 50, "workers": 2},
                {"shape": "fanin", "jobs": 100, "workers": 2},
                {"shape": "batch", "jobs": 200, "workers": 2},
            ],
            systems="ours",
            metrics=(
                "handoff_ms",
                "in_order",
                "jobs_per_s",
                "ratio",
                "release_ms",
                "callback_ms",
            ),
        ),
        Scenario(
            "beside",
            "unlimited jobs beside a limited backlog: enqueue -> start (ms)",
            "p95_ms",
            full=[
                _beside(backlog, 300, workers=6, jobs=30, interval_ms=1000)
                for backlog in ("none", "rate", "concurrency")
            ],
            quick=[
                _beside(backlog, 100, workers=4, jobs=10, interval_ms=500)
                for backlog in ("none", "rate", "concurrency")
            ],
            systems="ours",
            metrics=("p50_ms", "p95_ms", "max_ms", "not_started", "probe_ms"),
        ),
        Scenario(
            "sqlite_reads",
            "SQLite: read-only atomic() blocks beside busy workers, IMMEDIATE vs DEFERRED",
            "reads_per_s",
            full=[
                {"mode": mode, "readers": 3, "hold_ms": 5, "workers": 2, "seconds": 8}
                for mode in ("immediate", "deferred")
            ],
            quick=[
                {"mode": mode, "readers": 2, "hold_ms": 5, "workers": 1, "seconds": 2}
                for mode in ("immediate", "deferred")
            ],
            systems="ours",
            metrics=("reads_per_s", "read_p99_ms", "read_max_ms", "worker_jobs_per_s"),
        ),
        Scenario(
            "floor",
            "raw-driver floor: our claim/complete SQL without Django (jobs/s)",
            "jobs_per_s",
            full=[
                *({"jobs": 10_000, "workers": w, "batch": b} for w in (1, 4) for b in (1, 50)),
                # The default mode's own floor: `BATCH_SIZE` claimed, each completion committed.
                {"jobs": 30_000, "workers": 4, "batch": 20, "commits": "each"},
            ],
            quick=[
                *({"jobs": 500, "workers": w, "batch": b} for w in (1, 4) for b in (1, 50)),
                {"jobs": 500, "workers": 4, "batch": 20, "commits": "each"},
            ],
            systems="raw",
        ),
    ]
}


def variant_label(params: dict[str, Any]) -> str:
    """A short, readable name for a variant: 'jobs=3000 workers=4'."""
    hidden = {"timeout", "idle_s", "settle_s", "warm_jobs", "interval_ms", "only"}
    return " ".join(f"{k}={v}" for k, v in params.items() if k not in hidden)
