"""The run index behind the web UI: run summaries cached by ``results.json`` mtime, filters, path confinement.

Scale rule (jepsen-io/jepsen#223: an index that loaded whole tests became unusable at ~800 runs): the index
only ever reads ``results.json`` -- never a history -- and caches the resulting :class:`RunSummary` keyed by
the file's (mtime_ns, size).  A rescan costs one ``stat`` per run; a run is re-read only when its
``results.json`` changed (e.g. ``splitbrain analyze`` rewrote it).  Runs without ``results.json`` show as
``incomplete`` and are keyed by their directory's mtime.

:func:`confine` is the only way the web layer turns a URL path into a file path: anything that resolves
outside the results root (``..``, absolute paths, symlinks pointing out) is refused.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.runs import VERDICTS, RunSummary, read_summary

__all__ = ["Filters", "RunIndex", "confine", "filter_runs"]


def confine(root: Path, rel: str) -> Path | None:
    """``root/rel`` if it resolves inside ``root`` (which must already be resolved), else ``None``."""
    if "\x00" in rel:
        return None
    rel = rel.lstrip("/")
    try:
        p = (root / rel).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    return p if p == root or p.is_relative_to(root) else None


@dataclass(frozen=True)
class Filters:
    """Index filters: ``name`` substring, exact ``verdict``, ``since``/``until`` dates (YYYY-MM-DD, inclusive),
    ``workload`` (exact), ``fault`` (a substring of a fault kind that took effect) and ``anomaly`` (an anomaly
    kind the run has, exact)."""

    name: str = ""
    verdict: str = ""
    since: str = ""
    until: str = ""
    workload: str = ""
    fault: str = ""
    anomaly: str = ""

    def __post_init__(self) -> None:
        if self.verdict and self.verdict not in VERDICTS:
            raise ValueError(f"filter verdict must be one of {VERDICTS}, got {self.verdict!r}")
        for label, d in (("since", self.since), ("until", self.until)):
            if d and not (len(d) == 10 and d[4] == "-" and d[7] == "-" and d.replace("-", "").isdigit()):
                raise ValueError(f"filter {label} must be a date YYYY-MM-DD, got {d!r}")

    def keep(self, s: RunSummary) -> bool:
        day = s.ts[:8]  # run timestamps are YYYYMMDDTHHMMSS.mmmZ
        return ((not self.name or self.name.lower() in s.name.lower())
                and (not self.verdict or s.verdict == self.verdict)
                and (not self.since or day >= self.since.replace("-", ""))
                and (not self.until or day <= self.until.replace("-", ""))
                and (not self.workload or self.workload in s.workloads)
                and (not self.fault or any(self.fault in f for f in s.faults))
                and (not self.anomaly or s.anomaly_counts.get(self.anomaly, 0) > 0))


def filter_runs(runs: Iterable[RunSummary], filters: Filters) -> list[RunSummary]:
    return [s for s in runs if filters.keep(s)]


class RunIndex:
    """All runs under a results root, newest first; thread-safe; see the module docstring."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._cache: dict[str, tuple[tuple[int, int, bool], RunSummary]] = {}
        self._lock = threading.Lock()
        self.reads = 0  # results.json files parsed so far (tests watch this to prove the cache works)

    def _run_dirs(self) -> Iterable[tuple[str, Path]]:
        for t in _subdirs(self.root):
            for r in _subdirs(t.path):
                yield f"{t.name}/{r.name}", Path(r.path)

    def _key(self, run_dir: Path) -> tuple[int, int, bool]:
        try:
            st = os.stat(run_dir / "results.json")
            return (st.st_mtime_ns, st.st_size, True)
        except OSError:
            try:
                return (os.stat(run_dir).st_mtime_ns, 0, False)
            except OSError:
                return (0, 0, False)

    def runs(self) -> list[RunSummary]:
        """Every run's summary (rescans the directory tree; re-reads only changed results.json)."""
        with self._lock:
            seen: dict[str, tuple[tuple[int, int, bool], RunSummary]] = {}
            for rel, path in self._run_dirs():
                key = self._key(path)
                cached = self._cache.get(rel)
                if cached is not None and cached[0] == key:
                    seen[rel] = cached
                    continue
                if key[2]:
                    self.reads += 1
                seen[rel] = (key, read_summary(path))
            self._cache = seen
            out = [s for _, s in seen.values()]
        out.sort(key=lambda s: (s.ts, s.rel_path), reverse=True)
        return out

    def get(self, rel: str) -> RunSummary | None:
        path = confine(self.root, rel)
        if path is None or not path.is_dir():
            return None
        return read_summary(path)

    @staticmethod
    def counts(runs: Sequence[RunSummary]) -> dict[str, int]:
        out = dict.fromkeys(VERDICTS, 0)
        for s in runs:
            out[s.verdict] += 1
        return out


def _subdirs(path: str | Path) -> list[os.DirEntry[str]]:
    """The real directories in ``path``: no hidden ones, no ``latest`` or other symlink; [] if it cannot be read."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return []
    return [e for e in entries
            if not e.name.startswith(".") and e.name != "latest" and not e.is_symlink() and e.is_dir()]
