"""django-sqlqueue through its public API: `@job`, `.enqueue`, `.enqueue_many`, `runworkers`."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from ..procs import Workers, django_command
from .base import Job, System
from .seeding import seed_rows


class SQLQueue(System):
    name = "sqlqueue"
    label = "django-sqlqueue"
    notes = (
        "at-least-once, each success recorded before the next job starts; `runworkers -n N` "
        "(N worker processes under one supervisor), `--burst` to drain, `--concurrency C` "
        "(threads) in the io scenario, `--queues io:50,cpu:1` (queues with slots of their own) "
        "in io_beside_cpu; library defaults, no SQLQUEUE setting (effective values in the JSON)"
    )
    migrate_apps = ("django_sqlqueue",)

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        from ..jobsapp.jobs import bench_async_job, bench_job, bench_slow_job

        self.jobs = {
            "bench": bench_job,
            "bench_slow": bench_slow_job,
            "bench_async": bench_async_job,  # the io scenario's `async def` variant
        }

    def enqueue_one(self, i: int, sleep_ms: int = 0, task: str = "bench") -> None:
        self.jobs[task].enqueue(i=i, sleep_ms=sleep_ms)

    def enqueue_bulk(self, jobs: Sequence[Job], task: str = "bench") -> None:
        self.jobs[task].enqueue_many([{"i": i, "sleep_ms": sleep_ms} for i, sleep_ms in jobs])

    def worker_commands(self, n: int, burst: bool, concurrency: int = 1) -> list[list[str]]:
        flags = ["--burst"] if burst else []
        if concurrency > 1:
            flags += ["--concurrency", str(concurrency)]  # in threads, in each process
        return [django_command("runworkers", "-n", str(n), *flags)]

    def job_processes(self, workers: Workers) -> list[int]:
        from ..procs import children

        return [pid for supervisor in workers.pids for pid in children(supervisor)]

    def count_finished(self) -> int:
        from django_sqlqueue.models import Job as JobRow

        return JobRow.objects.filter(status="completed").count()

    def count_queued(self) -> int:
        from django_sqlqueue.models import Job as JobRow

        return JobRow.objects.filter(status="pending").count()

    def seed_history(self, count: int) -> None:
        seed_rows(
            connection,
            "django_sqlqueue_job",
            {
                "name": "'bench_job'",
                "queue": "'default'",
                "args": "'[]'",
                "kwargs": "'{{}}'",
                "status": "'completed'",
                "priority": "0",
                "attempts": "1",
                "max_attempts": "5",
                "run_at": "{now}",
                "created_at": "{now}",
                "started_at": "{now}",
                "finished_at": "{now}",
                "updated_at": "{now}",
                "result": "'null'",
                "last_error": "''",
                "history": "'[]'",
                "lease_owner": "''",
                "backend": "''",
            },
            count,
        )


class SQLQueueBatched(SQLQueue):
    """The same, with successes recorded in batches (`SQLQUEUE["BATCH_COMPLETION"] = True`),
    to show what recording each outcome before the next job costs."""

    name = "sqlqueue_batch"
    label = "django-sqlqueue, batch completion"
    notes = (
        "as django-sqlqueue, with BATCH_COMPLETION=True: successes are recorded per claimed "
        "batch, so a killed worker re-runs the finished jobs of its batch"
    )
