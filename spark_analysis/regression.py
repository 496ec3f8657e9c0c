"""Is a candidate build worse than the baseline, on a fixed set of runs?  The dashboard's version comparisons (pure;
no Spark).

The release gate itself (``splitbrain gate``, ``splitbrain spark gate``) decides sequentially, cell by cell, with
:mod:`spark_analysis.sequential`; this fixed-size test stays for the dashboard, which compares every pair of
versions over whatever runs the warehouse holds (:mod:`spark_analysis.comparisons`), and as the fixed-size baseline
``bench/gate_power.py`` measures the sequential gate against.

Vocabulary: a **cell** is one (workload, nemesis) pair; in each cell every checked run of a version is
either anomalous or not, so a version's cell is ``k`` anomalous runs out of ``n``.  The gate asks, per
cell, whether the candidate's anomaly rate ``p_c`` is larger than the baseline's ``p_b``.

Theory of operation:

1. **Minimum runs.**  A cell where either version has fewer than ``min_runs`` checked runs is
   ``too-few-runs``: it is not tested and does not count in the multiple-comparison family.  With a handful
   of runs no test can see a doubling, and a silent "pass" would be a lie.
2. **One-sided test per cell**, H0: ``p_c <= p_b`` against H1: ``p_c > p_b``.  The default is
   *Boschloo's exact test*: its statistic is Fisher's one-sided p-value, and its p-value is the largest
   probability, over every common rate ``pi`` allowed by H0, of a table at least as extreme.  It never exceeds
   Fisher's p-value (so it rejects whenever Fisher does, and more often) and, unlike a normal-approximation
   score test, its size stays at or below ``alpha`` at small counts.  The supremum is taken over a grid of
   :data:`GRID` rates refined by golden-section search around the best grid point.  When the table would
   be large (``(n_b + 1)(n_c + 1) > BOSCHLOO_MAX_TABLES``) Fisher's exact test is used instead: at such
   sizes the two agree closely and Fisher is cheap.  ``test="fisher"`` asks for Fisher everywhere.
3. **Multiple comparisons.**  With many cells some would cross any fixed threshold by chance, so the tested
   cells' p-values are adjusted: Holm's step-down method (``holm``, the default) bounds the chance of any
   false "regressed" verdict by ``alpha``; Benjamini-Hochberg (``bh``) bounds the expected share of false
   ones among the flagged cells.  A cell is ``regressed`` when its adjusted p-value is at most ``alpha``.
4. **Effect size.**  Each cell also carries the difference ``p_c - p_b`` with Newcombe's hybrid score
   interval (built from the two Wilson intervals), for the reader; it does not drive the verdict.

The gate's exit code (:attr:`GateResult.exit_code`): 1 when any cell regressed, else 2 when any cell had too
few runs (or there is no cell at all), else 0.  Rules of this file: no I/O, no randomness, no Spark;
every function is deterministic in its arguments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from spark_analysis.wilson import Z95, wilson_interval

__all__ = [
    "BOSCHLOO_MAX_TABLES", "CORRECTIONS", "GRID", "TESTS", "VERDICTS", "CellCounts", "CellVerdict", "GateResult",
    "adjust", "boschloo_p", "diff_interval", "fisher_p", "gate", "one_sided_p",
]

VERDICTS = ("regressed", "pass", "too-few-runs")
CORRECTIONS = ("holm", "bh")
TESTS = ("boschloo", "fisher")
GRID = 64
BOSCHLOO_MAX_TABLES = 160_000  # (n_b + 1)(n_c + 1): about 400 runs per version


@dataclass(frozen=True, slots=True)
class CellCounts:
    """Checked runs and anomalous runs of the baseline (``*_b``) and the candidate (``*_c``) in one cell."""

    workload: str
    nemesis: str
    k_b: int
    n_b: int
    k_c: int
    n_c: int

    def __post_init__(self) -> None:
        for k, n, who in ((self.k_b, self.n_b, "baseline"), (self.k_c, self.n_c, "candidate")):
            if n < 0 or not 0 <= k <= n:
                raise ValueError(f"CellCounts {self.workload}x{self.nemesis}: {who} needs 0 <= anomalous <= runs; "
                                 f"got {k} of {n}")


@dataclass(frozen=True, slots=True)
class CellVerdict:
    """One cell's outcome.  ``p_value``/``adjusted_p`` are None for a ``too-few-runs`` cell."""

    counts: CellCounts
    verdict: str
    p_value: float | None
    adjusted_p: float | None
    diff: float | None
    diff_low: float | None
    diff_high: float | None
    test: str | None


@dataclass(frozen=True, slots=True)
class GateResult:
    cells: tuple[CellVerdict, ...]
    alpha: float
    correction: str
    min_runs: int

    @property
    def regressed(self) -> tuple[CellVerdict, ...]:
        return tuple(c for c in self.cells if c.verdict == "regressed")

    @property
    def undecided(self) -> tuple[CellVerdict, ...]:
        return tuple(c for c in self.cells if c.verdict == "too-few-runs")

    @property
    def exit_code(self) -> int:
        """1 regressed somewhere; else 2 too few runs somewhere (or no cells); else 0."""
        if self.regressed:
            return 1
        return 2 if self.undecided or not self.cells else 0


