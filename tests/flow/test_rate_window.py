"""The rate window: at most the limit in any period, whatever the order of the attempts, and
bounded state for large limits. Pure logic (no database): the decisions are replayed through
the stored JSON form each time, as the gate reads and writes a `FlowKey` row."""

from __future__ import annotations

import bisect
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from django_sqlqueue.databases.rate_window import EXACT_UP_TO, SLICES, START_MARGIN, RateWindow
from django_sqlqueue.options import RateLimit


def most_in_any_period(stamps: list[float], period: float) -> int:
    stamps = sorted(stamps)
    return max(
        (bisect.bisect_left(stamps, s + period) - i for i, s in enumerate(stamps)), default=0
    )


def replay(rate: RateLimit, gaps: list[float]) -> tuple[list[float], list[float]]:
    """Attempt a start after each gap; the starts' stamps and each refusal's wait."""
    stored: object = []
    now = 1_000_000.0
    stamps: list[float] = []
    waits: list[float] = []
    for gap in gaps:
        now += gap
        window = RateWindow.load(json.loads(json.dumps(stored)), rate, now)
        if window.free():
            window.start(now)
            stamps.append(now + START_MARGIN)
            stored = window.stored()
        else:
            waits.append(window.frees_at() - now)
    return stamps, waits


@settings(max_examples=150, deadline=None)
@given(
    limit=st.integers(1, 6),
    gaps=st.lists(st.floats(0, 0.7, allow_nan=False), min_size=1, max_size=80),
)
def test_exact_window_never_lets_more_than_the_limit_start_in_a_period(
    limit: int, gaps: list[float]
) -> None:
    rate = RateLimit(limit, 1.0, f"{limit}/s")
    stamps, waits = replay(rate, gaps)
    assert most_in_any_period(stamps, 1.0) <= limit
    assert all(0 <= wait <= 1.0 + START_MARGIN + 1e-6 for wait in waits)  # float sums


@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.floats(0, 2.0, allow_nan=False), min_size=1, max_size=400))
def test_sliced_window_never_lets_more_than_the_limit_start_in_a_period(
    gaps: list[float],
) -> None:
    limit = EXACT_UP_TO + 1  # per 100 s: sliced, and reachable within 400 attempts
    rate = RateLimit(limit, 100.0, f"{limit}/100s")
    stamps, _ = replay(rate, [0.0] * (limit - 10) + gaps)
    assert most_in_any_period(stamps, 100.0) <= limit


def test_a_full_window_frees_exactly_when_its_oldest_start_leaves() -> None:
    rate = RateLimit(2, 1.0, "2/s")
    window = RateWindow(rate)
    window.start(10.0)
    window.start(10.4)
    assert window.free() == 0
    assert window.frees_at() == 11.0 + START_MARGIN
    later = RateWindow.load(window.stored(), rate, 11.0 + START_MARGIN)
    assert later.free() == 1


def test_a_large_limit_keeps_bounded_state() -> None:
    """100000/h stored its every start: 335 KiB and slower decisions as it grew."""
    rate = RateLimit(100_000, 3600.0, "100000/h")
    stored: object = []
    now = 0.0
    for _ in range(20_000):
        now += 0.01
        window = RateWindow.load(stored, rate, now)
        assert window.free()
        window.start(now)
        stored = window.stored()
    assert window.count() == 20_000
    assert len(json.dumps(stored)) < 40 * (SLICES + 2)


def test_sliced_uses_nearly_all_of_its_allowance() -> None:
    """Conservative by at most one slice: a steady stream at the limit's pace gets through
    at least 98 % of it."""
    limit = 10_000
    rate = RateLimit(limit, 100.0, f"{limit}/100s")
    pace = 100.0 / limit
    stamps, _ = replay(rate, [pace] * (3 * limit))
    assert len(stamps) >= 0.98 * 3 * limit


def test_a_limit_that_changes_form_keeps_its_starts() -> None:
    small, large = RateLimit(5, 1.0, "5/s"), RateLimit(5000, 1.0, "5000/s")
    exact = RateWindow(small)
    for t in (10.0, 10.2, 10.4):
        exact.start(t)
    as_sliced = RateWindow.load(exact.stored(), large, 10.5)
    assert as_sliced.count() == 3
    back = RateWindow.load(as_sliced.stored(), small, 10.5)
    assert back.count() == 3
    # Read back at the end of their slices: never earlier than they were.
    assert min(back.stamps) >= 10.0 + START_MARGIN
