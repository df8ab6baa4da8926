"""Flow control under load (django-sqlqueue only; the peers have no such limits).

- `limit=concurrency`: jobs sleeping `sleep_ms` spread over `keys` keys, each key limited to
  2 running at once (`bench_limited`), drained by N workers. `limit_use` is the steady start
  rate over the rate of every usable slot busy (min(keys * 2, N) / sleep): 1.0 means no slot
  sat idle; `ideal_s` the busiest key's work over its 2 slots; `max_overlap` the most jobs of
  one key seen running at once (from the markers' start times and the sleep; must be ≤ 2).
- `limit=rate`: no-op jobs limited to 50 starts per second (`bench_rated`). `limit_use` is
  the steady start rate over the limit (1.0: it runs at the limit), `max_in_window` the most
  starts seen in any one-second window (must be ≤ 50).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .. import markers
from ..systems import System, Unsupported
from .drain import drain

CONCURRENCY = 2
RATE = 50.0


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    if system.name != "sqlqueue":
        raise Unsupported(f"{system.label} has no concurrency or rate limits to measure")
    from ..jobsapp.jobs import bench_limited_job, bench_rated_job

    count, workers = params["jobs"], params["workers"]
    timeout = params.get("timeout", 900)
    if params["limit"] == "concurrency":
        keys, sleep_ms = params["keys"], params["sleep_ms"]
        items = [{"i": i, "key": i % keys, "sleep_ms": sleep_ms} for i in range(count)]
        bench_limited_job.enqueue_many(items)
        result = drain(system, [(i, sleep_ms) for i in range(count)], workers, timeout)
        # Steady state: every slot of every key busy runs min(slots, workers) jobs at once.
        slots = min(keys * CONCURRENCY, workers)
        result["limit_use"] = result["steady_jobs_per_s"] / (slots * 1000 / sleep_ms)
        busiest = max(Counter(i % keys for i in range(count)).values())
        result["ideal_s"] = busiest * sleep_ms / 1000 / min(CONCURRENCY, workers)
        result["max_overlap"] = max_overlap(keys, sleep_ms / 1000)
        return result
    bench_rated_job.enqueue_many([{"i": i} for i in range(count)])
    result = drain(system, [(i, 0) for i in range(count)], workers, timeout)
    result["limit_use"] = result["steady_jobs_per_s"] / RATE
    result["max_in_window"] = max_in_window(1.0)
    return result


def _starts() -> list[tuple[int, float]]:
    return sorted(markers.read(), key=lambda mark: mark[1])


def max_overlap(keys: int, seconds: float) -> int:
    """The most jobs of one key running at once, each taken to run `seconds` from its start
    (an upper bound: the queue's own overhead only shortens the real overlap)."""
    marks = _starts()  # read once, not once per key
    peak = 0
    for key in range(keys):
        starts = [t for i, t in marks if i % keys == key]
        for index, start in enumerate(starts):
            peak = max(peak, sum(1 for other in starts[: index + 1] if other + seconds > start))
    return peak


def max_in_window(window: float) -> int:
    return markers.most_within([t for _, t in _starts()], window)
