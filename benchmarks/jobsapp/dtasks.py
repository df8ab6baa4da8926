"""The django.tasks task run by django-tasks-db's `db_worker`."""

from django.tasks import task

from .work import work


@task
def bench_task(i: int, sleep_ms: int = 0) -> None:
    work(i, sleep_ms)


@task
def bench_slow_task(i: int, sleep_ms: int = 0) -> None:
    work(i, sleep_ms)
