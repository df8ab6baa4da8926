"""django-tasks-db: Django's own task framework (`django.tasks`) on its database backend."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from ..procs import django_command
from .base import Job, System, Unsupported
from .seeding import seed_rows


class TasksDB(System):
    name = "tasks_db"
    label = "django-tasks-db"
    notes = (
        "at-most-once (a crashed worker leaves its task RUNNING); one `db_worker` process per "
        "worker, `--batch` to drain; defaults (interval 1 s, random start-up delay up to 1 s)"
    )
    migrate_apps = ("django_tasks_database",)

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        from ..jobsapp.dtasks import bench_slow_task, bench_task

        self.tasks = {"bench": bench_task, "bench_slow": bench_slow_task}

    def enqueue_one(self, i: int, sleep_ms: int = 0, task: str = "bench") -> None:
        self.tasks[task].enqueue(i=i, sleep_ms=sleep_ms)

    def fill(self, jobs: Sequence[Job], task: str = "bench") -> None:
        """Untimed preparation: the same rows `enqueue` writes, bulk-inserted."""
        from django.utils import timezone
        from django_tasks_db.models import DBTaskResult, get_date_max

        now = timezone.now()
        definition = self.tasks[task]
        rows = [
            DBTaskResult(
                args_kwargs={"args": [], "kwargs": {"i": i, "sleep_ms": sleep_ms}},
                priority=definition.priority,
                task_path=definition.module_path,
                queue_name=definition.queue_name,
                run_after=get_date_max(),
                backend_name="default",
                enqueued_at=now,
            )
            for i, sleep_ms in jobs
        ]
        DBTaskResult.objects.bulk_create(rows, batch_size=1000)

    def worker_commands(self, n: int, burst: bool, concurrency: int = 1) -> list[list[str]]:
        if concurrency > 1:
            raise Unsupported("db_worker runs one task at a time per process")
        return [django_command("db_worker", *(["--batch"] if burst else [])) for _ in range(n)]

    def count_finished(self) -> int:
        from django_tasks_db.models import DBTaskResult

        return DBTaskResult.objects.filter(status="SUCCESSFUL").count()

    def count_queued(self) -> int:
        from django_tasks_db.models import DBTaskResult

        return DBTaskResult.objects.filter(status="READY").count()

    def seed_history(self, count: int) -> None:
        from django_tasks_db.models import DBTaskResult

        seed_rows(
            connection,
            DBTaskResult._meta.db_table,
            {
                "id": "{uuid}",
                "status": "'SUCCESSFUL'",
                "enqueued_at": "{now}",
                "started_at": "{now}",
                "finished_at": "{now}",
                "args_kwargs": """'{{"args": [], "kwargs": {{"i": -1}}}}'""",
                "priority": "0",
                "task_path": "'benchmarks.jobsapp.dtasks.bench_task'",
                "worker_ids": """'["seed"]'""",
                "queue_name": "'default'",
                "backend_name": "'default'",
                "run_after": "{now}",
                "return_value": "'null'",
                "exception_class_path": "''",
                "traceback": "''",
            },
            count,
        )