# -- exact tests ---------------------------------------------------------------------------------------------


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _check(k_b: int, n_b: int, k_c: int, n_c: int) -> None:
    if n_b < 1 or n_c < 1 or not 0 <= k_b <= n_b or not 0 <= k_c <= n_c:
        raise ValueError(f"need 0 <= k <= n and n >= 1 for both versions; got baseline {k_b}/{n_b}, "
                         f"candidate {k_c}/{n_c}")


def fisher_p(k_b: int, n_b: int, k_c: int, n_c: int) -> float:
    """Fisher's exact one-sided p-value: P(candidate has >= k_c of the k_b + k_c anomalies | margins).

    Raises:
        ValueError: counts outside ``0 <= k <= n`` or a version with no runs.
    """
    _check(k_b, n_b, k_c, n_c)
    return _fisher_tail(k_b + k_c, n_b, n_c)[k_c - max(0, k_b + k_c - n_b)]


@lru_cache(maxsize=4096)
def _fisher_tail(total: int, n_b: int, n_c: int) -> tuple[float, ...]:
    """Upper tails of the hypergeometric law of the candidate's share of ``total`` anomalies, from the
    smallest possible share up."""
    n = n_b + n_c
    lo, hi = max(0, total - n_b), min(total, n_c)
    base = _log_comb(n, n_c)
    pmf = [math.exp(_log_comb(total, x) + _log_comb(n - total, n_c - x) - base) for x in range(lo, hi + 1)]
    tails, s = [0.0] * len(pmf), 0.0
    for i in range(len(pmf) - 1, -1, -1):
        s += pmf[i]
        tails[i] = min(1.0, s)
    return tuple(tails)


@lru_cache(maxsize=64)
def _fisher_table(n_b: int, n_c: int) -> tuple[tuple[float, ...], ...]:
    """``t[k_b][k_c]``: Fisher's one-sided p-value of every table with these run counts."""
    return tuple(tuple(_fisher_tail(kb + kc, n_b, n_c)[kc - max(0, kb + kc - n_b)] for kc in range(n_c + 1))
                 for kb in range(n_b + 1))


def _binomial_pmf(n: int, p: float) -> list[float]:
    lp, lq = math.log(p), math.log1p(-p)
    return [math.exp(_log_comb(n, k) + k * lp + (n - k) * lq) for k in range(n + 1)]


@lru_cache(maxsize=256)
def _grid_laws(n: int) -> tuple[tuple[tuple[float, ...], tuple[float, ...]], ...]:
    """(pmf, upper tails) of Binomial(n, i / GRID) for i = 1 .. GRID - 1."""
    out = []
    for i in range(1, GRID):
        pmf = _binomial_pmf(n, i / GRID)
        out.append((tuple(pmf), tuple(_upper_tails(pmf))))
    return tuple(out)


def _upper_tails(pmf: Sequence[float]) -> list[float]:
    out, s = [0.0] * (len(pmf) + 1), 0.0
    for k in range(len(pmf) - 1, -1, -1):
        s += pmf[k]
        out[k] = s
    return out


def boschloo_p(k_b: int, n_b: int, k_c: int, n_c: int) -> float:
    """Boschloo's exact one-sided p-value (see the module docstring); never above :func:`fisher_p`.

    Raises:
        ValueError: counts outside ``0 <= k <= n`` or a version with no runs.
    """
    _check(k_b, n_b, k_c, n_c)
    return _boschloo(k_b, n_b, k_c, n_c)


@lru_cache(maxsize=65_536)  # pure: nightly gates and the power bench ask about the same tables again and again
def _boschloo(k_b: int, n_b: int, k_c: int, n_c: int) -> float:
    table = _fisher_table(n_b, n_c)
    observed = table[k_b][k_c]
    if observed >= 1.0:
        return 1.0
    bound = observed * (1 + 1e-9)  # ties: a table exactly as extreme counts as extreme
    # Fisher's p falls as k_c rises and rises with k_b, so the extreme tables of each k_b are k_c >= cut[k_b],
    # and cut never decreases with k_b: a two-pointer walk finds every cut.
    cut, c = [], 0
    for kb in range(n_b + 1):
        while c <= n_c and table[kb][c] > bound:
            c += 1
        cut.append(c)

    rows = [kb for kb in range(n_b + 1) if cut[kb] <= n_c]

    def size_of(pb: Sequence[float], tc: Sequence[float]) -> float:
        return sum(pb[kb] * tc[cut[kb]] for kb in rows)

    def size(pi: float) -> float:
        return size_of(_binomial_pmf(n_b, pi), _upper_tails(_binomial_pmf(n_c, pi)))

    grid = [i / GRID for i in range(1, GRID)]
    sizes = [size_of(pb, tc) for (pb, _), (_, tc) in zip(_grid_laws(n_b), _grid_laws(n_c))]
    best_i = max(range(len(grid)), key=sizes.__getitem__)
    best = sizes[best_i]
    lo, hi = grid[max(0, best_i - 1)], grid[min(len(grid) - 1, best_i + 1)]
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(24):  # golden-section refinement: the size is smooth and unimodal near its maximum
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        fa, fb = size(a), size(b)
        best = max(best, fa, fb)
        if fa < fb:
            lo = a
        else:
            hi = b
    return min(observed, best)


