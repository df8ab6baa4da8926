"""Retry delays: the pure backoff functions, without a database."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_sqlqueue.backoff import Backoff, compute_delay, validate_backoff

attempts = st.integers(min_value=1, max_value=10_000)
unit_interval = st.floats(min_value=0, max_value=1, exclude_max=True)
backoffs = st.builds(
    Backoff,
    base=st.floats(min_value=0, max_value=1e6),
    cap=st.floats(min_value=0, max_value=1e9),
    jitter=st.floats(min_value=0, max_value=1),
)


def fixed(value: float):
    """An rng that always returns `value`, to pin the jitter."""
    return lambda: value


class TestBounds:
    def test_exponential_before_the_cap(self) -> None:
        backoff = Backoff(base=2, cap=1000, jitter=0)
        assert [backoff.bounds(n)[1] for n in range(1, 6)] == [2, 4, 8, 16, 32]

    def test_cap_limits_the_highest_delay(self) -> None:
        backoff = Backoff(base=2, cap=10, jitter=0)
        assert backoff.bounds(3) == (8, 8)
        assert backoff.bounds(4) == (10, 10)
        assert backoff.bounds(50) == (10, 10)

    def test_jitter_lowers_the_floor_only(self) -> None:
        assert Backoff(base=4, cap=100, jitter=0.5).bounds(2) == (4, 8)
        assert Backoff(base=4, cap=100, jitter=1).bounds(2) == (0, 8)
        assert Backoff(base=4, cap=100, jitter=0.25).bounds(1) == (3, 4)

    def test_attempt_below_one_counts_as_the_first(self) -> None:
        backoff = Backoff(base=3, cap=100, jitter=0)
        assert backoff.bounds(0) == backoff.bounds(1) == (3, 3)
        assert backoff.bounds(-5) == (3, 3)

    def test_huge_attempt_number_does_not_overflow(self) -> None:
        assert Backoff(base=1, cap=60, jitter=0).bounds(10**9) == (60, 60)

    @given(backoffs, attempts)
    def test_bounds_are_ordered_and_capped(self, backoff: Backoff, attempt: int) -> None:
        low, high = backoff.bounds(attempt)
        assert 0 <= low <= high <= backoff.cap
        assert math.isfinite(high)

    @given(backoffs, attempts)
    def test_bounds_never_shrink_with_more_attempts(self, backoff: Backoff, attempt: int) -> None:
        assert backoff.bounds(attempt + 1)[1] >= backoff.bounds(attempt)[1]


class TestDelay:
    def test_rng_picks_the_point_between_the_bounds(self) -> None:
        backoff = Backoff(base=10, cap=1000, jitter=0.5)
        assert backoff.delay(1, rng=fixed(0.0)) == 5
        assert backoff.delay(1, rng=fixed(0.5)) == 7.5
        assert backoff.delay(3, rng=fixed(0.0)) == 20

    @given(backoffs, attempts, unit_interval)
    def test_delay_stays_within_the_bounds(
        self, backoff: Backoff, attempt: int, draw: float
    ) -> None:
        low, high = backoff.bounds(attempt)
        assert low <= backoff.delay(attempt, rng=fixed(draw)) <= high

    def test_default_rng_spreads_delays(self) -> None:
        backoff = Backoff(base=100, cap=1000, jitter=0.5)
        delays = {backoff.delay(1) for _ in range(50)}
        assert len(delays) > 1
        assert all(50 <= delay <= 100 for delay in delays)

    def test_no_jitter_is_deterministic(self) -> None:
        assert {Backoff(base=1.5, cap=100, jitter=0).delay(3) for _ in range(20)} == {6.0}


class TestValidation:
    @pytest.mark.parametrize(
        "kwargs",
        [{"base": -1}, {"cap": -0.1}, {"jitter": -0.01}, {"jitter": 1.01}],
        ids=["negative base", "negative cap", "jitter below 0", "jitter above 1"],
    )
    def test_invalid_backoff_is_refused(self, kwargs: dict[str, float]) -> None:
        with pytest.raises(ValueError, match="Backoff"):
            Backoff(**kwargs)

    @pytest.mark.parametrize(
        "spec", [None, 0, 3, 2.5, Backoff(), lambda attempt: attempt], ids=repr
    )
    def test_accepted_backoff_specs(self, spec: object) -> None:
        validate_backoff(spec)

    @pytest.mark.parametrize("spec", [-1, -0.5, "2", True, [1, 2]], ids=repr)
    def test_rejected_backoff_specs(self, spec: object) -> None:
        with pytest.raises(ValueError, match="backoff must be"):
            validate_backoff(spec)


class TestComputeDelay:
    default = Backoff(base=1, cap=8, jitter=0)

    def test_none_uses_the_default(self) -> None:
        assert [compute_delay(None, n, self.default) for n in (1, 2, 3, 4, 5)] == [1, 2, 4, 8, 8]

    def test_a_backoff_is_used_as_is(self) -> None:
        spec = Backoff(base=5, cap=1000, jitter=0)
        assert compute_delay(spec, 3, self.default) == 20

    def test_a_number_is_the_base_with_default_cap_and_jitter(self) -> None:
        assert compute_delay(3, 1, self.default) == 3
        assert compute_delay(3, 2, self.default) == 6
        assert compute_delay(3, 3, self.default) == 8  # the default's cap
        jittery = Backoff(base=1, cap=1000, jitter=0.5)
        for _ in range(20):
            assert 10 <= compute_delay(20.0, 1, jittery) <= 20

    def test_a_callable_gets_the_attempt_number(self) -> None:
        seen: list[int] = []

        def spec(attempt: int) -> float:
            seen.append(attempt)
            return attempt * 7

        assert compute_delay(spec, 4, self.default) == 28
        assert seen == [4]

    def test_a_callable_never_yields_a_negative_delay(self) -> None:
        assert compute_delay(lambda attempt: -30, 1, self.default) == 0.0

    def test_result_is_a_float(self) -> None:
        assert isinstance(compute_delay(lambda attempt: 3, 1, self.default), float)
