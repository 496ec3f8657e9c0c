"""The release gate's decision core (spark_analysis.sequential): its numbers against hand-computed ones, the safety
rule, the SPRT step by step, its size computed exactly, the family-wise bound by seeded simulation, monotonicity,
order independence, the budget allocator, and bad input."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from spark_analysis.sequential import (
    Cell,
    FaultFigures,
    GateSettings,
    RunOutcome,
    SequentialGate,
    SprtDesign,
    alpha_split,
    compare_paired,
    decide,
    rule_of_three,
    safety_runs_needed,
)

NO_PERF = GateSettings(perf_runs=0)


def run(cell: str, build: str, seed: int, bad: bool = False, *, kinds: Sequence[str] = ("lost-write",),
        faults: dict[str, FaultFigures] | None = None, verdict: str | None = None) -> RunOutcome:
    if verdict is None:
        verdict = "invalid" if bad else "valid"
    return RunOutcome(cell, build, seed, verdict, tuple(kinds) if verdict == "invalid" else (), faults or {},
                      ref=f"{cell}/{build}/{seed}")


def pairs(cell: str, outcomes: Sequence[tuple[bool, bool]], first: int = 1, **kw: object) -> list[RunOutcome]:
    """(baseline bad, candidate bad) per seed -> both runs of each seed."""
    out = []
    for i, (b, c) in enumerate(outcomes):
        out += [run(cell, "baseline", first + i, b, **kw), run(cell, "candidate", first + i, c, **kw)]  # type: ignore[arg-type]
    return out


# -- numbers ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("power", "min_rate", "n"), [
    pytest.param(0.95, 0.10, 29, id="default: 0.9^29=0.047, 0.9^28=0.052"),
    pytest.param(0.90, 0.10, 22, id="0.9^22=0.098, 0.9^21=0.109"),
    pytest.param(0.95, 0.05, 59, id="0.95^59=0.0485, 0.95^58=0.051"),
    pytest.param(0.99, 0.50, 7, id="0.5^7=0.0078, 0.5^6=0.0156"),
    pytest.param(0.75, 0.50, 2, id="0.5^2=0.25 exactly"),
])
def test_safety_runs_needed_is_the_smallest_n(power: float, min_rate: float, n: int) -> None:
    assert safety_runs_needed(power, min_rate) == n


@given(st.floats(0.51, 0.999), st.floats(0.01, 0.9))
def test_safety_runs_needed_definition(power: float, min_rate: float) -> None:
    n = safety_runs_needed(power, min_rate)
    assert (1 - min_rate) ** n <= 1 - power + 1e-12
    assert n == 1 or (1 - min_rate) ** (n - 1) > 1 - power - 1e-12


def test_rule_of_three() -> None:
    assert rule_of_three(29) == pytest.approx(3 / 29)
    assert rule_of_three(0) == 1.0 and rule_of_three(2) == 1.0


def test_sprt_design_numbers() -> None:
    d = SprtDesign(alpha=0.025, beta=0.05, odds_ratio=3.0)
    assert d.theta1 == 0.75
    assert d.up == pytest.approx(math.log(1.5)) and d.down == pytest.approx(math.log(0.5))
    assert d.upper == pytest.approx(math.log(40)) and d.lower == pytest.approx(math.log(0.05))


@pytest.mark.parametrize(("kinds", "s", "expected"), [
    pytest.param(["rate"], GateSettings(), (0.025, 0.025), id="one rate cell: half each"),
    pytest.param(["rate", "rate", "safety", "safety"], GateSettings(), (0.0125, 0.00625), id="two rate of four"),
    pytest.param(["safety", "safety"], GateSettings(), (0.0, 0.025), id="no rate cell: all to perf"),
    pytest.param(["rate", "rate"], NO_PERF, (0.025, 0.0), id="no perf: all to rates"),
    pytest.param(["rate", "safety"], GateSettings(perf_share=0.2), (0.04, 0.005), id="perf share 0.2"),
])
def test_alpha_split(kinds: list[str], s: GateSettings, expected: tuple[float, float]) -> None:
    cells = [Cell(f"c{i}", k) for i, k in enumerate(kinds)]
    got = alpha_split(cells, s)
    assert got == pytest.approx(expected)
    rate_cells = kinds.count("rate")
    assert got[0] * rate_cells + got[1] * len(cells) == pytest.approx(s.alpha)  # the family's levels sum to alpha


# -- the paired comparison --------------------------------------------------------------------------------------

def test_compare_paired_constant_ratio_is_exact() -> None:
    b = [1.0, 2.0, 0.5, 3.0, 1.5, 0.8, 2.2, 0.9, 1.1, 4.0]
    c = [2 * x for x in b]
    r = compare_paired(b, c, alpha=0.01, min_effect=0.25)
    assert r.ratio == pytest.approx(2.0) and r.ratio_low == pytest.approx(2.0) and r.ratio_high == pytest.approx(2.0)
    # every |d| tied: scipy's normal approximation with the tie correction (the permutation p would be 2^-10)
    assert r.p_value < 0.005 and r.regression
    same = compare_paired(b, b, alpha=0.01, min_effect=0.25)
    assert same.p_value == 1.0 and same.ratio == 1.0 and not same.regression


def test_compare_paired_a_small_effect_is_never_a_regression() -> None:
    b = [1.0 + i / 10 for i in range(30)]
    r = compare_paired(b, [1.1 * x for x in b], alpha=0.05, min_effect=0.25)
    assert r.p_value < 1e-6 and r.ratio == pytest.approx(1.1) and not r.regression


@settings(max_examples=60, deadline=None)
@given(st.integers(6, 45), st.integers(0, 10_000))
def test_compare_paired_p_is_scipys_exact_and_the_interval_holds_the_estimate(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    b = np.exp(rng.normal(0, 0.5, n))
    c = b * np.exp(rng.normal(0.2, 0.5, n))
    r = compare_paired(b, c, alpha=0.05, min_effect=0.25)
    d = np.log(c) - np.log(b)
    assert r.p_value == pytest.approx(stats.wilcoxon(d, alternative="greater", method="exact").pvalue, abs=1e-12)
    assert r.ratio_low <= r.ratio + 1e-12 and r.ratio <= r.ratio_high + 1e-12


def test_compare_paired_interval_matches_the_tables() -> None:
    # n = 10: the two-sided 5% critical value of the signed-rank statistic is 8, so the interval runs from the 9th
    # smallest to the 9th largest Walsh average (Hollander & Wolfe)
    d = np.array([0.1, -0.25, 0.4, 0.55, 0.7, 0.85, -0.05, 1.15, 1.3, 1.45])
    walsh = np.sort([(d[i] + d[j]) / 2 for i in range(10) for j in range(i, 10)])
    r = compare_paired(np.ones(10), np.exp(d), alpha=0.05, min_effect=0.25)
    assert math.log(r.ratio_low) == pytest.approx(walsh[8]) and math.log(r.ratio_high) == pytest.approx(walsh[-9])
    assert math.log(r.ratio) == pytest.approx(np.median(walsh))


# -- the safety rule ----------------------------------------------------------------------------------------------

def test_one_candidate_anomaly_fails_a_safety_cell_at_once_and_names_a_regression() -> None:
    gate = SequentialGate([Cell("s", "safety")])
    gate.observe(run("s", "candidate", 1, True, kinds=("lost-write", "duplicate")))
    report = gate.report()
    c = report.of("s")
    assert c.decision == "fail" and report.exit_code == 1 and gate.finished
    assert "regression: duplicate, lost-write" in c.reason and "s/candidate/1" in c.reason
    assert c.new_kinds == ("duplicate", "lost-write") and c.failing_refs == ("s/candidate/1",)
    assert gate.next_pairs(5) == ()  # stop_on_failure


def test_a_safety_failure_says_when_the_baseline_showed_the_same_kind() -> None:
    outcomes = [run("s", "baseline", 1, True), run("s", "candidate", 1), run("s", "baseline", 2),
                run("s", "candidate", 2, True, kinds=("lost-write", "unseen"))]
    c = decide([Cell("s", "safety")], outcomes).of("s")
    assert c.decision == "fail"
    assert "old bug still there: lost-write" in c.reason and "regression: unseen" in c.reason
    assert c.new_kinds == ("unseen",) and c.baseline_kinds == ("lost-write",)


def test_a_safety_cell_passes_after_n_clean_runs_with_the_rule_of_three() -> None:
    n = GateSettings().safety_runs
    report = decide([Cell("s", "safety")], pairs("s", [(False, False)] * n), NO_PERF)
    c = report.of("s")
    assert c.decision == "pass" and report.exit_code == 0
    assert f"{n} clean candidate runs" in c.reason and f"3/{n} = {3 / n:.3f}" in c.reason
    short = decide([Cell("s", "safety")], pairs("s", [(False, False)] * (n - 1)), NO_PERF)
    assert short.of("s").decision == "undecided" and short.exit_code == 2


def test_unknown_and_crashed_runs_do_not_count_toward_a_safety_pass() -> None:
    n = GateSettings().safety_runs
    outcomes = pairs("s", [(False, False)] * (n - 1))
    outcomes += [run("s", "baseline", n), run("s", "candidate", n, verdict="unknown"),
                 run("s", "baseline", n + 1), run("s", "candidate", n + 1, verdict="crashed")]
    c = decide([Cell("s", "safety")], outcomes, NO_PERF).of("s")
    assert c.decision == "undecided" and c.candidate_unknown == 1 and c.candidate_crashed == 1
    assert c.candidate_clean == n - 1 and c.runs_used == 2 * (n + 1)


def test_a_proof_arriving_after_a_pass_still_fails_the_cell() -> None:
    n = GateSettings().safety_runs
    gate = SequentialGate([Cell("s", "safety")], NO_PERF)
    for o in pairs("s", [(False, False)] * n):
        gate.observe(o)
    assert gate.report().of("s").decision == "pass"
    gate.observe(run("s", "candidate", n + 7, True))
    assert gate.report().of("s").decision == "fail"


# -- the rate rule: the SPRT step by step --------------------------------------------------------------------------

def test_the_sprt_fails_a_rate_cell_on_the_tenth_candidate_only_discordant_pair() -> None:
    # one rate cell, perf on: alpha_cell = 0.025, upper = log 40 = 3.689; each step log 1.5 = 0.405: 9 steps
    # give 3.649, 10 give 4.055
    gate = SequentialGate([Cell("r", "rate")])
    for o in pairs("r", [(False, True)] * 9 + [(True, True), (False, False)]):
        gate.observe(o)
    c = gate.report().of("r")
    assert c.decision == "running" and c.discordant_candidate == 9 and c.log_lr == pytest.approx(9 * math.log(1.5))
    for o in pairs("r", [(False, True)], first=12):
        gate.observe(o)
    c = gate.report().of("r")
    assert c.decision == "fail"
    assert "the bad one in 10 of 10 discordant pairs" in c.reason and c.anytime_p == pytest.approx(1.5**-10)


def test_the_sprt_passes_a_rate_cell_on_the_fifth_baseline_only_discordant_pair() -> None:
    # lower = log 0.05 = -2.996; each step log 0.5 = -0.693: four give -2.77, five -3.47
    outcomes = pairs("r", [(True, False)] * 4)
    assert decide([Cell("r", "rate")], outcomes, NO_PERF).of("r").decision == "undecided"
    c = decide([Cell("r", "rate")], outcomes + pairs("r", [(True, False)], first=5), NO_PERF).of("r")
    assert c.decision == "pass" and "no worse" in c.reason


def test_a_rate_cell_where_nothing_is_ever_bad_passes_by_the_zero_rule() -> None:
    n = GateSettings().safety_runs
    c = decide([Cell("r", "rate")], pairs("r", [(False, False)] * n), NO_PERF).of("r")
    assert c.decision == "pass" and f"no bad candidate run in {n}" in c.reason


def test_unknown_is_bad_in_a_rate_cell() -> None:
    outcomes = []
    for seed in range(1, 11):
        outcomes += [run("r", "baseline", seed), run("r", "candidate", seed, verdict="unknown")]
    assert decide([Cell("r", "rate")], outcomes).of("r").decision == "fail"


def test_crashed_runs_are_counted_and_their_pairs_skipped() -> None:
    outcomes = pairs("r", [(False, True)] * 9)
    outcomes += [run("r", "baseline", 10), run("r", "candidate", 10, verdict="crashed")]
    c = decide([Cell("r", "rate")], outcomes).of("r")
    assert c.decision == "undecided" and c.pairs == 9 and c.candidate_crashed == 1 and c.runs_used == 20


def _exact_sprt_size(design: SprtDesign, theta: float, max_pairs: int) -> float:
    """P(the discordant-pair walk reaches ``upper`` before ``lower`` within ``max_pairs`` steps), by exact dynamic
    programming over (candidate-bad, baseline-bad) counts."""
    alive = {(0, 0): 1.0}
    hit = 0.0
    for _ in range(max_pairs):
        nxt: dict[tuple[int, int], float] = {}
        for (u, v), p in alive.items():
            for (du, dv), q in (((1, 0), theta), ((0, 1), 1 - theta)):
                uu, vv = u + du, v + dv
                llr = uu * design.up + vv * design.down
                if llr >= design.upper - 1e-12:
                    hit += p * q
                elif llr > design.lower + 1e-12:
                    nxt[(uu, vv)] = nxt.get((uu, vv), 0.0) + p * q
        alive = nxt
    return hit


@pytest.mark.parametrize("alpha", [0.05, 0.025, 0.005])
@pytest.mark.parametrize("theta", [0.5, 0.4, 0.2])
def test_sprt_size_is_at_most_alpha_exactly(alpha: float, theta: float) -> None:
    """Under H0 (a discordant pair is the candidate's with probability theta <= 1/2) the chance of ever failing
    the cell, computed exactly over 400 discordant pairs, stays below the cell's alpha (Ville's inequality)."""
    d = SprtDesign(alpha, 0.05, 3.0)
    assert _exact_sprt_size(d, theta, 400) <= alpha


def test_sprt_power_at_the_design_alternative_exactly() -> None:
    d = SprtDesign(0.025, 0.05, 3.0)
    assert _exact_sprt_size(d, 0.75, 400) >= 0.95


def test_family_wise_false_alarms_by_seeded_simulation() -> None:
    """Six rate cells at base rates 0.05-0.5 and two safety cells, identical builds, figures identically
    distributed: the share of gates with any failure over seeded trials stays under alpha = 0.05 (the RNG is
    seeded, so the figure is the same on every run; Bonferroni makes the expected share well below 0.05)."""
    rng = random.Random(20261127)
    cells = [Cell(f"s{i}", "safety") for i in range(2)] + [Cell(f"r{r}", "rate") for r in (5, 10, 20, 30, 40, 50)]
    rates = {c.key: (int(c.key[1:]) / 100 if c.kind == "rate" else 0.0) for c in cells}
    alarms = 0
    trials = 40
    for _ in range(trials):
        gate = SequentialGate(cells, GateSettings(budget_runs=8 * 100))
        while not gate.finished:
            reqs = gate.next_pairs(8)
            if not reqs:
                break
            for req in reqs:
                for build in ("baseline", "candidate"):
                    bad = rng.random() < rates[req.cell]
                    figs = {"kill": FaultFigures(rng.lognormvariate(0, 0.5), rng.lognormvariate(1, 0.5),
                                                 rng.lognormvariate(7, 0.3))}
                    gate.observe(run(req.cell, build, req.seed, bad, faults=figs))
        alarms += gate.report(final=True).exit_code == 1
    share = alarms / trials
    assert share <= 0.05, share


# -- monotonicity and order ---------------------------------------------------------------------------------------

pair_lists = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=0, max_size=80)


@settings(max_examples=150, deadline=None)
@given(pair_lists, st.data(), st.sampled_from(["rate", "safety"]))
def test_more_candidate_anomalies_never_turn_a_failure_into_a_pass(
        outcomes: list[tuple[bool, bool]], data: st.DataObject, kind: str) -> None:
    worse = [(b, c or data.draw(st.booleans())) for b, c in outcomes]
    before = decide([Cell("x", kind)], pairs("x", outcomes), NO_PERF).of("x").decision
    after = decide([Cell("x", kind)], pairs("x", worse), NO_PERF).of("x").decision
    if before == "fail":
        assert after == "fail"
    if after == "pass":
        assert before == "pass"


@settings(max_examples=80, deadline=None)
@given(pair_lists, st.randoms(use_true_random=False), st.sampled_from(["rate", "safety"]))
def test_the_order_runs_finish_in_does_not_change_the_verdict(
        outcomes: list[tuple[bool, bool]], rnd: random.Random, kind: str) -> None:
    """Seeds handed out by the allocator and finished in any order give the batch verdict in seed order."""
    runs = pairs("x", outcomes)
    s = GateSettings(perf_runs=0, budget_runs=10_000, stop_on_failure=False)
    gate = SequentialGate([Cell("x", kind)], s)
    issued = [r.seed for r in gate.next_pairs(len(outcomes))]
    kept = [r for r in runs if r.seed in issued]
    rnd.shuffle(kept)
    for r in kept:
        gate.observe(r)
    live = gate.report(final=True).of("x")
    batch = decide([Cell("x", kind)], kept, s).of("x")
    assert (live.decision, live.pairs, live.log_lr) == (batch.decision, batch.pairs, batch.log_lr)


# -- the budget allocator ------------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(2, 120), st.lists(st.integers(1, 6), min_size=1, max_size=60), st.randoms(use_true_random=False),
       st.lists(st.sampled_from(["safety", "rate"]), min_size=1, max_size=4))
def test_the_allocator_never_exceeds_the_budget(budget: int, slots: list[int], rnd: random.Random,
                                                kinds: list[str]) -> None:
    cells = [Cell(f"c{i}", k) for i, k in enumerate(kinds)]
    gate = SequentialGate(cells, GateSettings(budget_runs=budget, stop_on_failure=False))
    in_flight: list[tuple[str, str, int]] = []
    for n in slots:
        for req in gate.next_pairs(n):
            in_flight += [(req.cell, b, req.seed) for b in ("baseline", "candidate")]
        assert gate.runs_used + gate.runs_in_flight <= budget
        assert gate.runs_in_flight == len(in_flight)
        rnd.shuffle(in_flight)
        for cell, build, seed in in_flight[: rnd.randint(0, len(in_flight))]:
            verdict = rnd.choice(["valid", "valid", "valid", "invalid", "unknown", "crashed"])
            gate.observe(RunOutcome(cell, build, seed, verdict))
            in_flight.remove((cell, build, seed))
    assert gate.runs_used + gate.runs_in_flight <= budget


def test_the_allocator_moves_budget_to_open_cells_and_stops_at_the_budget() -> None:
    gate = SequentialGate([Cell("a", "safety"), Cell("b", "rate")], GateSettings(budget_runs=200, perf_runs=0))
    first = gate.next_pairs(4)
    assert [(r.cell, r.seed) for r in first] == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    for r in first:  # a fails at once; b keeps getting pairs
        gate.observe(run(r.cell, "baseline", r.seed))
        gate.observe(run(r.cell, "candidate", r.seed, r.cell == "a" and r.seed == 1))
    assert gate.next_pairs(4) == ()  # stop on failure
    gate2 = SequentialGate([Cell("a", "safety"), Cell("b", "rate")],
                           GateSettings(budget_runs=12, perf_runs=0, stop_on_failure=False))
    issued = gate2.next_pairs(100)
    assert len(issued) == 6 and gate2.runs_in_flight == 12
    for r in issued:
        for b in ("baseline", "candidate"):
            gate2.observe(run(r.cell, b, r.seed, b == "baseline"))
    assert gate2.next_pairs(1) == () and gate2.finished
    report = gate2.report(final=True)
    assert report.exit_code == 2 and {c.decision for c in report.cells} == {"undecided"}


def test_a_safety_cell_asks_for_no_more_pairs_than_it_can_use() -> None:
    s = GateSettings(perf_runs=10)
    gate = SequentialGate([Cell("a", "safety")], s)
    assert len(gate.next_pairs(1000)) == s.safety_runs  # n clean runs; the 10-pair perf sample is inside them


# -- performance comparisons inside the machine --------------------------------------------------------------------

def test_a_slower_recovery_fails_the_cell_with_its_ratio() -> None:
    rng = random.Random(3)
    outcomes = []
    for seed in range(1, 31):
        base = rng.lognormvariate(0, 0.3)
        for build, factor in (("baseline", 1.0), ("candidate", 2.0)):
            figs = {"partition": FaultFigures(recovery_s=base * factor * rng.lognormvariate(0, 0.1),
                                              unavailable_s=3.0, p99_latency_ms=None)}
            outcomes.append(run("s", build, seed, faults=figs))
    report = decide([Cell("s", "safety")], outcomes)
    c = report.of("s")
    assert c.decision == "fail" and report.exit_code == 1
    (rec,) = [p for p in c.perf if p.metric == "recovery_s"]
    assert rec.regression and 1.7 < rec.ratio < 2.3 and rec.ratio_low < rec.ratio < rec.ratio_high
    assert rec.alpha == pytest.approx(0.05 / 2)  # two comparisons made: recovery and unavailability
    assert "partition recovery_s" in c.reason


# -- bad input -----------------------------------------------------------------------------------------------------

BAD = [
    pytest.param(lambda: Cell("", "rate"), "Cell.key", id="cell-empty-key"),
    pytest.param(lambda: Cell("x", "flaky"), "Cell.kind", id="cell-kind"),
    pytest.param(lambda: RunOutcome("x", "nightly", 1, "valid"), "RunOutcome.build", id="outcome-build"),
    pytest.param(lambda: RunOutcome("x", "baseline", 1, "ok"), "RunOutcome.verdict", id="outcome-verdict"),
    pytest.param(lambda: RunOutcome("x", "baseline", True, "valid"), "RunOutcome.seed", id="outcome-seed-bool"),
    pytest.param(lambda: RunOutcome("x", "baseline", 1, "valid", ("lost-write",)), "RunOutcome.verdict",
                 id="outcome-anomaly-on-valid"),
    pytest.param(lambda: RunOutcome("x", "baseline", 1, "invalid", "lost-write"), "RunOutcome.anomalies",  # type: ignore[arg-type]
                 id="outcome-anomalies-str"),
    pytest.param(lambda: RunOutcome("x", "baseline", 1, "crashed", faults={"kill": FaultFigures(1.0)}),
                 "RunOutcome.faults", id="outcome-crashed-with-figures"),
    pytest.param(lambda: RunOutcome("x", "baseline", 1, "valid", faults={"kill": 1.0}), "RunOutcome.faults",  # type: ignore[dict-item]
                 id="outcome-faults-type"),
    pytest.param(lambda: FaultFigures(recovery_s=-1.0), "FaultFigures.recovery_s", id="figures-negative"),
    pytest.param(lambda: FaultFigures(unavailable_s=math.nan), "FaultFigures.unavailable_s", id="figures-nan"),
    pytest.param(lambda: FaultFigures(p99_latency_ms=True), "FaultFigures.p99_latency_ms", id="figures-bool"),
    pytest.param(lambda: GateSettings(alpha=0.0), "GateSettings.alpha", id="settings-alpha"),
    pytest.param(lambda: GateSettings(power=0.4), "GateSettings.power", id="settings-power"),
    pytest.param(lambda: GateSettings(min_rate=1.0), "GateSettings.min_rate", id="settings-min-rate"),
    pytest.param(lambda: GateSettings(min_effect=-0.1), "GateSettings.min_effect", id="settings-min-effect"),
    pytest.param(lambda: GateSettings(budget_runs=1), "GateSettings.budget_runs", id="settings-budget"),
    pytest.param(lambda: GateSettings(rate_odds_ratio=1.0), "GateSettings.rate_odds_ratio", id="settings-odds"),
    pytest.param(lambda: GateSettings(perf_runs=-1), "GateSettings.perf_runs", id="settings-perf-runs"),
    pytest.param(lambda: GateSettings(perf_share=1.0), "GateSettings.perf_share", id="settings-perf-share"),
    pytest.param(lambda: GateSettings(perf_metrics=("rto",)), "GateSettings.perf_metrics", id="settings-metrics"),
    pytest.param(lambda: GateSettings(stop_on_failure=1), "GateSettings.stop_on_failure", id="settings-stop"),  # type: ignore[arg-type]
    pytest.param(lambda: SequentialGate([]), "cells", id="gate-no-cells"),
    pytest.param(lambda: SequentialGate([Cell("a", "rate"), Cell("a", "safety")]), "declared twice",
                 id="gate-duplicate-cell"),
    pytest.param(lambda: SequentialGate([Cell("a", "rate")]).observe(run("b", "baseline", 1)), "RunOutcome.cell",
                 id="observe-unknown-cell"),
    pytest.param(lambda: SequentialGate([Cell("a", "rate")]).next_pairs(-1), "max_pairs", id="next-pairs-negative"),
    pytest.param(lambda: compare_paired([1.0], [1.0], alpha=0.05, min_effect=0.25), "at least 2", id="compare-short"),
    pytest.param(lambda: compare_paired([1.0, 2.0], [1.0], alpha=0.05, min_effect=0.25), "compare_paired",
                 id="compare-lengths"),
    pytest.param(lambda: safety_runs_needed(1.0, 0.1), "power", id="safety-power"),
]


@pytest.mark.parametrize(("make", "fragment"), BAD)
def test_bad_input_raises_value_error_naming_the_field(make: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        make()  # type: ignore[operator]


def test_a_finished_run_observed_twice_is_refused_but_a_crashed_one_may_be_retried() -> None:
    gate = SequentialGate([Cell("a", "rate")])
    gate.observe(run("a", "baseline", 1, verdict="crashed"))
    gate.observe(run("a", "baseline", 1))
    with pytest.raises(ValueError, match="observed twice"):
        gate.observe(run("a", "baseline", 1))
    assert gate.runs_used == 2
