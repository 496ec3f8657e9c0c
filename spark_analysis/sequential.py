"""The release gate's decision core: baseline and candidate builds run side by side, cell by cell, and the gate
stops each cell as soon as the evidence decides it (pure: no I/O, no clock, no randomness).

Vocabulary: a **cell** is one workload x fault package x nemesis mode (its ``key`` is any text the driver
chooses, e.g. ``"queue x partition+kill x random"``).  A **run** is one test of one **build** (``baseline`` or
``candidate``) in one cell with one **seed**; the two builds' runs of the same cell and seed form a **pair**.  A
run's **verdict** is ``valid``, ``invalid``, ``unknown`` or ``crashed`` (the harness crashed: no evidence about
the cluster, counted and never used); its **anomalies** are the kinds of definite anomalies its checkers found.
A **safety cell** runs with safe settings, where any definite anomaly is a bug; a **rate cell** expects
anomalies (unsafe settings, known bugs, checkers that may say ``unknown``) and compares how often they happen.

API (everything the driver needs; every type is a frozen dataclass validated when built, every bad value raises
``ValueError`` naming the field):

* :class:`Cell` ``(key, kind)`` and :class:`GateSettings` ``(alpha, power, min_rate, min_effect, budget_runs,
  rate_odds_ratio, perf_runs, perf_share, perf_metrics, stop_on_failure, first_seed)`` declare the gate;
* :class:`RunOutcome` ``(cell, build, seed, verdict, anomalies, faults, ref)`` is one finished run, with
  :class:`FaultFigures` ``(recovery_s, unavailable_s, p99_latency_ms)`` per fault kind;
* :class:`SequentialGate` is the state machine: ``observe(outcome)`` after each run, ``next_pairs(n)`` for the
  (cell, seed) pairs to start next (run both builds with that seed), ``finished`` to know when to stop,
  ``report(final=...)`` for the verdicts; :func:`decide` does the same in batch over a fixed set of runs;
* :class:`GateReport` (per cell a :class:`CellReport`, with :class:`PerfComparison` rows) and its
  ``exit_code`` (0 pass, 1 regression, 2 undecided within the budget); the pure text helpers
  :func:`spark_analysis.gate.render_table`, :func:`~spark_analysis.gate.render_junit` and
  :func:`~spark_analysis.gate.summary_line` turn it into the table, JUnit XML and one summary line.

The driver's loop::

    gate = SequentialGate(cells, settings)
    while not gate.finished:
        for req in gate.next_pairs(free_slots):     # each: run both builds of req.cell with req.seed
            start(req)
        gate.observe(outcome_of_a_finished_run)     # one at a time, in any order
    report = gate.report(final=True)                # undecided cells are "undecided" from here on

Theory of operation:

1. **Safety cells: proof, not a sample.**  A candidate run with an ``invalid`` verdict (a checker proved a
   violation; its definite anomaly kinds say which) fails the cell the moment it is observed, whatever else
   was seen; the report says whether the baseline showed the same kinds in that cell (an old bug still there)
   or not (a regression), and which runs to replay.  To pass, the first ``n`` usable candidate runs in seed
   order must be clean (``valid``), where ``n`` is the smallest count with ``(1 - min_rate)^n <= 1 - power``
   (:func:`safety_runs_needed`; 29 for power 0.95 and min_rate 0.10): a candidate that is anomalous in at least
   ``min_rate`` of its runs passes with probability at most ``1 - power``.  The report states the rule-of-three
   bound: ``n`` clean runs bound the anomaly rate below ``3 / n`` at 95% confidence.  ``unknown`` runs are
   neither clean nor anomalous: they do not count toward ``n`` (the report counts them).
2. **Rate cells: an SPRT on the discordant pairs.**  A run is *bad* when its verdict is not ``valid`` (or it
   lists a definite anomaly).  In a pair where exactly one build is bad, under H0 "the candidate is no worse"
   the bad one is the candidate's with probability ``P(c bad, b good) / (P(c bad, b good) + P(b bad, c good))
   <= 1/2``, whatever the base rate and however the two runs of a seed are correlated (the difference of those
   two probabilities is the difference of the two builds' rates).  So each discordant pair is a coin, and
   Wald's sequential probability ratio test of ``theta = 1/2`` against ``theta1 = OR / (1 + OR)``
   (``OR = rate_odds_ratio``, default 3: a rate doubling from 0.3 to 0.6 has odds ratio 3.5) adds
   ``log(2 theta1)`` for a candidate-bad pair and ``log(2 (1 - theta1))`` for a baseline-bad one.  The cell
   fails (regression) when the log-likelihood ratio reaches ``log(1 / alpha_cell)`` and passes when it falls
   to ``log(1 - power)``.  Why this design: it needs no model of the base rate (a fixed-size two-sample test
   must plan for the worst one), it is exact at any count, and the upper bound is **anytime-valid**: under H0
   the likelihood ratio is a non-negative supermartingale, so by Ville's inequality it ever reaches
   ``1 / alpha_cell`` with probability at most ``alpha_cell`` -- however the budget truncates the test and
   whenever the allocator pauses or resumes the cell.  (A group-sequential design with alpha spending needs
   its looks planned in advance; here the looks are every pair.)  Pairs are processed in seed order, never in
   completion order, so a run that takes longer because it is anomalous cannot reorder the evidence; a pair
   with a crashed run is skipped.  A rate cell whose first ``n`` usable candidate runs (rule 1's ``n``) are all
   clean also passes: both builds are then too rarely bad for the pairs to say anything, and the candidate's
   rate is bounded as in a safety cell.
3. **Family-wise false alarms held at ``alpha``: a weighted Bonferroni split.**  The regression claims the gate
   can make are the rate cells' SPRTs and the recovery/performance comparisons (a safety failure is a proof,
   not a statistical claim, and spends no alpha).  ``perf_share`` of ``alpha`` goes to the comparisons and the
   rest to the rate cells (all of it to one kind when the other has nothing to claim: no rate cell, or
   performance comparisons switched off); each rate cell gets an equal share of its part
   (``alpha_cell``), each cell an equal share of the comparisons' part, divided again equally among the
   comparisons that cell makes.  Every claim is made at its own level, so P(any false claim) <= the sum of
   the levels = ``alpha`` (:func:`alpha_split`).
4. **Recovery and performance under faults.**  Per fault kind and metric (:data:`METRICS`: recovery time,
   unavailability, p99 latency under that fault), the cell's first ``perf_runs`` usable pairs in seed order
   (a sample size fixed before any value is seen, so no peeking) are compared once that sample is complete
   (or, at the end of the budget, on what there is, at least :data:`PERF_MIN_PAIRS` pairs): the per-pair log
   ratio ``log(candidate / baseline)`` (values floored at :data:`FLOOR` so a zero is finite) goes into a
   one-sided Wilcoxon signed-rank test -- valid for seed-paired runs, which share a fault schedule and so
   are positively correlated, and for independent ones alike, since under H0 the two runs of a pair are
   exchangeable.  The effect is the Hodges-Lehmann estimate of the ratio (the median of the Walsh averages of
   the log ratios, exponentiated) with its 95% interval.  A comparison is a regression when the test rejects
   at its Bonferroni level AND the estimated ratio exceeds ``1 + min_effect`` (a significant 3% slowdown is
   not a release blocker).
5. **Budget allocation.**  ``next_pairs`` hands out (cell, seed) pairs while ``runs used + runs in flight + 2 <=
   budget_runs``, each to the open cell with the fewest pairs so far (ties: declaration order), so budget left
   over by decided cells flows to the undecided ones; a cell never gets more pairs than it can still use (a
   safety cell needs ``n`` clean runs and the performance sample, no more).  Seeds count up from
   ``first_seed`` per cell.  After a failure no pairs are handed out when ``stop_on_failure`` (the gate's answer
   is already 1).  A cell still open when the budget is spent is ``undecided``.

Rules of this file: deterministic in its arguments (scipy and numpy for the statistics); decisions only ever
move forward -- a regression found stays found, and a safety failure (a proof) overrides any earlier pass.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import numpy as np
from scipy import stats

from spark_analysis.regression import diff_interval

__all__ = [
    "BUILDS", "CELL_KINDS", "DECISIONS", "FLOOR", "METRICS", "PERF_MIN_PAIRS", "RUN_VERDICTS", "Cell", "CellReport",
    "FaultFigures", "GateReport", "GateSettings", "PairRequest", "PerfComparison", "RunOutcome", "SequentialGate",
    "SprtDesign", "alpha_split", "compare_paired", "decide", "rule_of_three", "safety_runs_needed",
]

BUILDS = ("baseline", "candidate")
RUN_VERDICTS = ("valid", "invalid", "unknown", "crashed")
CELL_KINDS = ("safety", "rate")
DECISIONS = ("fail", "undecided", "running", "pass")  # worst first: the table's order
METRICS = ("recovery_s", "unavailable_s", "p99_latency_ms")
PERF_MIN_PAIRS = 8  # fewer pairs cannot reach a useful level after the Bonferroni split (1/2^n is the best p)
FLOOR = {"recovery_s": 1e-3, "unavailable_s": 1e-3, "p99_latency_ms": 1e-3}  # the figures' resolution
_Z95 = 1.959963984540054


def _field_error(owner: str, name: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"{owner}.{name}: {value!r} is not {allowed}")


# -- declarations and observations ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cell:
    """A cell of the gate: ``key`` names it in every report; ``kind`` is ``safety`` or ``rate`` (module rules 1-2)."""

    key: str
    kind: str

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key.strip():
            raise _field_error("Cell", "key", self.key, "a non-empty string")
        if self.kind not in CELL_KINDS:
            raise _field_error("Cell", "kind", self.kind, f"one of {list(CELL_KINDS)}")


@dataclass(frozen=True, slots=True)
class FaultFigures:
    """One run's figures under one fault kind (None: not measured, e.g. no recovery was seen).

    ``recovery_s``: time from the heal to the first ok completion; ``unavailable_s``: how long no write succeeded
    while the fault lasted (a failover's length); ``p99_latency_ms``: p99 latency of ok client ops invoked under
    the fault.  Both gates take them from the per-run checker (:func:`checker.perf.fault_kind_figures`, the median
    over a run's windows of the kind).
    """

    recovery_s: float | None = None
    unavailable_s: float | None = None
    p99_latency_ms: float | None = None

    def __post_init__(self) -> None:
        for name in METRICS:
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
                                  or v < 0):
                raise _field_error("FaultFigures", name, v, "None or a finite number >= 0")

    def get(self, metric: str) -> float | None:
        """The figure named ``metric`` (one of :data:`METRICS`)."""
        value: float | None = getattr(self, metric)
        return value


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """One finished run as the gate sees it.

    ``anomalies`` are definite anomaly kinds (any order; stored sorted and unique) and need an ``invalid``
    verdict; a ``crashed`` run carries neither anomalies nor figures.  ``faults`` maps a fault kind to its
    :class:`FaultFigures`.  ``ref`` says how to find or replay the run (a run directory, a ``repro`` command).
    """

    cell: str
    build: str
    seed: int
    verdict: str
    anomalies: tuple[str, ...] = ()
    faults: Mapping[str, FaultFigures] = field(default_factory=dict, hash=False)
    ref: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.cell, str) or not self.cell.strip():
            raise _field_error("RunOutcome", "cell", self.cell, "a non-empty string")
        if self.build not in BUILDS:
            raise _field_error("RunOutcome", "build", self.build, f"one of {list(BUILDS)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise _field_error("RunOutcome", "seed", self.seed, "an int")
        if self.verdict not in RUN_VERDICTS:
            raise _field_error("RunOutcome", "verdict", self.verdict, f"one of {list(RUN_VERDICTS)}")
        if isinstance(self.anomalies, str) or not all(isinstance(a, str) and a for a in self.anomalies):
            raise _field_error("RunOutcome", "anomalies", self.anomalies, "a tuple of non-empty kind names")
        if self.anomalies and self.verdict != "invalid":
            raise _field_error("RunOutcome", "verdict", self.verdict,
                               f"'invalid' (the run lists definite anomalies {sorted(set(self.anomalies))})")
        if not isinstance(self.faults, Mapping) or not all(
                isinstance(k, str) and k and isinstance(v, FaultFigures) for k, v in self.faults.items()):
            raise _field_error("RunOutcome", "faults", self.faults, "a mapping of fault kind -> FaultFigures")
        if self.verdict == "crashed" and self.faults:
            raise _field_error("RunOutcome", "faults", dict(self.faults), "empty for a crashed run")
        if not isinstance(self.ref, str):
            raise _field_error("RunOutcome", "ref", self.ref, "a string")
        object.__setattr__(self, "anomalies", tuple(sorted(set(self.anomalies))))
        object.__setattr__(self, "faults", MappingProxyType(dict(sorted(self.faults.items()))))

    @property
    def bad(self) -> bool:
        """A rate cell's notion of a bad run: anything but a clean ``valid`` verdict (crashed runs are not used)."""
        return self.verdict != "valid"


@dataclass(frozen=True, slots=True)
class GateSettings:
    """How strict the gate is and how much it may run.

    Args (all keyword):
        alpha: family-wise false-alarm bound over every statistical claim (module rule 3), in (0, 0.5].
        power: the chance of catching the effects below (safety: ``min_rate``; rates: ``rate_odds_ratio``);
            in (0.5, 1).  More power costs runs: the safety cell's ``n`` grows as ``log(1 - power)``.
        min_rate: the smallest candidate anomaly rate a safety cell must catch with ``power``, in (0, 1).
        min_effect: recovery/performance slowdowns at or below ``1 + min_effect`` are not regressions, >= 0.
        budget_runs: total runs (both builds, all cells; a pair is 2) the allocator may start, >= 2.
        rate_odds_ratio: the discordance odds ratio the rate cells' SPRT is designed to detect, > 1.
        perf_runs: pairs per cell in the performance sample (0: no performance comparisons), >= 0.
        perf_share: share of ``alpha`` for the performance comparisons when there are rate cells too, in (0, 1).
        perf_metrics: which of :data:`METRICS` to compare (empty: none).
        stop_on_failure: hand out no more pairs once a cell failed (the gate's answer is then 1).
        first_seed: the first seed the allocator hands out in each cell.
    """

    alpha: float = 0.05
    power: float = 0.95
    min_rate: float = 0.10
    min_effect: float = 0.25
    budget_runs: int = 1000
    rate_odds_ratio: float = 3.0
    perf_runs: int = 30
    perf_share: float = 0.5
    perf_metrics: tuple[str, ...] = METRICS
    stop_on_failure: bool = True
    first_seed: int = 1

    def __post_init__(self) -> None:
        def number(name: str, ok: bool, allowed: str) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not ok:
                raise _field_error("GateSettings", name, v, allowed)

        def integer(name: str, lo: int) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise _field_error("GateSettings", name, v, f"an int >= {lo}")

        number("alpha", 0 < self.alpha <= 0.5, "in (0, 0.5]")
        number("power", 0.5 < self.power < 1, "in (0.5, 1)")
        number("min_rate", 0 < self.min_rate < 1, "in (0, 1)")
        number("min_effect", self.min_effect >= 0, "a number >= 0")
        number("rate_odds_ratio", self.rate_odds_ratio > 1, "a number > 1")
        number("perf_share", 0 < self.perf_share < 1, "in (0, 1)")
        integer("budget_runs", 2)
        integer("perf_runs", 0)
        if isinstance(self.first_seed, bool) or not isinstance(self.first_seed, int):
            raise _field_error("GateSettings", "first_seed", self.first_seed, "an int")
        metrics = tuple(self.perf_metrics)
        if isinstance(self.perf_metrics, str) or any(m not in METRICS for m in metrics) or len(set(metrics)) != len(
                metrics):
            raise _field_error("GateSettings", "perf_metrics", self.perf_metrics,
                               f"distinct names from {list(METRICS)}")
        object.__setattr__(self, "perf_metrics", metrics)
        if not isinstance(self.stop_on_failure, bool):
            raise _field_error("GateSettings", "stop_on_failure", self.stop_on_failure, "a bool")

    @property
    def safety_runs(self) -> int:
        """Clean candidate runs a cell needs to pass by the safety rule (:func:`safety_runs_needed`)."""
        return safety_runs_needed(self.power, self.min_rate)

    @property
    def perf_enabled(self) -> bool:
        return self.perf_runs > 0 and bool(self.perf_metrics)


@dataclass(frozen=True, slots=True)
class PairRequest:
    """Run both builds of ``cell`` with ``seed``."""

    cell: str
    seed: int


# -- statistics -----------------------------------------------------------------------------------------------


def safety_runs_needed(power: float, min_rate: float) -> int:
    """The smallest ``n`` with ``(1 - min_rate)^n <= 1 - power``: after ``n`` clean runs a candidate anomalous in
    at least ``min_rate`` of its runs would have shown it with probability ``>= power``.

    Raises:
        ValueError: ``power`` outside (0, 1) or ``min_rate`` outside (0, 1).
    """
    if not 0 < power < 1:
        raise ValueError(f"power: {power!r} is not in (0, 1)")
    if not 0 < min_rate < 1:
        raise ValueError(f"min_rate: {min_rate!r} is not in (0, 1)")
    n = max(1, math.ceil(math.log1p(-power) / math.log1p(-min_rate)))
    while n > 1 and (1 - min_rate) ** (n - 1) <= 1 - power:  # guard against rounding up one too far
        n -= 1
    while (1 - min_rate) ** n > 1 - power:
        n += 1
    return n


def rule_of_three(clean_runs: int) -> float:
    """``3 / n``: the approximate 95% upper bound on the anomaly rate after ``n`` clean runs (1.0 for n < 3).

    Raises:
        ValueError: ``clean_runs < 0``.
    """
    if clean_runs < 0:
        raise ValueError(f"clean_runs: {clean_runs!r} is below 0")
    return min(1.0, 3 / clean_runs) if clean_runs else 1.0


@dataclass(frozen=True, slots=True)
class SprtDesign:
    """Wald's SPRT on discordant pairs (module rule 2): H0 ``theta = 1/2`` against H1 ``theta = OR / (1 + OR)``.

    ``up``/``down`` are the log-likelihood-ratio steps of a candidate-bad / baseline-bad discordant pair;
    ``upper = log(1 / alpha)`` (regression) and ``lower = log(beta)`` (pass) the boundaries.
    """

    alpha: float
    beta: float
    odds_ratio: float

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise _field_error("SprtDesign", "alpha", self.alpha, "in (0, 1)")
        if not 0 < self.beta < 1:
            raise _field_error("SprtDesign", "beta", self.beta, "in (0, 1)")
        if not self.odds_ratio > 1:
            raise _field_error("SprtDesign", "odds_ratio", self.odds_ratio, "> 1")

    @property
    def theta1(self) -> float:
        return self.odds_ratio / (1 + self.odds_ratio)

    @property
    def up(self) -> float:
        return math.log(2 * self.theta1)

    @property
    def down(self) -> float:
        return math.log(2 * (1 - self.theta1))

    @property
    def upper(self) -> float:
        return -math.log(self.alpha)

    @property
    def lower(self) -> float:
        return math.log(self.beta)


def alpha_split(cells: Sequence[Cell], settings: GateSettings) -> tuple[float, float]:
    """``(alpha of each rate cell's SPRT, alpha of each cell's performance comparisons)`` (module rule 3).

    Either is 0.0 when that kind of claim cannot be made (no rate cells; comparisons switched off).  Their sum over
    the family is ``settings.alpha``.
    """
    rate_cells = sum(1 for c in cells if c.kind == "rate")
    perf = settings.perf_enabled and bool(cells)
    if not perf:
        rate_total, perf_total = settings.alpha, 0.0
    elif rate_cells == 0:
        rate_total, perf_total = 0.0, settings.alpha
    else:
        perf_total = settings.alpha * settings.perf_share
        rate_total = settings.alpha - perf_total
    return (rate_total / rate_cells if rate_cells else 0.0), (perf_total / len(cells) if perf else 0.0)


@dataclass(frozen=True, slots=True)
class PerfComparison:
    """One fault kind and metric of one cell: candidate / baseline over ``pairs`` seed pairs.

    ``ratio`` is the Hodges-Lehmann estimate of the ratio, ``[ratio_low, ratio_high]`` its 95% interval,
    ``p_value`` the one-sided Wilcoxon signed-rank p-value (H1: the candidate is slower), ``alpha`` the level
    this comparison was tested at; ``regression`` is ``p_value <= alpha and ratio > 1 + min_effect``.
    """

    fault_kind: str
    metric: str
    pairs: int
    baseline_median: float
    candidate_median: float
    ratio: float
    ratio_low: float
    ratio_high: float
    p_value: float
    alpha: float
    regression: bool


def compare_paired(baseline: Sequence[float], candidate: Sequence[float], *, alpha: float, min_effect: float,
                   floor: float = 1e-3, fault_kind: str = "", metric: str = "") -> PerfComparison:
    """Compare seed-paired figures (``baseline[i]`` and ``candidate[i]`` share a seed; module rule 4).

    Args:
        baseline: one figure per pair, >= 0.
        candidate: the same pairs' candidate figures.
        alpha: the level of this one comparison, in (0, 1).
        min_effect: ratios at or below ``1 + min_effect`` are never regressions.
        floor: values below it count as ``floor`` (the figures' resolution; keeps the log finite).
        fault_kind, metric: carried into the result.

    Returns:
        The :class:`PerfComparison`.

    Raises:
        ValueError: sequences of different lengths or fewer than 2 pairs, a negative or non-finite value, or
            ``alpha`` / ``floor`` out of range.
    """
    if len(baseline) != len(candidate):
        raise ValueError(f"compare_paired: baseline has {len(baseline)} figures, candidate {len(candidate)}")
    if len(baseline) < 2:
        raise ValueError(f"compare_paired: {len(baseline)} pairs; need at least 2")
    if not 0 < alpha < 1:
        raise ValueError(f"compare_paired: alpha {alpha!r} is not in (0, 1)")
    if not floor > 0:
        raise ValueError(f"compare_paired: floor {floor!r} is not > 0")
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(c)) and b.min() >= 0 and c.min() >= 0):
        raise ValueError("compare_paired: figures must be finite and >= 0")
    d = np.log(np.maximum(c, floor)) - np.log(np.maximum(b, floor))
    n = len(d)
    p = _signed_rank_p(d)
    i, j = _walsh_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    estimate = float(np.median(walsh))
    # the interval: the Walsh averages at the signed-rank statistic's exact 2.5% / 97.5% critical values
    k = _signed_rank_critical(n)
    low, high = float(walsh[k]), float(walsh[len(walsh) - 1 - k])
    ratio = math.exp(estimate)
    return PerfComparison(fault_kind, metric, n, float(np.median(b)), float(np.median(c)), ratio, math.exp(low),
                          math.exp(high), p, alpha, p <= alpha and ratio > 1 + min_effect)


