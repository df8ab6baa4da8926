"""Huey's SqliteHuey instance and task, with its defaults; the consumer imports `huey`."""

import os

from huey import SqliteHuey

from .work import work

huey = SqliteHuey(
    "bench", filename=os.environ.get("BENCH_HUEY_FILE", "/tmp/bench/bench_huey.sqlite3")
)


@huey.task()
def bench_task(i: int, sleep_ms: int = 0) -> None:
    work(i, sleep_ms)


@huey.task()
def bench_slow_task(i: int, sleep_ms: int = 0) -> None:
    work(i, sleep_ms)
