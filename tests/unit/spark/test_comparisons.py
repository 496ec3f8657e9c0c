"""Version-vs-baseline comparisons for the dashboard (spark_analysis.comparisons): the gate per version pair."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_analysis.comparisons import comparison_rows, default_pair, order_versions, version_key
from spark_analysis.regression import CellCounts, gate


@pytest.mark.parametrize(("versions", "ordered"), [
    (["0.10.0", "0.2.0", "0.9.1"], ["0.2.0", "0.9.1", "0.10.0"]),  # release order, not text order
    (["nightly", "1.0", "unknown", "0.3.0rc1", "0.3.0"], ["0.3.0rc1", "0.3.0", "1.0", "nightly"]),
    (["b", "a", "a"], ["a", "b"]),
    (["unknown"], []),
], ids=["numeric", "labels-last-unknown-dropped", "labels-deduplicated", "only-unknown"])
def test_order_versions(versions: list[str], ordered: list[str]) -> None:
    assert order_versions(versions) == ordered
    assert sorted(ordered, key=version_key) == ordered


def test_default_pair_is_the_newest_against_the_one_before() -> None:
    assert default_pair(["0.3.0", "0.10.0", "0.2.0"]) == ("0.3.0", "0.10.0")
    assert default_pair(["0.3.0", "unknown"]) is None


def test_a_regressed_cell_is_flagged_for_all_backends_and_for_its_own() -> None:
    counts = [
        ("queue", "kill", "0.2.0", "local", 30, 3), ("queue", "kill", "0.3.0", "local", 30, 20),
        ("queue", "kill", "0.2.0", "docker", 30, 3), ("queue", "kill", "0.3.0", "docker", 30, 3),
        ("queue", "none", "0.2.0", "local", 30, 0), ("queue", "none", "0.3.0", "local", 5, 0),
    ]
    rows = comparison_rows(counts, min_runs=20)
    got = {(r["backend"], r["workload"], r["nemesis"]): r["verdict"] for r in rows}
    assert got == {
        ("all", "queue", "kill"): "regressed", ("all", "queue", "none"): "too-few-runs",
        ("docker", "queue", "kill"): "pass",
        ("local", "queue", "kill"): "regressed", ("local", "queue", "none"): "too-few-runs",
    }
    kill = next(r for r in rows if (r["backend"], r["nemesis"]) == ("all", "kill"))
    assert (kill["k_b"], kill["n_b"], kill["k_c"], kill["n_c"]) == (6, 60, 23, 60)
    assert kill["diff"] == pytest.approx(17 / 60)
    assert kill["diff_low"] < kill["diff"] < kill["diff_high"]
    assert {(r["baseline"], r["candidate"]) for r in rows} == {("0.2.0", "0.3.0")}


def test_every_older_newer_pair_of_the_newest_versions_is_compared() -> None:
    counts = [("q", "k", v, "local", 25, 1) for v in ("0.1.0", "0.2.0", "0.3.0", "0.4.0")]
    pairs = {(r["baseline"], r["candidate"]) for r in comparison_rows(counts, max_versions=3)}
    assert pairs == {("0.2.0", "0.3.0"), ("0.2.0", "0.4.0"), ("0.3.0", "0.4.0")}


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"max_versions": 1}, "max_versions must be >= 2"),
    ({"alpha": 0.0}, "alpha must be in"),
    ({"min_runs": 0}, "min_runs must be >= 1"),
], ids=["max-versions", "alpha", "min-runs"])
def test_bad_parameters_are_named(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        comparison_rows([("q", "k", "1", "b", 30, 1), ("q", "k", "2", "b", 30, 2)], **kwargs)  # type: ignore[arg-type]


def test_a_count_row_with_more_anomalous_than_runs_is_rejected() -> None:
    with pytest.raises(ValueError, match="anomalous 5 is outside"):
        comparison_rows([("q", "k", "1", "b", 3, 5)])


count_rows = st.lists(st.tuples(
    st.sampled_from(["queue", "ids"]), st.sampled_from(["kill", "none"]), st.sampled_from(["0.1", "0.2", "0.3"]),
    st.sampled_from(["local", "docker"]), st.integers(0, 40), st.floats(0, 1)), max_size=24).map(
    lambda rows: [(w, n, v, b, runs, round(runs * f)) for w, n, v, b, runs, f in rows])


@given(count_rows)
def test_each_comparison_is_the_gate_on_the_summed_counts(rows: list[tuple[str, str, str, str, int, int]]) -> None:
    out = comparison_rows(rows, min_runs=5)
    backends = {b for *_, b, _, _ in rows}
    for scope in {r["backend"] for r in out}:
        for base, cand in {(r["baseline"], r["candidate"]) for r in out if r["backend"] == scope}:
            assert order_versions([base, cand]) == [base, cand]
            mine = [r for r in out if (r["backend"], r["baseline"], r["candidate"]) == (scope, base, cand)]
            cells = {}
            for w, n, v, b, runs, bad in rows:
                if scope != "all" and b != scope:
                    continue
                kb, nb, kc, nc = cells.get((w, n), (0, 0, 0, 0))
                if v == base:
                    kb, nb = kb + bad, nb + runs
                elif v == cand:
                    kc, nc = kc + bad, nc + runs
                cells[(w, n)] = (kb, nb, kc, nc)
            want = gate([CellCounts(w, n, *c) for (w, n), c in sorted(cells.items()) if c[1] or c[3]], min_runs=5)
            assert [(r["workload"], r["nemesis"], r["verdict"], r["adj_p"]) for r in mine] == [
                (c.counts.workload, c.counts.nemesis, c.verdict, c.adjusted_p) for c in want.cells]
    assert all(r["backend"] == "all" for r in out) or len(backends) > 1