def one_sided_p(k_b: int, n_b: int, k_c: int, n_c: int, *, test: str = "boschloo") -> tuple[float, str]:
    """The p-value of ``test`` and the test actually used (Boschloo falls back to Fisher on big tables)."""
    if test not in TESTS:
        raise ValueError(f"test must be one of {list(TESTS)}; got {test!r}")
    if test == "boschloo" and (n_b + 1) * (n_c + 1) <= BOSCHLOO_MAX_TABLES:
        return boschloo_p(k_b, n_b, k_c, n_c), "boschloo"
    return fisher_p(k_b, n_b, k_c, n_c), "fisher"


# -- multiple comparisons and effect size ---------------------------------------------------------------------


def adjust(p_values: Sequence[float], correction: str = "holm") -> list[float]:
    """Adjusted p-values (same order as given): Holm step-down or Benjamini-Hochberg step-up.

    Raises:
        ValueError: an unknown ``correction`` or a p-value outside [0, 1].
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {list(CORRECTIONS)}; got {correction!r}")
    if any(not 0.0 <= p <= 1.0 for p in p_values):
        raise ValueError(f"p-values must be in [0, 1]; got {list(p_values)}")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [0.0] * m
    if correction == "holm":
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * p_values[i]))
            out[i] = running
    else:
        running = 1.0
        for rank in range(m - 1, -1, -1):
            i = order[rank]
            running = min(running, m * p_values[i] / (rank + 1))
            out[i] = min(1.0, running)
    return out


def diff_interval(k_b: int, n_b: int, k_c: int, n_c: int, z: float = Z95) -> tuple[float, float, float]:
    """``(p_c - p_b, low, high)``: Newcombe's hybrid score interval from the two Wilson intervals."""
    _check(k_b, n_b, k_c, n_c)
    pb, pc = k_b / n_b, k_c / n_c
    lb, ub = wilson_interval(k_b, n_b, z)
    lc, uc = wilson_interval(k_c, n_c, z)
    d = pc - pb
    return d, max(-1.0, d - math.hypot(pc - lc, ub - pb)), min(1.0, d + math.hypot(uc - pc, pb - lb))


# -- the gate -------------------------------------------------------------------------------------------------


def gate(cells: Sequence[CellCounts], *, alpha: float = 0.05, min_runs: int = 20, correction: str = "holm",
         test: str = "boschloo") -> GateResult:
    """Per-cell verdicts for ``cells`` (see the module docstring), sorted worst first.

    Raises:
        ValueError: ``alpha`` outside (0, 1), ``min_runs < 1``, an unknown correction or test, or a cell twice.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1); got {alpha}")
    if min_runs < 1:
        raise ValueError(f"min_runs must be >= 1; got {min_runs}")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {list(CORRECTIONS)}; got {correction!r}")
    if test not in TESTS:
        raise ValueError(f"test must be one of {list(TESTS)}; got {test!r}")
    keys = [(c.workload, c.nemesis) for c in cells]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"cell {dup[0]}x{dup[1]} given twice")
    tested = [c for c in cells if c.n_b >= min_runs and c.n_c >= min_runs]
    raw = [one_sided_p(c.k_b, c.n_b, c.k_c, c.n_c, test=test) for c in tested]
    adjusted = adjust([p for p, _ in raw], correction)
    out = []
    for c, (p, used), adj in zip(tested, raw, adjusted):
        d, lo, hi = diff_interval(c.k_b, c.n_b, c.k_c, c.n_c)
        out.append(CellVerdict(c, "regressed" if adj <= alpha else "pass", p, adj, d, lo, hi, used))
    for c in cells:
        if c.n_b < min_runs or c.n_c < min_runs:
            d_, lo_, hi_ = diff_interval(c.k_b, c.n_b, c.k_c, c.n_c) if c.n_b and c.n_c else (None, None, None)
            out.append(CellVerdict(c, "too-few-runs", None, None, d_, lo_, hi_, None))
    rank = {v: i for i, v in enumerate(VERDICTS)}
    out.sort(key=lambda v: (rank[v.verdict], v.adjusted_p if v.adjusted_p is not None else 2.0,
                            v.counts.workload, v.counts.nemesis))
    return GateResult(tuple(out), alpha, correction, min_runs)
