"""Checker results, anomaly records and verdict composition (the one definition of a checker's output).

Vocabulary:

* **Anomaly** -- one thing the history shows that a correct system could not have done. It carries the
  anomaly ``type`` (a name from the literature or from Jepsen: ``lost-write``, ``duplicate``, ``G1a`` ...),
  the ``key`` it concerns (a queue for queue anomalies, a broker set for cluster invariants), the history
  ``ops`` (op indices) that show it, the ``expected`` and ``observed`` values and a one-sentence
  ``explanation``.
* **Result** -- what one checker returns: ``valid`` is ``True``, ``False`` or ``"unknown"``; ``anomalies``
  maps an anomaly type to its records (a checker may keep only the first records of a type, ``counts``
  always holds the full number); ``stats`` is free-form JSON data; ``error`` says why a verdict is unknown.
* **compose** -- merges named results: ``False`` beats ``"unknown"``, which beats ``True`` (Jepsen
  ``checker/compose``).
* **check_safe** -- runs a checker and turns an exception into an ``"unknown"`` result with the error
  attached (Jepsen ``check-safe``): a crashing checker never crashes the run and never passes it.

``results.json`` shape (built by :func:`results_to_json`)::

    {
      "valid": true | false | "unknown",
      "checkers": {
        "<name>": {"valid": ..., "anomaly_counts": {"<type>": n}, "stats": {...}, "error": null | "...",
                   "anomaly_examples": {"<type>": [<anomaly>, ...]}}   # this checker's own, at most 3 per type
      },
      "anomaly_counts":   {"<type>": n},                 # summed over all checkers
      "anomaly_examples": {"<type>": [<anomaly>, ...]}   # at most 5 per type, in history order of discovery
    }

    <anomaly> = {"type": "lost-write", "key": "t/bs1/0", "ops": [12, 40], "expected": ..., "observed": ...,
                 "explanation": "..."}
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

UNKNOWN: Literal["unknown"] = "unknown"
Valid = bool | Literal["unknown"]
EXAMPLES_PER_TYPE = 5
CHECKER_EXAMPLES_PER_TYPE = 3  # per checker: enough to explain its verdict where it is shown (CLI, JUnit)

# Priority of verdicts when merging: the highest wins.
_PRIORITY: dict[Any, int] = {True: 0, UNKNOWN: 1, False: 2}

__all__ = [
    "EXAMPLES_PER_TYPE", "UNKNOWN", "Anomaly", "Result", "Valid", "check_safe", "compose", "merge_valid",
    "result_from_anomalies", "results_to_json",
]


def _check_valid(valid: object, where: str) -> None:
    if not (valid is True or valid is False or valid == UNKNOWN):
        raise ValueError(f"{where}: 'valid' must be True, False or 'unknown', got {valid!r}")


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One anomaly record; validated on construction."""

    type: str
    key: str
    ops: tuple[int, ...]
    expected: Any
    observed: Any
    explanation: str

    def __post_init__(self) -> None:
        if not self.type:
            raise ValueError("Anomaly: field 'type' must be a non-empty anomaly name")
        if not isinstance(self.ops, tuple) or not all(isinstance(i, int) for i in self.ops):
            raise ValueError(f"Anomaly {self.type}: field 'ops' must be a tuple of op indices, got {self.ops!r}")
        if not self.explanation:
            raise ValueError(f"Anomaly {self.type}: field 'explanation' must be a sentence")

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type, "key": self.key, "ops": list(self.ops), "expected": self.expected,
            "observed": self.observed, "explanation": self.explanation,
        }

    def describe(self) -> str:
        return f"{self.type} [{self.key}] ops={list(self.ops)}: {self.explanation}"


