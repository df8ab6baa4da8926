"""Which jobs of a claimed batch a worker keeps: pure logic, no database."""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone

from django_sqlqueue.rows import ClaimedJob
from django_sqlqueue.runtime.dispatch import DurationEstimates

T0 = datetime(2026, 1, 1, tzinfo=dt_timezone.utc)


def batch(*names: str) -> list[ClaimedJob]:
    return [
        ClaimedJob(
            id=n, name=name, queue="q", args=[], kwargs={}, attempts=1, max_attempts=3,
            priority=0, run_at=T0, created_at=T0,
        )
        for n, name in enumerate(names, 1)
    ]  # fmt: skip


def names(jobs: list[ClaimedJob]) -> list[str]:
    return [job.name for job in jobs]


def test_known_fast_jobs_are_all_kept() -> None:
    estimates = DurationEstimates(budget=0.05)
    estimates.observe("fast", 0.001)
    kept, surplus = estimates.keep(batch(*["fast"] * 20))
    assert (len(kept), surplus) == (20, [])


def test_a_known_slow_job_travels_alone() -> None:
    estimates = DurationEstimates(budget=0.05)
    estimates.observe("fast", 0.001)
    estimates.observe("slow", 0.3)
    kept, surplus = estimates.keep(batch("fast", "fast", "slow", "fast"))
    assert names(kept) == ["fast", "fast"] and names(surplus) == ["slow", "fast"]
    kept, surplus = estimates.keep(batch("slow", "fast"))
    assert names(kept) == ["slow"] and names(surplus) == ["fast"]


def test_a_name_never_run_counts_as_the_whole_budget() -> None:
    """Fast jobs of other names must not make a burst of an unseen (maybe slow) one look
    cheap: only the first of them is kept, the rest go back for idle workers."""
    estimates = DurationEstimates(budget=0.05)
    for _ in range(50):
        estimates.observe("fast", 0.0005)
    assert estimates.claim_size(20) == 20
    kept, surplus = estimates.keep(batch(*["new"] * 8))
    assert (len(kept), len(surplus)) == (1, 7)
    kept, surplus = estimates.keep(batch("fast", "fast", "new", "new"))
    assert names(kept) == ["fast", "fast"] and names(surplus) == ["new", "new"]


def test_the_first_job_is_always_kept() -> None:
    estimates = DurationEstimates(budget=0.05)
    kept, surplus = estimates.keep(batch("unknown", "unknown"))
    assert names(kept) == ["unknown"] and len(surplus) == 1
