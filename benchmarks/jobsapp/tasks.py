"""Procrastinate's task, found by its `tasks` autodiscovery (installed on PostgreSQL only)."""

from procrastinate.contrib.django import app

from .work import work


@app.task(name="bench_task")
def bench_task(i: int, sleep_ms: int = 0) -> None:
    work(i, sleep_ms)


@app.task(name="bench_slow")
def bench_slow_task(i: int, sleep_ms: int = 0) -> None:
    work(i, sleep_ms)
