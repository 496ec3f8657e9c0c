"""A seeded corpus generator: realistic ``results/<test>/<ts>/`` directories with known truth.

Each run belongs to a *cell* (workload, nemesis package, anomaly rate).  Within a cell exactly
``round(rate * runs_in_cell)`` runs are anomalous (chosen by the seeded RNG), so the recovered rate is
known exactly.  Each run's *version* is drawn uniformly from ``versions`` by its own seeded RNG,
independently of its cell and day, so a version's rate in a cell is the cell's rate up to sampling noise.
A :class:`Regression` injects a known difference: the runs of its version in its cell get exactly
``round(rate * those runs)`` anomalous runs instead (the cell's other runs keep the cell's rate).  A run has:

* ``test.yaml``     -- a spec in the harness's shape (name, backend, nodes, workloads, nemesis, load, seed,
  ``cluster.version``);
* ``history.jsonl`` -- client ops and nemesis ops.  The ``queue`` workload sends unique ints to one queue
  and polls them back (a final ``drain`` reads the rest), so a clean run loses nothing; an anomalous run
  hides 1-3 acknowledged sends from every poll (the queue checker's ``lost-write``).  Other workloads issue
  ``write``/``read`` ops.  Every nemesis package (not ``none``) opens ``start-<kind>`` and closes
  ``stop-<kind>`` windows; ops invoked during a window fail or go ``info`` more often and are slower;
* ``results.json``  -- in the :func:`checker.compose.results_to_json` shape, with ``stats.time_s`` per
  checker, ``duration_s``, ``cluster_version``, ``git_revision`` and ``provenance`` (the harness's shape,
  :mod:`harness.provenance`).

Damaged runs (``torn``, ``no_results``, ``bad_yaml`` counts) are taken from the end of the corpus: a torn
last history line (status partial), a missing results.json (partial), a test.yaml that is not YAML
(malformed).  :func:`generate` returns a :class:`Corpus` with the truth for each run.

This module is a shell (it writes files); its randomness comes only from the ``seed`` argument.
"""

from __future__ import annotations

import datetime as _dt
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["DEFAULT_CELLS", "DEFAULT_VERSIONS", "Cell", "Corpus", "Regression", "SynthRun", "generate",
           "parse_regression"]

_QUEUE = "t/bs1/0"
_NODES = ("c1", "c2", "c3", "b1", "b2", "b3")
DEFAULT_VERSIONS = ("0.1.0", "0.2.0")
_DAY0 = _dt.datetime(2026, 11, 1, 2, 0, tzinfo=_dt.UTC)


@dataclass(frozen=True, slots=True)
class Cell:
    workload: str
    nemesis: str  # a package name, or "none"
    anomaly_rate: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.anomaly_rate <= 1.0:
            raise ValueError(f"Cell {self.workload}x{self.nemesis}: anomaly_rate must be in [0, 1], "
                             f"got {self.anomaly_rate}")


@dataclass(frozen=True, slots=True)
class Regression:
    """Runs of ``version`` in the cell (``workload``, ``nemesis``) are anomalous at ``anomaly_rate``."""

    version: str
    workload: str
    nemesis: str
    anomaly_rate: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.anomaly_rate <= 1.0:
            raise ValueError(f"Regression {self.version} {self.workload}x{self.nemesis}: anomaly_rate must be in "
                             f"[0, 1], got {self.anomaly_rate}")


def parse_regression(text: str) -> Regression:
    """``VERSION:WORKLOAD:NEMESIS:RATE`` (e.g. ``0.3.0:queue:kill:0.6``) as a :class:`Regression`.

    Raises:
        ValueError: not four ``:``-separated fields, or a rate that is not a number in [0, 1].
    """
    parts = text.split(":")
    if len(parts) != 4 or not all(parts[:3]):
        raise ValueError(f"--regression {text!r}: expected VERSION:WORKLOAD:NEMESIS:RATE, e.g. 0.3.0:queue:kill:0.6")
    try:
        rate = float(parts[3])
    except ValueError:
        raise ValueError(f"--regression {text!r}: RATE {parts[3]!r} is not a number in [0, 1]") from None
    return Regression(parts[0], parts[1], parts[2], rate)


