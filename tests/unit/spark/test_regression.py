"""The release gate's statistics (spark_analysis.regression): hand-computed cases, a brute-force twin of
Boschloo's test, exact size checks, and properties of the tests, the corrections and the verdicts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_analysis.regression import (
    CellCounts,
    adjust,
    boschloo_p,
    diff_interval,
    fisher_p,
    gate,
    one_sided_p,
)

# -- hand-computed ----------------------------------------------------------------------------------------------

FISHER = [
    # baseline 0/2, candidate 2/2: all K=2 anomalies in the candidate, P = C(2,2)C(2,0)/C(4,2) = 1/6
    pytest.param(0, 2, 2, 2, 1 / 6, id="0of2-vs-2of2"),
    # baseline 1/3, candidate 2/3: K=3 of N=6, P(X>=2) = (C(3,2)C(3,1) + C(3,3)C(3,0)) / C(6,3) = 10/20
    pytest.param(1, 3, 2, 3, 0.5, id="1of3-vs-2of3"),
    pytest.param(0, 5, 0, 5, 1.0, id="no-anomalies"),
    pytest.param(5, 5, 0, 5, 1.0, id="candidate-better"),
]


@pytest.mark.parametrize(("kb", "nb", "kc", "nc", "expected"), FISHER)
def test_fisher_matches_hand_computed(kb: int, nb: int, kc: int, nc: int, expected: float) -> None:
    assert fisher_p(kb, nb, kc, nc) == pytest.approx(expected, abs=1e-12)


def test_boschloo_of_the_all_or_nothing_table_is_the_null_maximum() -> None:
    # 0/2 vs 2/2 is the most extreme table; its probability under a common rate pi is (1-pi)^2 pi^2, largest
    # at pi = 1/2: 1/16 -- below Fisher's 1/6, as Boschloo's test promises.
    assert boschloo_p(0, 2, 2, 2) == pytest.approx(1 / 16, abs=1e-9)


@pytest.mark.parametrize(("args", "fragment"), [
    ((-1, 5, 0, 5), "0 <= k <= n"), ((6, 5, 0, 5), "0 <= k <= n"), ((0, 0, 0, 5), "n >= 1"),
    ((0, 5, 0, 0), "n >= 1"),
], ids=["negative-k", "k-above-n", "no-baseline-runs", "no-candidate-runs"])
def test_tests_reject_impossible_counts(args: tuple[int, int, int, int], fragment: str) -> None:
    for fn in (fisher_p, boschloo_p):
        with pytest.raises(ValueError, match=fragment):
            fn(*args)


# -- a brute-force twin and exact sizes -------------------------------------------------------------------------


def _naive_boschloo(kb: int, nb: int, kc: int, nc: int, grid: int = 2000) -> float:
    """Every table, every rate on a fine grid: the definition, written the slow way."""
    t0 = fisher_p(kb, nb, kc, nc) * (1 + 1e-9)
    extreme = [(b, c) for b in range(nb + 1) for c in range(nc + 1) if fisher_p(b, nb, c, nc) <= t0]
    best = 0.0
    for i in range(1, grid):
        pi = i / grid
        best = max(best, sum(math.comb(nb, b) * pi**b * (1 - pi) ** (nb - b) * math.comb(nc, c) * pi**c
                             * (1 - pi) ** (nc - c) for b, c in extreme))
    return min(best, fisher_p(kb, nb, kc, nc))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7).flatmap(lambda nb: st.integers(1, 7).flatmap(
    lambda nc: st.tuples(st.integers(0, nb), st.just(nb), st.integers(0, nc), st.just(nc)))))
def test_boschloo_agrees_with_the_brute_force_definition(t: tuple[int, int, int, int]) -> None:
    assert boschloo_p(*t) == pytest.approx(_naive_boschloo(*t), abs=2e-4)


@pytest.mark.parametrize("test", ["boschloo", "fisher"])
@pytest.mark.parametrize(("nb", "nc"), [(10, 10), (12, 8), (20, 20)], ids=["10-10", "12-8", "20-20"])
def test_size_stays_at_or_below_alpha_under_the_null(test: str, nb: int, nc: int) -> None:
    """P(p <= 0.05) with both versions at the same rate pi, summed exactly over every table."""
    p = {(b, c): one_sided_p(b, nb, c, nc, test=test)[0] for b in range(nb + 1) for c in range(nc + 1)}
    for pi in (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9):
        size = sum(math.comb(nb, b) * pi**b * (1 - pi) ** (nb - b) * math.comb(nc, c) * pi**c * (1 - pi) ** (nc - c)
                   for (b, c), pv in p.items() if pv <= 0.05)
        assert size <= 0.05 + 1e-6, (pi, size)


# -- properties -------------------------------------------------------------------------------------------------

counts = st.integers(1, 40).flatmap(lambda nb: st.integers(1, 40).flatmap(
    lambda nc: st.tuples(st.integers(0, nb), st.just(nb), st.integers(0, nc), st.just(nc))))


@settings(max_examples=60, deadline=None)
@given(counts)
def test_boschloo_is_a_p_value_never_above_fisher(t: tuple[int, int, int, int]) -> None:
    b, f = boschloo_p(*t), fisher_p(*t)
    assert 0.0 <= b <= f + 1e-12 <= 1.0 + 1e-12


@settings(max_examples=60, deadline=None)
@given(counts)
def test_more_candidate_anomalies_never_raise_the_p_value(t: tuple[int, int, int, int]) -> None:
    kb, nb, kc, nc = t
    if kc < nc:
        for fn in (fisher_p, boschloo_p):
            assert fn(kb, nb, kc + 1, nc) <= fn(kb, nb, kc, nc) + 1e-9
    if kb < nb:
        for fn in (fisher_p, boschloo_p):
            assert fn(kb + 1, nb, kc, nc) >= fn(kb, nb, kc, nc) - 1e-9


@given(counts)
def test_the_difference_interval_contains_the_difference(t: tuple[int, int, int, int]) -> None:
    d, lo, hi = diff_interval(*t)
    assert -1.0 <= lo <= d + 1e-12 and d - 1e-12 <= hi <= 1.0
    assert d == pytest.approx(t[2] / t[3] - t[0] / t[1])


p_lists = st.lists(st.floats(0.0, 1.0), min_size=0, max_size=12)


@given(p_lists)
def test_corrections_never_lower_a_p_value_and_keep_its_rank(ps: list[float]) -> None:
    holm, bh = adjust(ps, "holm"), adjust(ps, "bh")
    for raw, h, b in zip(ps, holm, bh):
        assert raw - 1e-12 <= b <= h + 1e-12 <= 1.0 + 1e-12  # BH is never stricter than Holm
    for i in range(len(ps)):
        for j in range(len(ps)):
            if ps[i] < ps[j]:
                assert holm[i] <= holm[j] + 1e-12 and bh[i] <= bh[j] + 1e-12


def test_corrections_hand_computed() -> None:
    ps = [0.01, 0.04, 0.03, 0.5]
    assert adjust(ps, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert adjust(ps, "bh") == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30)),
                min_size=0, max_size=5), st.integers(1, 25), st.sampled_from(["holm", "bh"]))
def test_gate_verdicts_follow_the_rules(raw: list[tuple[int, int, int, int]], min_runs: int, correction: str) -> None:
    cells = [CellCounts("w", f"n{i}", min(a, b), b, min(c, d), d) for i, (a, b, c, d) in enumerate(raw)]
    r = gate(cells, alpha=0.05, min_runs=min_runs, correction=correction)
    assert sorted(c.counts.nemesis for c in r.cells) == sorted(c.nemesis for c in cells)
    for v in r.cells:
        short = v.counts.n_b < min_runs or v.counts.n_c < min_runs
        assert (v.verdict == "too-few-runs") == short
        if not short:
            assert v.adjusted_p is not None and v.p_value is not None and v.adjusted_p >= v.p_value - 1e-12
            assert (v.verdict == "regressed") == (v.adjusted_p <= 0.05)
            if v.verdict == "regressed":
                assert v.diff is not None and v.diff > 0
    expected = 1 if r.regressed else 2 if (r.undecided or not cells) else 0
    assert r.exit_code == expected


def test_gate_flags_a_clear_regression_and_sorts_it_first() -> None:
    cells = [CellCounts("queue", "none", 0, 50, 0, 50), CellCounts("queue", "kill", 5, 50, 30, 50),
             CellCounts("broker-ids", "pause", 2, 3, 1, 60)]
    r = gate(cells, min_runs=20)
    assert [(c.counts.nemesis, c.verdict) for c in r.cells] == [
        ("kill", "regressed"), ("none", "pass"), ("pause", "too-few-runs")]
    assert r.exit_code == 1 and r.cells[0].test == "boschloo"


def test_gate_with_only_short_cells_is_undecided() -> None:
    r = gate([CellCounts("queue", "kill", 0, 5, 5, 5)], min_runs=20)
    assert r.exit_code == 2 and r.cells[0].p_value is None


def test_big_tables_fall_back_to_fisher() -> None:
    p, used = one_sided_p(100, 1000, 150, 1000)
    assert used == "fisher" and p == fisher_p(100, 1000, 150, 1000)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"alpha": 0.0}, "alpha"), ({"alpha": 1.0}, "alpha"), ({"min_runs": 0}, "min_runs"),
    ({"correction": "bonferroni"}, "correction"), ({"test": "z"}, "test"),
], ids=["alpha-zero", "alpha-one", "min-runs-zero", "unknown-correction", "unknown-test"])
def test_gate_rejects_bad_settings(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        gate([CellCounts("q", "k", 0, 5, 0, 5)], **kwargs)


def test_gate_rejects_a_cell_given_twice_and_impossible_counts() -> None:
    with pytest.raises(ValueError, match="given twice"):
        gate([CellCounts("q", "k", 0, 5, 0, 5), CellCounts("q", "k", 1, 5, 0, 5)])
    with pytest.raises(ValueError, match="qxk: baseline"):
        CellCounts("q", "k", 6, 5, 0, 5)
