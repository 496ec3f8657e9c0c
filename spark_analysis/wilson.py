"""The Wilson score interval for a binomial proportion (pure; the same formula as Spark columns is
:func:`spark_analysis.metrics.wilson_columns`).

For ``k`` successes in ``n`` trials and the normal quantile ``z`` (1.96 for 95%), with ``p = k / n``::

    centre = (p + z²/2n) / (1 + z²/n)
    half   = z / (1 + z²/n) * sqrt(p(1-p)/n + z²/4n²)
    interval = [centre - half, centre + half]

Unlike the normal ("Wald") interval it stays inside [0, 1] and is not degenerate at ``k = 0`` or ``k = n``,
which matters here: most cells of a nightly corpus have few runs and zero anomalies.  ``n = 0`` gives the
uninformative interval [0, 1].
"""

from __future__ import annotations

import math

__all__ = ["Z95", "wilson_interval"]

Z95 = 1.959963984540054


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval ``(low, high)`` of ``k`` successes in ``n`` trials.

    Raises:
        ValueError: ``n < 0``, ``k`` outside ``[0, n]`` or ``z <= 0``.
    """
    if n < 0 or not 0 <= k <= max(n, 0) or z <= 0:
        raise ValueError(f"wilson_interval: need 0 <= k <= n and z > 0; got k={k}, n={n}, z={z}")
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # At k = 0 (k = n) the bound is exactly 0 (1); the formula gets there only up to rounding.
    return (0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))