DEFAULT_CELLS = (
    Cell("queue", "partition", 0.3), Cell("queue", "kill", 0.1), Cell("queue", "none", 0.0),
    Cell("broker-ids", "pause", 0.2),
)


@dataclass(frozen=True, slots=True)
class SynthRun:
    run_id: str
    cell: Cell
    anomalous: bool
    lost: int  # acknowledged sends hidden from every poll
    damage: str  # "" | "torn" | "no_results" | "bad_yaml"
    date: str
    version: str
    backend: str = "local"


@dataclass
class Corpus:
    root: Path
    runs: list[SynthRun] = field(default_factory=list)

    def expected_status(self, run: SynthRun) -> str:
        return {"": "ok", "torn": "partial", "no_results": "partial", "bad_yaml": "malformed"}[run.damage]


class _History:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, t: int, typ: str, process: int | str, f: str, value: object, error: str | None = None) -> None:
        p = f'"{process}"' if isinstance(process, str) else str(process)
        err = "" if error is None else f',"error":"{error}"'
        self.lines.append(f'{{"index":{len(self.lines)},"time":{t},"type":"{typ}","process":{p},"f":"{f}",'
                          f'"value":{json.dumps(value, separators=(",", ":"))}{err}}}')


def _windows(rng: random.Random, nemesis: str, span_ns: int) -> list[tuple[int, int]]:
    if nemesis == "none":
        return []
    out, t = [], span_ns // 10
    while t < span_ns * 8 // 10:
        dur = rng.randint(span_ns // 40, span_ns // 12)
        out.append((t, t + dur))
        t += dur + rng.randint(span_ns // 20, span_ns // 6)
    return out


def _history(rng: random.Random, cell: Cell, ops: int, concurrency: int, lost: int) -> tuple[list[str], int]:
    """History lines of one run and its lost count (sends hidden from polls)."""
    h = _History()
    span_ns = ops * 1_000_000  # ~1 ms of test time per op on average
    windows = _windows(rng, cell.nemesis, span_ns)
    kind = cell.nemesis
    procs = list(range(concurrency))
    log: list[tuple[int, int]] = []  # acknowledged (offset, value) visible to polls
    hidden: set[int] = set()
    positions = [0] * concurrency
    next_value = 0
    t, wi, in_w, recover_until = 0, 0, False, -1
    budget = ops - 4 * len(windows)
    client_ops = max(16, budget * 12 // 25 if cell.workload == "queue" else budget // 2)  # queue: room to drain
    for _ in range(client_ops):
        if wi < len(windows) and not in_w and t >= windows[wi][0]:
            h.add(t, "invoke", "nemesis", f"start-{kind}", {"targets": [rng.choice(_NODES)]})
            h.add(t + 50_000, "info", "nemesis", f"start-{kind}", {"targets": [rng.choice(_NODES)]})
            in_w = True
        elif in_w and t >= windows[wi][1]:
            h.add(t, "invoke", "nemesis", f"stop-{kind}", None)
            h.add(t + 50_000, "info", "nemesis", f"stop-{kind}", None)
            in_w, wi = False, wi + 1
            recover_until = t + rng.randint(span_ns // 400, span_ns // 50)  # the cluster takes a while to recover
        slot = rng.randrange(concurrency)
        p = procs[slot]
        degraded = in_w or t < recover_until
        lat = rng.randint(15_000_000, 40_000_000) if degraded else rng.randint(500_000, 3_000_000)
        roll = rng.random()
        outcome: str | None = None
        if degraded:
            outcome = "fail" if roll < 0.25 else "info" if roll < 0.3 else None
        elif roll < 0.002:
            outcome = "info"
        if cell.workload == "queue":
            if rng.random() < 0.6:
                v = next_value
                next_value += 1
                h.add(t, "invoke", p, "send", {"queue": _QUEUE, "value": v})
                if outcome is None:
                    off = len(log) + len(hidden)
                    if lost > len(hidden) and off >= 1:
                        hidden.add(off)
                    else:
                        log.append((off, v))
                    h.add(t + lat, "ok", p, "send", {"queue": _QUEUE, "value": v, "offset": off})
                else:
                    h.add(t + lat, outcome, p, "send", {"queue": _QUEUE, "value": v}, "timeout")
            else:
                h.add(t, "invoke", p, "poll", {"queue": _QUEUE, "consumer": f"c{slot}"})
                if outcome is None:
                    recs = [list(r) for r in log[positions[slot]: positions[slot] + 5]]
                    positions[slot] += len(recs)
                    h.add(t + lat, "ok", p, "poll", {"queue": _QUEUE, "records": recs})
                else:
                    h.add(t + lat, outcome, p, "poll", {"queue": _QUEUE, "consumer": f"c{slot}"}, "timeout")
        else:
            f = "write" if rng.random() < 0.5 else "read"
            h.add(t, "invoke", p, f, {"key": "k", "value": next_value})
            next_value += 1
            h.add(t + lat, outcome or "ok", p, f, {"key": "k", "value": next_value})
        if outcome == "info":
            procs[slot] = p + concurrency  # the worker continues as a new process
        t += lat + rng.randint(100_000, 1_000_000)
    if in_w:
        h.add(t, "invoke", "nemesis", f"stop-{kind}", None)
        h.add(t + 50_000, "info", "nemesis", f"stop-{kind}", None)
        t += 100_000
    if cell.workload == "queue":  # final drain: consumer c0 reads everything it has not read yet
        p = procs[0]
        while True:
            recs = [list(r) for r in log[positions[0]: positions[0] + 50]]
            h.add(t, "invoke", p, "drain", {"queue": _QUEUE, "consumer": "c0"})
            h.add(t + 1_000_000, "ok", p, "drain", {"queue": _QUEUE, "records": recs})
            positions[0] += len(recs)
            t += 2_000_000
            if not recs:
                break
    return h.lines, len(hidden)


def _assign(rng: random.Random, runs: int, cells: Sequence[Cell], versions: Sequence[str],
            regressions: Sequence[Regression]) -> list[tuple[Cell, bool]]:
    """Cell and anomalous flag of each run: exact counts per cell, and per regressed (cell, version)."""
    reg = {(r.version, r.workload, r.nemesis): r.anomaly_rate for r in regressions}
    groups: dict[tuple[int, str | None], list[int]] = {}
    for i in range(runs):
        ci = i % len(cells)
        c = cells[ci]
        key = versions[i] if (versions[i], c.workload, c.nemesis) in reg else None
        groups.setdefault((ci, key), []).append(i)
    out: list[tuple[Cell, bool]] = [(cells[0], False)] * runs
    for (ci, version), idxs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        c = cells[ci]
        rate = c.anomaly_rate if version is None else reg[(version, c.workload, c.nemesis)]
        bad = set(rng.sample(idxs, round(rate * len(idxs))))
        for i in idxs:
            out[i] = (c, i in bad)
    return out


def generate(root: str | Path, *, runs: int, ops: int, seed: int, cells: Sequence[Cell] = DEFAULT_CELLS,
             days: int = 3, concurrency: int = 4, torn: int = 0, no_results: int = 0, bad_yaml: int = 0,
             first: int = 0, versions: Sequence[str] = DEFAULT_VERSIONS,
             regressions: Sequence[Regression] = (), backends: Sequence[str] = ("local",)) -> Corpus:
    """Write ``runs`` run directories of about ``ops`` ops each under ``root`` (see the module docstring).

    ``first`` numbers the runs from ``first`` (their timestamps follow from it), so a second call with a
    larger ``first`` adds new runs next to the old ones.  ``versions`` are drawn per run from an RNG of their
    own (seeded by ``seed`` and ``first``), so adding a regression or a version never moves the cells;
    ``backends`` likewise (one RNG of their own; a single backend draws nothing, so older corpora are unchanged).

    Raises:
        ValueError: bad sizes, no versions, or a regression whose version or cell is not in the corpus.
    """
    if runs < 1 or ops < 10 or not cells or days < 1:
        raise ValueError(f"generate: need runs >= 1, ops >= 10, cells and days >= 1; got runs={runs}, ops={ops}, "
                         f"{len(cells)} cells, days={days}")
    if torn + no_results + bad_yaml > runs:
        raise ValueError(f"generate: {torn + no_results + bad_yaml} damaged runs requested but only {runs} runs")
    if not versions or len(set(versions)) != len(versions):
        raise ValueError(f"generate: need distinct versions, at least one; got {list(versions)}")
    if not backends or len(set(backends)) != len(backends):
        raise ValueError(f"generate: need distinct backends, at least one; got {list(backends)}")
    known_cells = {(c.workload, c.nemesis) for c in cells}
    for r in regressions:
        if r.version not in versions or (r.workload, r.nemesis) not in known_cells:
            raise ValueError(f"generate: regression {r.version}:{r.workload}:{r.nemesis} names a version or cell "
                             f"the corpus lacks; versions {list(versions)}, cells "
                             f"{sorted(f'{w}:{n}' for w, n in known_cells)}")
    rng = random.Random(seed)
    version_rng = random.Random(f"versions-{seed}-{first}")
    run_versions = [version_rng.choice(list(versions)) for _ in range(runs)]
    backend_rng = random.Random(f"backends-{seed}-{first}")
    run_backends = [backend_rng.choice(list(backends)) if len(backends) > 1 else backends[0] for _ in range(runs)]
    root = Path(root)
    corpus = Corpus(root=root)
    damage = [""] * (runs - torn - no_results - bad_yaml) + ["torn"] * torn + ["no_results"] * no_results + [
        "bad_yaml"] * bad_yaml
    for i, (cell, anomalous) in enumerate(_assign(rng, runs, cells, run_versions, regressions)):
        run_seed = rng.randrange(2**31)
        run_rng = random.Random(run_seed)
        start = _DAY0 + _dt.timedelta(days=(first + i) % days, seconds=(first + i) * 7)
        test = f"{cell.workload}-{cell.nemesis}"
        ts = start.strftime("%Y%m%dT%H%M%S.%f")[:-3] + "Z"
        path = root / test / ts
        path.mkdir(parents=True, exist_ok=True)
        version = run_versions[i]
        want_lost = run_rng.randint(1, 3) if anomalous and cell.workload == "queue" else 0
        lines, lost = _history(run_rng, cell, ops, concurrency, want_lost)
        anomalous = anomalous and (lost > 0 or cell.workload != "queue")
        counts = {"lost-write": lost} if lost else ({"G1c": 1} if anomalous else {})
        spec = {
            "name": test, "backend": run_backends[i],
            "nodes": {"controllers": 3, "broker_sets": {"count": 1, "replicas": 3}},
            "cluster": {"version": version}, "workloads": [cell.workload],
            "nemesis": {"packages": [] if cell.nemesis == "none" else [cell.nemesis], "interval_s": 10},
            "concurrency": concurrency, "rate": 50.0, "time_limit_s": 60.0, "seed": run_seed,
        }
        example = {"type": next(iter(counts)), "key": _QUEUE, "ops": [1], "expected": "present",
                   "observed": "absent", "explanation": "an acknowledged send was never read"} if counts else None
        results = {
            "valid": not anomalous,
            "checkers": {"queue": {"valid": not anomalous, "anomaly_counts": counts,
                                   "stats": {"time_s": round(run_rng.uniform(0.01, 2.0), 3)}, "error": None},
                         "perf": {"valid": True, "anomaly_counts": {}, "stats": {"time_s": 0.01}, "error": None}},
            "anomaly_counts": counts, "anomaly_examples": {t: [example] for t in counts},
            "name": test, "seed": run_seed, "duration_s": 60.0, "cluster_version": version,
            "git_revision": f"rev-{version}",
            "provenance": {
                "sut": {"name": "splitbrain", "version": version, "revision": f"rev-{version}", "dirty": False,
                        "revision_error": None},
                "harness": {"version": "0.1.0", "revision": "rev-harness", "dirty": False, "revision_error": None},
                "cluster_version_label": version, "host": f"synth-{i % 3}", "backend": run_backends[i],
                "python": "3.11",
            },
        }
        d = damage[i]
        if d == "bad_yaml":
            (path / "test.yaml").write_text("name: [unclosed\n  workloads: {\n", encoding="utf-8")
        else:
            (path / "test.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
        text = "\n".join(lines) + "\n"
        if d == "torn":
            last = lines[-1]
            text = "\n".join(lines[:-1]) + "\n" + last[: len(last) // 2]
        (path / "history.jsonl").write_text(text, encoding="utf-8")
        if d != "no_results":
            (path / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        corpus.runs.append(SynthRun(f"{test}/{ts}", cell, anomalous, lost, d, start.strftime("%Y-%m-%d"), version,
                                    run_backends[i]))
    return corpus