@lru_cache(maxsize=512)
def _signed_rank_null(n: int) -> np.ndarray:
    """P(W+ >= w) for w = 0 .. n(n+1)/2 under H0 (no ties): the exact law of the Wilcoxon signed-rank statistic."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for r in range(1, n + 1):  # each rank is in the positive set or not, with probability 1/2
        counts[r:] = (counts[r:] + counts[:-r]) / 2
        counts[:r] /= 2
    return np.cumsum(counts[::-1])[::-1]


@lru_cache(maxsize=512)
def _walsh_indices(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(n)
    return i, j


@lru_cache(maxsize=512)
def _signed_rank_critical(n: int) -> int:
    """The 0-based index of the 95% interval's lower end among the sorted Walsh averages: with ``c`` the
    largest count such that P(W+ <= c - 1) <= 0.025, the ``c``-th smallest (the interval's ends are the ``c``-th
    smallest and largest).  For ``n <= 5`` no ``c`` exists and the extremes are returned (the true interval is
    wider)."""
    upper = _signed_rank_null(n)  # upper[w] = P(W+ >= w); by symmetry P(W+ <= k) = upper[m - k]
    m = n * (n + 1) // 2
    c = 0
    while c <= m and upper[m - c] <= 0.025:
        c += 1
    return min(max(c - 1, 0), (m - 1) // 2)


def _signed_rank_p(d: np.ndarray) -> float:
    """One-sided p-value of the Wilcoxon signed-rank test that ``d`` is centred above 0 (zeros dropped, as
    Wilcoxon did).  Exact when the non-zero ``|d|`` are distinct; with ties scipy's normal approximation with the
    tie correction."""
    d = d[d != 0]
    if len(d) == 0:
        return 1.0
    a = np.abs(d)
    order = np.argsort(a, kind="stable")
    if np.any(a[order][1:] == a[order][:-1]):
        return float(stats.wilcoxon(d, alternative="greater", zero_method="wilcox", method="approx").pvalue)
    ranks = np.empty(len(d))
    ranks[order] = np.arange(1, len(d) + 1)
    w = round(float(ranks[d > 0].sum()))
    return float(min(1.0, _signed_rank_null(len(d))[w]))


# -- the state machine ----------------------------------------------------------------------------------------


class _CellState:
    """The evidence and decisions of one cell (mutable; owned by :class:`SequentialGate`)."""

    def __init__(self, cell: Cell, order: int) -> None:
        self.cell = cell
        self.order = order
        self.usable: dict[tuple[str, int], RunOutcome] = {}
        self.crashed: dict[tuple[str, int], int] = {}
        self.in_flight: set[tuple[str, int]] = set()
        self.seeds: list[int] = []  # every seed issued or observed, sorted
        self.done = 0  # seeds[:done] have been processed in seed order
        self.late = 0  # runs that arrived after their seed was processed (counted, not used)
        self.next_seed: int | None = None
        # safety
        self.failing: list[RunOutcome] = []  # candidate runs with an invalid verdict
        self.clean_c = 0
        self.unknown_c = 0
        self.bad_c_seen = 0  # rate: bad candidate runs among the processed ones
        # rate
        self.pairs = 0
        self.bad_b = 0
        self.bad_c = 0
        self.disc_c = 0  # discordant pairs where only the candidate was bad
        self.disc_b = 0
        self.llr = 0.0
        self.llr_max = 0.0
        self.anomaly: str | None = None  # "pass" / "fail" (rate and safety rules), sticky
        self.anomaly_reason = ""
        # performance sample: (fault kind, metric) -> [(baseline, candidate)] over the first perf_runs pairs
        self.perf_pairs = 0
        self.perf_values: dict[tuple[str, str], list[tuple[float, float]]] = {}
        self.perf: tuple[PerfComparison, ...] | None = None
        self.perf_complete = False
        self.perf_failed = False  # some comparison of ``perf`` is a regression

    def runs(self, build: str) -> int:
        return sum(1 for (b, _) in self.usable if b == build)

    def crashes(self, build: str) -> int:
        return sum(n for (b, _), n in self.crashed.items() if b == build)

    def add_seed(self, seed: int) -> None:
        """Record ``seed`` (a no-op when known); callers never add one at or below the processed frontier."""
        i = bisect.bisect_left(self.seeds, seed)
        if i == len(self.seeds) or self.seeds[i] != seed:
            self.seeds.insert(i, seed)

    def behind_frontier(self, seed: int) -> bool:
        """Whether the seed-ordered processing has already moved past ``seed`` (processed, or never seen while
        later seeds were processed): a run of it now would be evidence out of order."""
        return self.done > 0 and seed <= self.seeds[self.done - 1]

    def resolved(self, build: str, seed: int) -> bool:
        return (build, seed) not in self.in_flight and ((build, seed) in self.usable or (build, seed) in self.crashed)


class SequentialGate:
    """The gate as an incremental state machine (see the module docstring for the rules and the driver's loop).

    Not thread-safe: one driver thread calls it.  Every method is deterministic in the calls made so far.
    """

    def __init__(self, cells: Sequence[Cell], settings: GateSettings | None = None) -> None:
        """Declare the cells and settings.

        Raises:
            ValueError: no cells, a cell key given twice, or something that is not a :class:`Cell`.
        """
        self.settings = settings if settings is not None else GateSettings()
        if not isinstance(self.settings, GateSettings):
            raise ValueError(f"settings: {self.settings!r} is not a GateSettings")
        cells = tuple(cells)
        if not cells:
            raise ValueError("cells: no cells to gate")
        for c in cells:
            if not isinstance(c, Cell):
                raise ValueError(f"cells: {c!r} is not a Cell")
        keys = [c.key for c in cells]
        dup = next((k for k in keys if keys.count(k) > 1), None)
        if dup is not None:
            raise ValueError(f"cells: cell {dup!r} declared twice")
        self.cells = cells
        self._state = {c.key: _CellState(c, i) for i, c in enumerate(cells)}
        self.rate_alpha, self.perf_alpha = alpha_split(cells, self.settings)
        s = self.settings
        self.sprt = SprtDesign(self.rate_alpha, 1 - s.power, s.rate_odds_ratio) if self.rate_alpha > 0 else None
        self.runs_used = 0
        self._in_flight = 0  # the sum of the cells' in_flight sets, kept as they change

    # -- inputs --

    def observe(self, outcome: RunOutcome) -> None:
        """Take one finished run into account (any order; a pair's two runs may arrive far apart).

        Runs are used in seed order: seed ``s`` is processed once both builds' runs of every known seed up to ``s``
        are in (finished or crashed).  A run whose seed that processing has already passed -- a seed never handed
        out by :meth:`next_pairs` that arrives after later seeds were processed, or a retry of a pair already
        processed -- is counted (``runs_used``, :attr:`CellReport.late_runs`) but not used; a safety cell's
        definite anomaly still fails it (a proof needs no order).

        Raises:
            ValueError: a cell that was not declared, or a second usable run of the same cell, build and seed.
        """
        if not isinstance(outcome, RunOutcome):
            raise ValueError(f"observe: {outcome!r} is not a RunOutcome")
        st = self._state.get(outcome.cell)
        if st is None:
            raise ValueError(f"RunOutcome.cell: {outcome.cell!r} is not a declared cell "
                             f"(declared: {', '.join(repr(c.key) for c in self.cells)})")
        key = (outcome.build, outcome.seed)
        if key in st.usable:
            raise ValueError(f"RunOutcome.seed: {outcome.build} run of cell {outcome.cell!r} with seed {outcome.seed} "
                             "observed twice (a retried run must replace a crashed one, not a finished one)")
        self.runs_used += 1
        if key in st.in_flight:
            st.in_flight.discard(key)
            self._in_flight -= 1
        if outcome.build == "candidate" and outcome.verdict == "invalid" and st.cell.kind == "safety":
            st.failing.append(outcome)  # proof: fails the cell now, whatever the order (rule 1)
            self._set_anomaly(st, "fail", "", force=True)
        if st.behind_frontier(outcome.seed):
            st.late += 1
            return
        st.add_seed(outcome.seed)
        if outcome.verdict == "crashed":
            st.crashed[key] = st.crashed.get(key, 0) + 1
        else:
            st.usable[key] = outcome
        self._advance(st, final=False)

    def next_pairs(self, max_pairs: int) -> tuple[PairRequest, ...]:
        """Up to ``max_pairs`` (cell, seed) pairs to start now; each is recorded as 2 runs in flight.

        Returns an empty tuple when the budget is spent, every cell is decided (or, with ``stop_on_failure``, one
        failed) or every open cell already has enough runs in flight.

        Raises:
            ValueError: ``max_pairs < 0``.
        """
        if isinstance(max_pairs, bool) or not isinstance(max_pairs, int) or max_pairs < 0:
            raise ValueError(f"max_pairs: {max_pairs!r} is not an int >= 0")
        out: list[PairRequest] = []
        if self.settings.stop_on_failure and self._any_failed():
            return ()
        states = list(self._state.values())
        wants = [self._wants(st) for st in states]
        while len(out) < max_pairs and self.runs_used + self.runs_in_flight + 2 <= self.settings.budget_runs:
            open_cells = [i for i, w in enumerate(wants) if w > 0]
            if not open_cells:
                break
            i = min(open_cells, key=lambda i: (len(states[i].seeds), states[i].order))
            seed = self._issue(states[i])
            wants[i] = self._wants(states[i])
            out.append(PairRequest(states[i].cell.key, seed))
        return tuple(out)

    # -- queries --

    @property
    def runs_in_flight(self) -> int:
        return self._in_flight

    @property
    def finished(self) -> bool:
        """True when the driver may stop: the answer is known (every cell decided, or a cell failed with
        ``stop_on_failure``), or nothing is in flight and no further pair can be started within the budget."""
        decisions = [self._decision(st, final=False) for st in self._state.values()]
        if ("fail" in decisions and self.settings.stop_on_failure) or "running" not in decisions:
            return True
        if self.runs_in_flight:
            return False
        affordable = self.runs_used + 2 <= self.settings.budget_runs
        return not (affordable and any(self._wants(st) > 0 for st in self._state.values()))

    def report(self, *, final: bool = False) -> GateReport:
        """The verdicts so far.  With ``final`` every pair still missing a run is given up: the remaining
        evidence is used (skipping incomplete pairs), the performance comparisons are made on what there is, and
        every cell still open is ``undecided``.  ``final`` changes nothing in the state: the driver may report
        again later."""
        cells = tuple(self._cell_report(st, final) for st in self._state.values())
        return GateReport(cells=cells, settings=self.settings, rate_alpha=self.rate_alpha, perf_alpha=self.perf_alpha,
                          runs_used=self.runs_used, runs_in_flight=self.runs_in_flight, final=final)

    # -- internals --

    def _any_failed(self) -> bool:
        return any(_failed(st) for st in self._state.values())

    def _decision(self, st: _CellState, *, final: bool) -> str:
        """fail / pass / running (``final``: undecided) from the cell's state (the report's ``decision``)."""
        if _failed(st):
            return "fail"
        perf_done = not self.settings.perf_enabled or st.perf_complete or (final and st.perf is not None)
        if st.anomaly == "pass" and perf_done:
            return "pass"
        return "undecided" if final else "running"

    def _perf_needed(self, st: _CellState) -> int:
        return 0 if not self.settings.perf_enabled or st.perf_complete else self.settings.perf_runs - st.perf_pairs

    def _wants(self, st: _CellState) -> int:
        """How many more pairs the cell can use beyond those it has pending (seeds issued or half-observed)."""
        if _failed(st):
            return 0
        pending = len(st.seeds) - st.done
        if st.anomaly is None and st.cell.kind == "rate":
            return 1 << 30  # an open SPRT can use every pair it gets
        need = self.settings.safety_runs - st.clean_c if st.anomaly is None else 0
        return max(need, self._perf_needed(st)) - pending

    def _issue(self, st: _CellState) -> int:
        seed = st.next_seed if st.next_seed is not None else self.settings.first_seed
        if st.seeds:
            seed = max(seed, st.seeds[-1] + 1)
        st.next_seed = seed + 1
        st.add_seed(seed)
        st.in_flight.update((b, seed) for b in BUILDS)
        self._in_flight += len(BUILDS)
        return seed

    def _set_anomaly(self, st: _CellState, decision: str, reason: str, *, force: bool = False) -> None:
        if st.anomaly is None or (force and st.anomaly != decision):
            st.anomaly = decision
            st.anomaly_reason = reason

    def _advance(self, st: _CellState, *, final: bool) -> None:
        """Process seeds in order while both builds of the next one are resolved (``final``: all of them)."""
        while st.done < len(st.seeds):
            seed = st.seeds[st.done]
            if not final and not all(st.resolved(b, seed) for b in BUILDS):
                break
            st.done += 1
            self._process(st, seed)
        if final or st.perf_pairs >= self.settings.perf_runs:
            self._analyse_perf(st, complete=st.perf_pairs >= self.settings.perf_runs)

    def _process(self, st: _CellState, seed: int) -> None:
        s = self.settings
        b = st.usable.get(("baseline", seed))
        c = st.usable.get(("candidate", seed))
        if c is not None:
            if c.verdict == "valid":
                st.clean_c += 1
            elif c.verdict == "unknown":
                st.unknown_c += 1
            if c.bad:
                st.bad_c_seen += 1
        if st.cell.kind == "safety":
            if st.anomaly is None and not st.failing and st.clean_c >= s.safety_runs:
                self._set_anomaly(st, "pass", "")
        else:
            if b is not None and c is not None:
                st.pairs += 1
                st.bad_b += b.bad
                st.bad_c += c.bad
                if self.sprt is not None and b.bad != c.bad:
                    if c.bad:
                        st.disc_c += 1
                        st.llr += self.sprt.up
                    else:
                        st.disc_b += 1
                        st.llr += self.sprt.down
                    st.llr_max = max(st.llr_max, st.llr)
                    if self.sprt is not None and st.anomaly is None:
                        if st.llr >= self.sprt.upper - 1e-12:
                            self._set_anomaly(st, "fail", "")
                        elif st.llr <= self.sprt.lower + 1e-12:
                            self._set_anomaly(st, "pass", "")
            if st.anomaly is None and st.bad_c_seen == 0 and st.clean_c >= s.safety_runs:
                self._set_anomaly(st, "pass", "zero")
        if s.perf_enabled and b is not None and c is not None and st.perf_pairs < s.perf_runs:
            st.perf_pairs += 1
            for kind in sorted(set(b.faults) & set(c.faults)):
                for metric in s.perf_metrics:
                    vb, vc = b.faults[kind].get(metric), c.faults[kind].get(metric)
                    if vb is not None and vc is not None:
                        st.perf_values.setdefault((kind, metric), []).append((vb, vc))

    def _analyse_perf(self, st: _CellState, *, complete: bool) -> None:
        if not self.settings.perf_enabled or st.perf_complete:
            return
        usable = {k: v for k, v in st.perf_values.items() if len(v) >= PERF_MIN_PAIRS}
        level = self.perf_alpha / len(usable) if usable else self.perf_alpha
        st.perf = tuple(
            compare_paired([x for x, _ in v], [y for _, y in v], alpha=level, min_effect=self.settings.min_effect,
                           floor=FLOOR[metric], fault_kind=kind, metric=metric)
            for (kind, metric), v in sorted(usable.items()))
        st.perf_failed = any(p.regression for p in st.perf)
        st.perf_complete = complete

    def _cell_report(self, st: _CellState, final: bool) -> CellReport:
        if final:
            # a throwaway twin of the state: final reports must not consume the live state
            st = _final_copy(st)
            self._advance(st, final=True)
        perf = st.perf if st.perf is not None else ()
        perf_regressions = [p for p in perf if p.regression]
        decision = self._decision(st, final=final)
        baseline_kinds = sorted({a for (bld, _), r in st.usable.items() if bld == "baseline" for a in r.anomalies})
        candidate_kinds = sorted({a for (bld, _), r in st.usable.items() if bld == "candidate" for a in r.anomalies})
        reason = self._reason(st, decision, perf_regressions, baseline_kinds)
        runs_b, runs_c = st.runs("baseline"), st.runs("candidate")
        diff = diff_interval(st.bad_b, st.pairs, st.bad_c, st.pairs) if st.pairs else None
        return CellReport(
            cell=st.cell, decision=decision, reason=reason, baseline_runs=runs_b, candidate_runs=runs_c,
            baseline_bad=sum(1 for (bld, _), r in st.usable.items() if bld == "baseline" and r.bad),
            candidate_bad=sum(1 for (bld, _), r in st.usable.items() if bld == "candidate" and r.bad),
            baseline_crashed=st.crashes("baseline"), candidate_crashed=st.crashes("candidate"),
            candidate_clean=st.clean_c, candidate_unknown=st.unknown_c, pairs=st.pairs,
            discordant_candidate=st.disc_c, discordant_baseline=st.disc_b, log_lr=st.llr,
            anytime_p=min(1.0, math.exp(-st.llr_max)) if st.cell.kind == "rate" else None,
            rate_diff=None if diff is None else diff[0], rate_diff_low=None if diff is None else diff[1],
            rate_diff_high=None if diff is None else diff[2],
            candidate_kinds=tuple(candidate_kinds), baseline_kinds=tuple(baseline_kinds),
            new_kinds=tuple(k for k in candidate_kinds if k not in baseline_kinds),
            failing_refs=tuple(r.ref or f"seed {r.seed}" for r in sorted(st.failing, key=lambda r: r.seed)),
            late_runs=st.late, perf=perf, rule_of_three=rule_of_three(st.clean_c),
        )

    def _reason(self, st: _CellState, decision: str, perf_regressions: list[PerfComparison],
                baseline_kinds: list[str]) -> str:
        s = self.settings
        parts = []
        if st.failing and st.cell.kind == "safety":
            kinds = sorted({a for r in st.failing for a in (r.anomalies or ("invalid verdict",))})
            old = [k for k in kinds if k in baseline_kinds]
            new = [k for k in kinds if k not in baseline_kinds]
            runs = ", ".join(r.ref or f"seed {r.seed}" for r in sorted(st.failing, key=lambda r: r.seed)[:3])
            what = []
            if new:
                what.append(f"regression: {', '.join(new)} (never seen in the baseline here)")
            if old:
                what.append(f"old bug still there: {', '.join(old)} (the baseline showed it too)")
            parts.append(f"{len(st.failing)} candidate run(s) with a definite anomaly -- {'; '.join(what)}; "
                         f"replay: {runs}")
        elif st.cell.kind == "rate" and st.anomaly == "fail" and self.sprt is not None:
            parts.append(f"regression: the candidate was the bad one in {st.disc_c} of {st.disc_c + st.disc_b} "
                         f"discordant pairs (SPRT likelihood ratio reached 1/alpha = {1 / self.sprt.alpha:.0f})")
        elif st.anomaly == "pass" and st.cell.kind == "safety":
            parts.append(f"{st.clean_c} clean candidate runs: anomaly rate < 3/{st.clean_c} = "
                         f"{rule_of_three(st.clean_c):.3f} (95%); a rate >= {s.min_rate:g} would have shown with "
                         f"probability >= {s.power:g}")
        elif st.anomaly == "pass" and st.anomaly_reason == "zero":
            parts.append(f"no bad candidate run in {st.clean_c}: rate < 3/{st.clean_c} = "
                         f"{rule_of_three(st.clean_c):.3f} (95%)")
        elif st.anomaly == "pass":
            parts.append(f"no worse: the candidate was the bad one in {st.disc_c} of {st.disc_c + st.disc_b} "
                         f"discordant pairs (SPRT accepted H0 at power {s.power:g} against odds ratio "
                         f"{s.rate_odds_ratio:g})")
        elif st.cell.kind == "safety":
            parts.append(f"{st.clean_c} of {s.safety_runs} clean candidate runs needed so far")
        else:
            parts.append(f"{st.disc_c}:{st.disc_b} discordant pairs (candidate:baseline) in {st.pairs} pairs, "
                         "no boundary reached")
        for p in perf_regressions:
            parts.append(f"{p.fault_kind} {p.metric} {p.ratio:.2f}x slower [{p.ratio_low:.2f}, {p.ratio_high:.2f}] "
                         f"(p={_p(p.p_value)} <= {p.alpha:.2g}, > {1 + s.min_effect:g}x)")
        if decision in ("running", "undecided") and st.anomaly is not None and s.perf_enabled:
            parts.append(f"performance sample {st.perf_pairs} of {s.perf_runs} pairs")
        return "; ".join(parts)


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}" if x >= 1e-4 else f"{x:.1e}"


def _failed(st: _CellState) -> bool:
    return st.anomaly == "fail" or st.perf_failed


def _final_copy(st: _CellState) -> _CellState:
    twin = _CellState(st.cell, st.order)
    twin.__dict__.update({k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict)
                              else set(v) if isinstance(v, set) else v) for k, v in st.__dict__.items()})
    twin.perf_values = {k: list(v) for k, v in st.perf_values.items()}
    twin.in_flight = set()
    return twin


def decide(cells: Sequence[Cell], outcomes: Iterable[RunOutcome], settings: GateSettings | None = None) -> GateReport:
    """The gate in batch: observe ``outcomes`` in seed order (ties keep the given order) and report finally.

    Raises:
        ValueError: as :class:`SequentialGate` and :meth:`SequentialGate.observe`.
    """
    gate = SequentialGate(cells, settings)
    for o in sorted(outcomes, key=lambda o: o.seed):
        gate.observe(o)
    return gate.report(final=True)


# -- reports --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CellReport:
    """One cell's verdict: ``decision`` is one of :data:`DECISIONS`, ``reason`` one readable sentence.

    Counts are of usable runs (crashed ones apart); ``pairs`` are the rate test's complete pairs, of which
    ``discordant_*`` had only that build bad; ``rate_diff*`` is the candidate's minus the baseline's bad-run rate
    over those pairs with Newcombe's 95% interval; ``new_kinds`` are candidate anomaly kinds the baseline never
    showed in this cell; ``failing_refs`` the candidate runs that failed a safety cell.
    """

    cell: Cell
    decision: str
    reason: str
    baseline_runs: int
    candidate_runs: int
    baseline_bad: int
    candidate_bad: int
    baseline_crashed: int
    candidate_crashed: int
    candidate_clean: int
    candidate_unknown: int
    pairs: int
    discordant_candidate: int
    discordant_baseline: int
    log_lr: float
    anytime_p: float | None
    rate_diff: float | None
    rate_diff_low: float | None
    rate_diff_high: float | None
    candidate_kinds: tuple[str, ...]
    baseline_kinds: tuple[str, ...]
    new_kinds: tuple[str, ...]
    failing_refs: tuple[str, ...]
    late_runs: int
    perf: tuple[PerfComparison, ...]
    rule_of_three: float

    @property
    def runs_used(self) -> int:
        return (self.baseline_runs + self.candidate_runs + self.baseline_crashed + self.candidate_crashed
                + self.late_runs)


@dataclass(frozen=True, slots=True)
class GateReport:
    """Every cell's verdict and the gate's answer."""

    cells: tuple[CellReport, ...]
    settings: GateSettings
    rate_alpha: float
    perf_alpha: float
    runs_used: int
    runs_in_flight: int
    final: bool

    def of(self, key: str) -> CellReport:
        """The report of cell ``key`` (raises KeyError naming it)."""
        for c in self.cells:
            if c.cell.key == key:
                return c
        raise KeyError(f"no cell {key!r} in this report")

    @property
    def failed(self) -> tuple[CellReport, ...]:
        return tuple(c for c in self.cells if c.decision == "fail")

    @property
    def open(self) -> tuple[CellReport, ...]:
        return tuple(c for c in self.cells if c.decision in ("running", "undecided"))

    @property
    def decided(self) -> bool:
        """The answer is known: a cell failed (and ``stop_on_failure``), or every cell is decided."""
        return bool(self.failed and self.settings.stop_on_failure) or not self.open

    @property
    def exit_code(self) -> int:
        """1 when any cell failed (a regression or a safety bug); else 2 when any is open; else 0."""
        return 1 if self.failed else 2 if self.open else 0
