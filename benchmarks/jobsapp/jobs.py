"""django-sqlqueue's benchmark job, found by its `jobs` autodiscovery."""

from django_sqlqueue import job

from .work import work


@job("bench_job")
def bench_job(i: int, sleep_ms: int = 0) -> None:
    work(i, sleep_ms)
