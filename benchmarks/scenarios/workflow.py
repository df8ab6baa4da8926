"""Workflows (django-sqlqueue only; among the peers measured here none has dependencies).

- `shape=chain`: N no-op jobs, each enqueued `after=` the one before, drained by W workers.
  `handoff_ms` is the time from one step's start to the next one's (the steady mean, from the
  start markers): a step's run, its recorded completion, the release of the next step and a
  worker's claim of it. `in_order` is 1 when every step started after the one before.
- `shape=fanin`: N no-op jobs and one more enqueued `after=` all of them (at most 1,000: the
  most a job may wait for), drained by W workers. `ratio` is its jobs/s over the same N jobs
  without the waiting job, measured in the same run (`plain_jobs_per_s`); `release_ms` the
  time from the last member's start to the waiting job's start.
- `shape=batch`: N no-op jobs enqueued in one `batch(on_complete=...)` whose callback is one
  more no-op job, drained by W workers, beside the same N jobs without a batch drained just
  before in the same run. `ratio` as for the fan-in; `callback_ms` the time from the last
  member's start to the callback's start (the members' ends, the workers' looks at the
  batch, the callback's store and claim).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from .. import markers
from ..systems import System, Unsupported
from .drain import drain


def run(system: System, params: dict[str, Any]) -> dict[str, Any]:
    if system.name != "sqlqueue":
        raise Unsupported(f"{system.label} has no job dependencies to measure")
    from django_sqlqueue.models import Job as JobRow

    from ..jobsapp.jobs import bench_job

    count, workers = params["jobs"], params["workers"]
    timeout = params.get("timeout", 900)
    if params["shape"] == "chain":
        with transaction.atomic():
            previous = bench_job.enqueue(i=0)
            for i in range(1, count):
                previous = bench_job.using(after=[previous]).enqueue(i=i)
        result = drain(system, [(i, 0) for i in range(count)], workers, timeout)
        starts = dict(markers.read())
        ordered = [starts[i] for i in range(count) if i in starts]
        result["in_order"] = int(ordered == sorted(ordered) and len(ordered) == count)
        result["handoff_ms"] = (ordered[-1] - ordered[0]) / (count - 1) * 1000
        return result
    # Fan-in or batch: the members alone first, then the same with one job waiting for all
    # of them (after=, or as the batch's callback).
    bench_job.enqueue_many([{"i": i} for i in range(count)])
    plain = drain(system, [(i, 0) for i in range(count)], workers, timeout)
    JobRow.objects.all().delete()
    if params["shape"] == "batch":
        from django_sqlqueue import batch

        with batch(on_complete=bench_job.prepare(i=count)):
            bench_job.enqueue_many([{"i": i} for i in range(count)])
    else:
        with transaction.atomic():
            members = bench_job.enqueue_many([{"i": i} for i in range(count)])
            bench_job.using(after=members).enqueue(i=count)
    result = drain(system, [(i, 0) for i in range(count + 1)], workers, timeout)
    starts = dict(markers.read())
    result["plain_jobs_per_s"] = plain["jobs_per_s"]
    result["ratio"] = result["jobs_per_s"] / plain["jobs_per_s"]
    last_start = starts[count] - max(starts[i] for i in range(count))
    result["callback_ms" if params["shape"] == "batch" else "release_ms"] = last_start * 1000
    return result
