"""Stored runs: finding a run directory and summarising its ``results.json``.

A *run directory* is ``<results>/<test-name>/<UTC ts>/`` (see :mod:`harness.store`).  A *run summary* is the
small, cacheable part of a run's ``results.json`` (name, timestamp, verdict, anomaly counts, seed, duration)
-- the web index and the ``test-all`` table are built from summaries only, never from histories.

Verdict words: ``valid``, ``invalid``, ``unknown``, ``crashed`` (the run itself crashed), ``incomplete`` (no
usable ``results.json`` yet: running, or killed before checking).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.explain import checker_verdicts
from harness.protocols import verdict_of
from harness.store import read_results

__all__ = [
    "VERDICTS", "RunNotFound", "RunSummary", "read_run", "read_summary", "resolve_run_dir", "summarize_results",
    "verdict_word",
]

VERDICTS = ("valid", "invalid", "unknown", "crashed", "incomplete")
_RUN_FILES = ("results.json", "test.yaml", "history.jsonl")


class RunNotFound(ValueError):
    """No run directory matches the argument (names the argument and the places tried)."""


def _is_run_dir(p: Path) -> bool:
    return p.is_dir() and any((p / f).exists() for f in _RUN_FILES)


def resolve_run_dir(arg: str | None, results_root: str | Path = "results") -> Path:
    """The run directory meant by ``arg``.

    Accepts (in order): nothing (``<results>/latest``); a path to a run directory; a path to a test's
    directory (its ``latest``); a path relative to ``results_root`` (``queue/20260101T...Z`` or a test
    name).  Symlinks are resolved, so the answer names the real timestamp directory.

    Raises:
        RunNotFound: naming ``arg`` and every candidate tried.
    """
    root = Path(results_root)
    candidates: list[Path] = []
    if arg is None or arg in ("", "latest"):
        candidates.append(root / "latest")
    else:
        p = Path(arg)
        candidates += [p, p / "latest"]
        if not p.is_absolute():
            candidates += [root / p, root / p / "latest"]
    for c in candidates:
        if _is_run_dir(c):
            return c.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise RunNotFound(f"no run directory for {arg or 'latest'!r}: tried {tried} (a run directory holds "
                      f"{' or '.join(_RUN_FILES)}; see `splitbrain serve` or ls {root})")


def verdict_word(doc: Mapping[str, Any] | None) -> str:
    """One of :data:`VERDICTS` for a ``results.json`` document (``None`` = missing)."""
    if doc is None:
        return "incomplete"
    if doc.get("crashed"):
        return "crashed"
    v = verdict_of(doc)
    return "valid" if v is True else ("invalid" if v is False else "unknown")


@dataclass(frozen=True)
class RunSummary:
    """The cacheable facts of one run (everything the index and the tables show)."""

    name: str
    ts: str
    verdict: str
    anomaly_counts: Mapping[str, int] = field(default_factory=dict)
    seed: int | None = None
    duration_s: float | None = None
    rel_path: str = ""  # "<name>/<ts>" relative to the results root
    failing: tuple[str, ...] = ()  # checkers not valid (invalid first, then unknown)
    faults: tuple[str, ...] = ()  # fault kinds that took effect ("kill", "start-partition:isolate-master" ...)
    workloads: tuple[str, ...] = ()  # from the checker names "<workload>/<checker>"

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"RunSummary {self.rel_path}: verdict must be one of {VERDICTS}, got {self.verdict!r}")

    @property
    def anomalies(self) -> int:
        return sum(self.anomaly_counts.values())

    def describe(self) -> str:
        an = ", ".join(f"{k}={v}" for k, v in sorted(self.anomaly_counts.items())) or "none"
        return f"{self.name} {self.ts} {self.verdict} seed={self.seed} anomalies: {an}"


def summarize_results(doc: Mapping[str, Any] | None, *, name: str, ts: str) -> RunSummary:
    """A summary from a parsed ``results.json`` (``None``: no results yet)."""
    counts: dict[str, int] = {}
    seed: int | None = None
    duration: float | None = None
    if doc is not None:
        raw = doc.get("anomaly_counts") or {}
        if isinstance(raw, Mapping):
            counts = {str(k): int(v) for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}
        s = doc.get("seed")
        seed = s if isinstance(s, int) and not isinstance(s, bool) else None
        d = doc.get("duration_s")
        duration = float(d) if isinstance(d, int | float) and not isinstance(d, bool) else None
        name = str(doc.get("name") or name)
    failing: tuple[str, ...] = ()
    faults: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    if doc is not None:
        failing = tuple(v.name for v in checker_verdicts(doc) if v.valid is not True and v.name != "all")
        raw_faults = doc.get("faults")
        if isinstance(raw_faults, Mapping):
            faults = tuple(str(k) for k, f in raw_faults.items()
                           if isinstance(f, Mapping) and _count(f.get("effective")) > 0)
        checkers = doc.get("checkers")
        if isinstance(checkers, Mapping):
            workloads = tuple(sorted({str(c).split("/", 1)[0] for c in checkers if "/" in str(c)}))
    return RunSummary(name=name, ts=ts, verdict=verdict_word(doc), anomaly_counts=counts, seed=seed,
                      duration_s=duration, rel_path=f"{name}/{ts}", failing=failing, faults=faults,
                      workloads=workloads)


def _count(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def read_run(run_dir: Path) -> tuple[RunSummary, dict[str, Any] | None]:
    """The summary of a run directory on disk and its ``results.json`` (None, and verdict incomplete, when it
    has none or an unusable one: :func:`harness.store.read_results`), the file read once."""
    doc = read_results(run_dir)
    s = summarize_results(doc, name=run_dir.parent.name, ts=run_dir.name)
    return dataclasses.replace(s, rel_path=f"{run_dir.parent.name}/{run_dir.name}"), doc


def read_summary(run_dir: Path) -> RunSummary:
    """Summary of a run directory on disk (a torn or missing ``results.json`` reads as incomplete)."""
    return read_run(run_dir)[0]
