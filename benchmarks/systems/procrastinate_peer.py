"""Procrastinate (PostgreSQL only) through its Django integration."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from ..procs import django_command
from .base import Job, System
from .seeding import seed_rows


class Procrastinate(System):
    name = "procrastinate"
    label = "Procrastinate"
    notes = (
        "at-least-once via stalled-job retry (manual by default); one `procrastinate worker` "
        "process per worker, `--one-shot` to drain; defaults (concurrency 1, but "
        "`--concurrency C` in the io scenario; LISTEN/NOTIFY, polling 5 s)"
    )
    migrate_apps = ("procrastinate",)

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        from ..jobsapp.tasks import bench_slow_task, bench_task

        self.tasks = {"bench": bench_task, "bench_slow": bench_slow_task}

    def enqueue_one(self, i: int, sleep_ms: int = 0, task: str = "bench") -> None:
        self.tasks[task].defer(i=i, sleep_ms=sleep_ms)

    def enqueue_bulk(self, jobs: Sequence[Job], task: str = "bench") -> None:
        self.tasks[task].batch_defer(*({"i": i, "sleep_ms": sleep_ms} for i, sleep_ms in jobs))

    def worker_commands(self, n: int, burst: bool, concurrency: int = 1) -> list[list[str]]:
        flags = ["--one-shot"] if burst else []
        if concurrency > 1:
            flags += ["--concurrency", str(concurrency)]
        return [django_command("procrastinate", "worker", *flags) for _ in range(n)]

    def count_finished(self) -> int:
        return self._count("succeeded")

    def count_queued(self) -> int:
        return self._count("todo")

    def _count(self, status: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = %s", [status])
            return int(cursor.fetchone()[0])

    def seed_history(self, count: int) -> None:
        seed_rows(
            connection,
            "procrastinate_jobs",
            {
                "queue_name": "'default'",
                "task_name": "'bench_task'",
                "priority": "0",
                "args": """'{{"i": -1}}'""",
                "status": "'succeeded'",
                "scheduled_at": "NULL",
                "attempts": "1",
            },
            count,
        )