@dataclass(frozen=True, slots=True)
class Result:
    """A checker verdict.  ``counts`` defaults to the length of each anomaly list."""

    valid: Valid
    anomalies: dict[str, list[Anomaly]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_valid(self.valid, "Result")
        counts = dict(self.counts)
        for t, records in self.anomalies.items():
            counts[t] = max(counts.get(t, 0), len(records))
        object.__setattr__(self, "counts", {t: n for t, n in counts.items() if n > 0})

    def describe(self) -> str:
        types = ", ".join(f"{t}={n}" for t, n in sorted(self.counts.items())) or "no anomalies"
        err = f" error={self.error}" if self.error else ""
        return f"valid={self.valid} ({types}){err}"


def merge_valid(a: Valid, b: Valid) -> Valid:
    """False beats "unknown", which beats True."""
    return a if _PRIORITY[a] >= _PRIORITY[b] else b


def result_from_anomalies(
    anomalies: dict[str, list[Anomaly]], *, bad_types: set[str] | None = None, stats: dict[str, Any] | None = None,
    counts: dict[str, int] | None = None,
) -> Result:
    """A Result that is invalid iff some anomaly of a type in ``bad_types`` (default: every type) was found."""
    all_counts = dict(counts or {})
    for t, recs in anomalies.items():
        all_counts[t] = max(all_counts.get(t, 0), len(recs))
    bad = [t for t, n in all_counts.items() if n > 0 and (bad_types is None or t in bad_types)]
    return Result(valid=not bad, anomalies=anomalies, stats=stats or {}, counts=all_counts)


def compose(results: Mapping[str, Result]) -> Result:
    """Merge named results into one: verdicts by priority, anomalies by type, stats and errors by name."""
    valid: Valid = True
    anomalies: dict[str, list[Anomaly]] = {}
    counts: dict[str, int] = {}
    errors: list[str] = []
    for name, r in results.items():
        valid = merge_valid(valid, r.valid)
        for t, recs in r.anomalies.items():
            anomalies.setdefault(t, []).extend(recs)
        for t, n in r.counts.items():
            counts[t] = counts.get(t, 0) + n
        if r.error:
            errors.append(f"{name}: {r.error}")
    return Result(
        valid=valid, anomalies=anomalies, stats={name: r.stats for name, r in results.items()},
        error="; ".join(errors) or None, counts=counts,
    )


def check_safe(fn: Callable[..., Result], *args: Any, **kwargs: Any) -> Result:
    """Run ``fn(*args, **kwargs)``; an exception (or a non-Result return) becomes an "unknown" Result.

    The error text names the exception and ends with the innermost frames of its traceback.
    """
    try:
        r = fn(*args, **kwargs)
    except Exception as exc:  # the point of check_safe: any checker crash becomes "unknown"
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))
        name = getattr(fn, "__name__", repr(fn))
        return Result(valid=UNKNOWN, error=f"checker {name} crashed: {type(exc).__name__}: {exc}\n{tb}")
    if not isinstance(r, Result):
        return Result(valid=UNKNOWN, error=f"checker {fn!r} returned {type(r).__name__}, expected a Result")
    return r


def results_to_json(results: Mapping[str, Result], *, examples_per_type: int = EXAMPLES_PER_TYPE) -> dict[str, Any]:
    """The results.json object (see the module docstring) for named checker results."""
    merged = compose(results)
    examples: dict[str, list[dict[str, Any]]] = {}
    for t, recs in merged.anomalies.items():
        if recs:
            examples[t] = [a.to_dict() for a in recs[:examples_per_type]]
    return {
        "valid": merged.valid,
        "checkers": {
            name: {"valid": r.valid, "anomaly_counts": dict(sorted(r.counts.items())), "stats": r.stats,
                   "error": r.error,
                   "anomaly_examples": {t: [a.to_dict() for a in recs[:CHECKER_EXAMPLES_PER_TYPE]]
                                        for t, recs in sorted(r.anomalies.items()) if recs}}
            for name, r in results.items()
        },
        "anomaly_counts": dict(sorted(merged.counts.items())),
        "anomaly_examples": dict(sorted(examples.items())),
    }
