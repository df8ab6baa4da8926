"""Prometheus metrics, with `prometheus-client` (the `metrics` extra).

Counters and histograms are kept the way prometheus-client's multiprocess mode keeps them:
every process writes its values into its own memory-mapped file in a directory private to one
supervisor, at each increment. A worker that is SIGKILLed has already written everything it
counted, so the supervisor's scrape, which merges the files, loses nothing. Files of workers
that exited are folded into one archive file per kind at once, so a supervisor that recycles
workers (`--max-jobs`) does not collect files for ever.

Gauges (jobs per status, the oldest waiting job, workers) are not counted by anyone: they are
read from the database (metrics/state.py) and served from a copy a few seconds old at most.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..outcomes import AttemptEnd
from ..states import Status
from .state import SLOTS_BUSY, SLOTS_FREE, WORKER_STATES, QueueState

#: Histogram buckets (seconds): from a no-op job to an hour.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)

#: The kinds of per-process file this module writes (prometheus-client's file prefixes).
FILE_KINDS = ("counter", "histogram")


def available() -> bool:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


def use_directory(directory: str) -> None:
    """Make this process, and the workers it forks, write metrics into `directory`.

    prometheus-client picks multiprocess mode when it is first imported, if the environment
    names a directory; a project may have imported it before (its own metrics), so the value
    class is set here too. Only metrics made afterwards are affected: ours are.
    """
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    from prometheus_client import values

    if values.ValueClass is values.MutexValue:
        values.ValueClass = values.MultiProcessValue()


class PrometheusWatcher:
    """Counts each finished attempt: `sqlqueue_jobs_total`, its duration and wait."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        self.jobs = Counter(
            "sqlqueue_jobs",
            "Finished attempts, by queue, job name and outcome.",
            ["queue", "name", "outcome"],
            registry=None,
        )
        self.duration = Histogram(
            "sqlqueue_job_duration_seconds",
            "Seconds an attempt's handler ran.",
            ["queue", "name"],
            buckets=DURATION_BUCKETS,
            registry=None,
        )
        self.wait = Histogram(
            "sqlqueue_job_wait_seconds",
            "Seconds from a job's run_at to the start of its attempt.",
            ["queue"],
            buckets=WAIT_BUCKETS,
            registry=None,
        )

    def __call__(self, end: AttemptEnd) -> None:
        job = end.job
        self.jobs.labels(job.queue, job.name, end.outcome).inc()
        if end.duration is not None:
            self.duration.labels(job.queue, job.name).observe(end.duration)
        wait = end.wait
        if wait is not None:
            self.wait.labels(job.queue).observe(wait)


def absorb(directory: str, pid: int) -> None:
    """Fold a process's counter and histogram files into the directory's archive files.

    Call only once the process has exited (nothing writes its files any more), and never while
    a scrape reads the directory (the caller holds one lock for both).
    """
    from prometheus_client.mmap_dict import MmapedDict

    for kind in FILE_KINDS:
        path = os.path.join(directory, f"{kind}_{pid}.db")
        if not os.path.exists(path):
            continue
        archive = MmapedDict(os.path.join(directory, f"{kind}_archive.db"))
        try:
            for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(path):
                stored, _ = archive.read_value(key)
                archive.write_value(key, stored + value, timestamp)
        finally:
            archive.close()
        os.unlink(path)


def process_files(directory: str) -> list[str]:
    """Every file a scrape reads (tests count them)."""
    return sorted(glob.glob(os.path.join(directory, "*.db")))


class StateCollector:
    """Gauges from a reading of the queue, and the supervisor's own view of its workers."""

    def __init__(
        self,
        state: Callable[[], QueueState | None],
        workers: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.state = state
        self.workers = workers

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        state = self.state()
        if state is not None:
            jobs = GaugeMetricFamily(
                "sqlqueue_jobs",
                "Jobs per queue and status (a lower bound where sqlqueue_jobs_capped is 1).",
                labels=["queue", "status"],
            )
            queues = known_queues(state.counts, state.oldest_wait)
            for queue in queues:
                for status in Status:
                    jobs.add_metric(
                        [queue, status.value], state.counts.get((queue, status.value), 0)
                    )
            yield jobs
            capped = GaugeMetricFamily(
                "sqlqueue_jobs_capped",
                "1 where a status has more jobs than are counted exactly.",
                labels=["status"],
            )
            for status in Status:
                capped.add_metric([status.value], 1 if status.value in state.capped else 0)
            yield capped
            oldest = GaugeMetricFamily(
                "sqlqueue_oldest_pending_seconds",
                "Seconds the oldest job waiting to run has waited since its run_at, per queue.",
                labels=["queue"],
            )
            for queue in queues:
                oldest.add_metric([queue], state.oldest_wait.get(queue, 0.0))
            yield oldest
            age = GaugeMetricFamily(
                "sqlqueue_state_age_seconds", "Age of the reading the gauges above come from."
            )
            from django.utils import timezone

            age.add_metric([], max(0.0, (timezone.now() - state.taken_at).total_seconds()))
            yield age
        workers = self.workers() if self.workers else (state.workers if state else None)
        if workers is not None:
            family = GaugeMetricFamily(
                "sqlqueue_workers", "Worker processes by state.", labels=["state"]
            )
            for name in WORKER_STATES:
                if name in workers:
                    family.add_metric([name], workers[name])
            yield family
        if workers is not None and SLOTS_BUSY in workers:
            slots = GaugeMetricFamily(
                "sqlqueue_worker_slots",
                "Slots of this supervisor's worker processes: running a job, or free.",
                labels=["state"],
            )
            slots.add_metric(["busy"], workers[SLOTS_BUSY])
            slots.add_metric(["free"], workers[SLOTS_FREE])
            yield slots


#: Every queue this process has seen jobs of: a queue that empties reads 0 instead of
#: vanishing, so alerts and graphs do not go to "no data".
_seen_queues: set[str] = set()


def known_queues(counts: Mapping[tuple[str, str], int], oldest: Mapping[str, float]) -> list[str]:
    """The queues the gauges report: those with jobs now, those seen before by this process,
    the default queue and those the QUEUES setting names."""
    from ..conf import get_settings

    conf = get_settings()
    _seen_queues.update(queue for queue, _status in counts)
    _seen_queues.update(oldest)
    return sorted({*_seen_queues, conf.default_queue, *conf.queues})


def render(collectors: list[Any], directory: str | None = None) -> tuple[bytes, str]:
    """The exposition text of `collectors` (and of the multiprocess files in `directory`)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    if directory is not None:
        MultiProcessCollector(registry, path=directory)
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry), CONTENT_TYPE_LATEST
