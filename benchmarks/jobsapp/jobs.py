"""django-sqlqueue's benchmark job, found by its `jobs` autodiscovery."""

from django_sqlqueue import job

from .work import awork, burn, work


@job("bench_job")
def bench_job(i: int, sleep_ms: int = 0) -> None:
    work(i, sleep_ms)


@job("bench_slow")
def bench_slow_job(i: int, sleep_ms: int = 0) -> None:
    """The same work under another name: the mixed scenario's slow jobs, a task of their own."""
    work(i, sleep_ms)


@job("bench_async")
async def bench_async_job(i: int, sleep_ms: int = 0) -> None:
    """The io scenario's `async def` variant: the same work, awaiting its sleep."""
    await awork(i, sleep_ms)


@job("bench_limited", concurrency=2, concurrency_key="k{key}")
def bench_limited_job(i: int, key: int, sleep_ms: int = 0) -> None:
    """The flow scenario's concurrency-limited job: at most 2 at a time per key."""
    work(i, sleep_ms)


@job("bench_rated_slow", rate_limit="5/s")
def bench_rated_slow_job(i: int, sleep_ms: int = 0) -> None:
    """The beside scenario's backlog: at most 5 starts in any second."""
    work(i, sleep_ms)


@job("bench_rated", rate_limit="50/s")
def bench_rated_job(i: int, sleep_ms: int = 0) -> None:
    """The flow scenario's rate-limited job: at most 50 starts in any second."""
    work(i, sleep_ms)


@job("bench_cpu", queue="cpu")
def bench_cpu_job(i: int, cpu_ms: int = 0) -> None:
    """The io_beside_cpu scenario's CPU-bound job, on a queue of its own: `cpu_ms` of pure
    Python computing."""
    burn(i, cpu_ms)
