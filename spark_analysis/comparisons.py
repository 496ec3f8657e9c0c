"""Version-vs-baseline comparisons for the dashboard: the release gate run for many version pairs (pure).

Vocabulary: a **count row** is ``(workload, nemesis, version, backend, runs, anomalous)`` -- checked runs and
anomalous runs of one version on one backend in one cell, as :func:`spark_analysis.metrics.anomaly_rates`
counts them.  A **comparison** is the gate (:func:`spark_analysis.regression.gate`) of a *candidate* version
against a *baseline* version, either over every backend (``backend`` ``"all"``) or over one backend; its rows
are the gate's cell verdicts, with the difference of rates and its 95% interval.

The dashboard cannot run the gate in the browser (its statistics live in :mod:`spark_analysis.regression`
alone), so every pair the reader can pick is computed here in advance: each ordered pair of the newest
``max_versions`` versions (older baseline, newer candidate) for ``"all"`` and for each backend.  Versions are
ordered by :func:`version_key` (release order where the label parses as a version, else by text, after
them); ``unknown`` never takes part.  No I/O, no randomness.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from spark_analysis.regression import CellCounts, gate

__all__ = ["ALL", "UNKNOWN", "CountRow", "comparison_rows", "default_pair", "order_versions", "version_key"]

ALL = "all"
UNKNOWN = "unknown"
CountRow = tuple[str, str, str, str, int, int]  # workload, nemesis, version, backend, runs, anomalous


def version_key(version: str) -> tuple[int, Any, str]:
    """Sort key: parseable versions in release order first, then other labels by text."""
    try:
        return (0, Version(version), version)
    except InvalidVersion:
        return (1, (), version)


def order_versions(versions: Iterable[str]) -> list[str]:
    """Distinct versions, oldest first (:func:`version_key`), without ``unknown``."""
    return sorted({v for v in versions if v and v != UNKNOWN}, key=version_key)


def default_pair(versions: Sequence[str]) -> tuple[str, str] | None:
    """(baseline, candidate) shown first: the newest version against the one before it (None: < 2 versions)."""
    ordered = order_versions(versions)
    return (ordered[-2], ordered[-1]) if len(ordered) >= 2 else None


def comparison_rows(counts: Iterable[CountRow], *, alpha: float = 0.05, min_runs: int = 20,
                    correction: str = "holm", test: str = "boschloo",
                    max_versions: int = 8) -> list[dict[str, Any]]:
    """Every comparison's cell verdicts as flat dicts (see the module docstring).

    Keys: backend, baseline, candidate, workload, nemesis, verdict (``regressed`` / ``pass`` /
    ``too-few-runs``), k_b, n_b, k_c, n_c, diff, diff_low, diff_high, p, adj_p, test.  A cell appears in a
    comparison when either version has a checked run in it.

    Raises:
        ValueError: bad gate parameters (as :func:`spark_analysis.regression.gate`), ``max_versions < 2`` or a
            count row with ``anomalous`` outside ``[0, runs]``.
    """
    if max_versions < 2:
        raise ValueError(f"max_versions must be >= 2 to compare anything; got {max_versions}")
    # (backend, cell) -> version -> (anomalous, runs); backend ALL sums every backend
    per: dict[tuple[str, str, str], dict[str, tuple[int, int]]] = {}
    backends: set[str] = set()
    for workload, nemesis, version, backend, runs, anomalous in counts:
        if not 0 <= anomalous <= runs:
            raise ValueError(f"count row {workload}x{nemesis} {version} {backend}: anomalous {anomalous} is outside "
                             f"[0, runs={runs}]")
        backends.add(backend)
        for b in (ALL, backend):
            cell = per.setdefault((b, workload, nemesis), {})
            k, n = cell.get(version, (0, 0))
            cell[version] = (k + anomalous, n + runs)
    versions = order_versions(v for cell in per.values() for v in cell)[-max_versions:]
    scopes = [ALL] + (sorted(backends) if len(backends) > 1 else [])
    out: list[dict[str, Any]] = []
    for backend in scopes:
        for i, baseline in enumerate(versions):
            for candidate in versions[i + 1:]:
                cells = []
                for (b, workload, nemesis), v in sorted(per.items()):
                    if b != backend:
                        continue
                    kb, nb = v.get(baseline, (0, 0))
                    kc, nc = v.get(candidate, (0, 0))
                    if nb or nc:
                        cells.append(CellCounts(workload, nemesis, kb, nb, kc, nc))
                if not cells:
                    continue
                result = gate(cells, alpha=alpha, min_runs=min_runs, correction=correction, test=test)
                for c in result.cells:
                    cc = c.counts
                    out.append({
                        "backend": backend, "baseline": baseline, "candidate": candidate, "workload": cc.workload,
                        "nemesis": cc.nemesis, "verdict": c.verdict, "k_b": cc.k_b, "n_b": cc.n_b, "k_c": cc.k_c,
                        "n_c": cc.n_c, "diff": c.diff, "diff_low": c.diff_low, "diff_high": c.diff_high,
                        "p": c.p_value, "adj_p": c.adjusted_p, "test": c.test,
                    })
    return out
