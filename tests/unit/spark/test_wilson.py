"""The Wilson score interval against hand-computed values (and its Spark column twin: test_metrics)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_analysis.wilson import Z95, wilson_interval

# Hand-computed with z = 1.96: for k = 0 the upper bound is z²/(n + z²); for k = n the lower is n/(n + z²).
CASES = [
    pytest.param(0, 10, (0.0, 3.8415 / 13.8415), id="0-of-10"),
    pytest.param(10, 10, (10 / 13.8415, 1.0), id="10-of-10"),
    # p = 0.5, n = 10: centre 0.5, half = 1.96/1.38415 * sqrt(0.025 + 0.0096040)
    pytest.param(5, 10, (0.5 - 1.96 / 1.38415 * math.sqrt(0.034604), 0.5 + 1.96 / 1.38415 * math.sqrt(0.034604)),
                 id="5-of-10"),
    # p = 0.3, n = 100: centre (0.3 + 0.019208)/1.038415 = 0.307399,
    # half = 1.96/1.038415*sqrt(0.0021+0.00009604) = 0.088451
    pytest.param(30, 100, (0.307399 - 0.088451, 0.307399 + 0.088451), id="30-of-100"),
    pytest.param(0, 0, (0.0, 1.0), id="no-trials"),
]


@pytest.mark.parametrize(("k", "n", "expected"), CASES)
def test_wilson_matches_hand_computed(k: int, n: int, expected: tuple[float, float]) -> None:
    low, high = wilson_interval(k, n, z=1.96)
    assert low == pytest.approx(expected[0], abs=2e-5)
    assert high == pytest.approx(expected[1], abs=2e-5)


@pytest.mark.parametrize(("k", "n", "z"), [(-1, 5, Z95), (6, 5, Z95), (0, -1, Z95), (1, 2, 0.0)],
                         ids=["negative-k", "k-above-n", "negative-n", "zero-z"])
def test_wilson_rejects_bad_arguments(k: int, n: int, z: float) -> None:
    with pytest.raises(ValueError, match="wilson_interval"):
        wilson_interval(k, n, z)


@given(st.integers(min_value=1, max_value=10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_estimate_and_stays_in_unit_interval(kn: tuple[int, int]) -> None:
    k, n = kn
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= k / n + 1e-12
    assert k / n - 1e-12 <= high <= 1.0
