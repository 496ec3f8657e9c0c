"""What the search benches share: one real run, when its anomaly was first seen, a search of runs, resuming.

A *search* (``bench/fault_search.py``, ``bench/mutants.py``) runs real ``splitbrain test`` commands (local backend)
one after another -- attempt i uses seed ``seed*1000 + i`` and a main phase of ``run_s`` seconds -- until a run
reports what the search looks for or the attempts' main phases add up to the budget.  What counts is given as a
set of anomaly kinds (``results.json`` ``anomaly_counts``); an empty set means any invalid verdict.  This module
holds the parts both benches use, so they measure alike:

* :func:`shows`, :func:`detection_s`, :func:`main_phase_s`, :func:`coverage_at`, :func:`anomaly_kinds`,
  :func:`summarize` -- pure readings of a run's ``results.json`` and history, and the censored summary of a set
  of searches;
* :func:`run_once` and :func:`search` -- the real runs (``sut_revision``: the nodes run the cluster code of that
  git revision, ``splitbrain test --sut-revision``);
* :class:`Progress` -- finished searches in ``progress.jsonl``, so a stopped bench resumes.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from checker.history import HistoryError, read_jsonl  # noqa: E402

RUN_TIMEOUT_S = 1800
"""Wall limit of one ``splitbrain test`` run (the first run of a new ``--sut-revision`` also builds its virtual
environment)."""


def shows(doc: Mapping[str, Any], kinds: frozenset[str], *, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether a run's ``results.json`` shows one of ``kinds``; with no kinds, whether its verdict is invalid for
    some reason other than the anomaly kinds in ``ignore`` (a run invalid only through ignored kinds does not
    count; one invalid without any counted kind does) (pure)."""
    counts = doc.get("anomaly_counts") or {}
    if kinds:
        return any(counts.get(k) for k in kinds)
    if doc.get("valid") is not False:
        return False
    seen = failing_kinds(doc)
    return not seen or any(k not in ignore for k in seen)


def failing_kinds(doc: Mapping[str, Any]) -> list[str]:
    """The anomaly kinds of the checkers whose verdict is false, sorted (pure).  Kinds a valid checker counted
    (the queue checker's ``unseen`` when its drain could not run, say) are not why a run is invalid; a failing
    checker that names no kind counts as its own name."""
    out: set[str] = set()
    checkers = doc.get("checkers")
    for name, entry in (checkers.items() if isinstance(checkers, Mapping) else ()):
        if isinstance(entry, Mapping) and entry.get("valid") is False:
            counted = [k for k, v in (entry.get("anomaly_counts") or {}).items() if v]
            out.update(counted or [str(name)])
    return sorted(out)


def anomaly_kinds(doc: Mapping[str, Any]) -> list[str]:
    """The anomaly kinds that made a run invalid (:func:`failing_kinds`), else every kind it reported (pure)."""
    return failing_kinds(doc) or sorted(k for k, v in (doc.get("anomaly_counts") or {}).items() if v)


def main_phase_s(doc: Mapping[str, Any], run_s: float) -> float:
    """The seconds a run's main phase lasted (``main_phase_end_ns - main_phase_start_ns``); ``run_s`` when the
    run did not record both (a crashed or failed run) (pure)."""
    start, end = doc.get("main_phase_start_ns"), doc.get("main_phase_end_ns")
    if isinstance(start, int) and isinstance(end, int) and end > start:
        return (end - start) / 1e9
    return run_s


def _cited_examples(doc: Mapping[str, Any], kinds: frozenset[str],
                    ignore: frozenset[str] = frozenset()) -> list[Mapping[str, Any]]:
    """The anomaly records that count: of the ``kinds`` (any checker), or with no kinds every record not of an
    ``ignore`` kind of a checker whose verdict is false.  Both the merged examples and each checker's own are read:
    the merged list keeps the first 5 per type in checker order, so a later checker's records may appear only in
    its own."""
    checkers = [c for c in (doc.get("checkers") or {}).values() if isinstance(c, Mapping)]
    if kinds:
        sources = [doc.get("anomaly_examples") or {}, *(c.get("anomaly_examples") or {} for c in checkers)]
    else:
        sources = [c.get("anomaly_examples") or {} for c in checkers if c.get("valid") is False]
    out: list[Mapping[str, Any]] = []
    for by_type in sources:
        for t, recs in by_type.items():
            if (t in kinds) if kinds else (t not in ignore):
                out += [r for r in recs or [] if isinstance(r, Mapping)]
    return out


def detection_s(doc: Mapping[str, Any], ops: Sequence[Mapping[str, Any]], *, kinds: frozenset[str] = frozenset(),
                run_s: float, ignore: frozenset[str] = frozenset()) -> float | None:
    """Main-phase seconds into a run at which the anomaly it shows could first be seen; None if it shows none.

    ``doc`` is the run's ``results.json``, ``ops`` its ``history.jsonl`` ops (dicts), ``kinds`` the anomaly
    types that count (empty: any record not of an ``ignore`` kind of a checker that failed, as :func:`shows`).
    An anomaly's moment is its earliest cited op (``ops`` history indices) that completed -- an invoke shows
    nothing yet, so invokes count only for a record that cites nothing else.  For ``lost-write`` that is the
    acknowledgement of the lost send, for ``nonlinearizable`` the last ok op before the one that cannot be
    placed: the anomaly cannot exist before it, so this is the earliest defensible mark, and it is the same rule
    for every search.  The run's moment is the earliest over its recorded records (``results.json`` keeps only
    the first few of each type, in the checker's order, so the true earliest can be missed, making this an upper
    bound of the rule).  A moment is measured from ``main_phase_start_ns`` and clamped to the main phase (an op
    in the final drain counts as the phase's end).  When no record cites an op found in ``ops`` (e.g. invariants
    over node log events), or the run has no main-phase start, the answer is the main phase's end: the whole
    attempt was needed (pure).
    """
    if not shows(doc, kinds, ignore=ignore):
        return None
    length = main_phase_s(doc, run_s)
    start = doc.get("main_phase_start_ns")
    if not isinstance(start, int):
        return round(length, 3)
    records = [[i for i in r.get("ops") or [] if isinstance(i, int) and i >= 0]
               for r in _cited_examples(doc, kinds, ignore)]
    wanted = {i for cited in records for i in cited}
    by_index = {op["index"]: op for op in ops if op.get("index") in wanted and isinstance(op.get("time"), int)}
    moments = []
    for cited in records:
        seen = [by_index[i] for i in cited if i in by_index]
        done = [op["time"] for op in seen if op.get("type") != "invoke"]
        if done or seen:
            moments.append(min(done or [op["time"] for op in seen]))
    if not moments:
        return round(length, 3)
    return round(min(max((min(moments) - start) / 1e9, 0.0), length), 3)


def coverage_at(doc: Mapping[str, Any], at_s: float) -> int:
    """Coverage points a run had reached ``at_s`` seconds into its main phase (pure)."""
    curve = (doc.get("coverage") or {}).get("over_time") or []
    return max([int(n) for t, n in curve if float(t) <= at_s], default=0)


def summarize(searches: Sequence[Mapping[str, Any]], budget_s: float) -> dict[str, Any]:
    """Found fraction and the median detection seconds of a set of searches, with never-found searches censored
    at the budget: the median is a number only when more than half found it, else it is only known to exceed
    the budget (``median_censored``) (pure)."""
    n = len(searches)
    hits = [s for s in searches if s["found"]]
    times = [float(s["detect_s"]) if s["found"] else math.inf for s in searches]
    median = statistics.median(times) if 2 * len(hits) > n else None
    return {"seeds": n, "found": len(hits), "budget_s": budget_s,
            "found_fraction": round(len(hits) / n, 3) if n else None,
            "median_detect_s": round(median, 3) if median is not None else None,
            "median_censored": bool(n) and median is None,
            "detect_s_each": [s["detect_s"] if s["found"] else None for s in searches]}


def run_once(spec_path: Path, mode: str, seed: int, results: Path, *,
             sut_revision: str | None = None) -> tuple[dict[str, Any], float]:
    """One real ``splitbrain test`` run; its ``results.json`` (with ``run_dir``) and wall seconds.  A run that left
    no results gives ``{"valid": "unknown", "error": ...}``."""
    dirs = results / f".dirs-{spec_path.stem}-{mode}-{seed}"
    dirs.unlink(missing_ok=True)
    started = time.monotonic()
    cmd = [sys.executable, "-m", "harness.cli", "test", str(spec_path), "--nemesis-mode", mode, "--seed", str(seed),
           "--results", str(results), "--quiet", "--run-dirs-file", str(dirs)]
    if sut_revision is not None:
        cmd += ["--sut-revision", sut_revision]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        failure = f"exit {proc.returncode}: {proc.stderr[-400:]}"
    except subprocess.TimeoutExpired:
        failure = f"no result within {RUN_TIMEOUT_S} s"
    wall = time.monotonic() - started
    try:
        run_dir = Path(dirs.read_text().split()[-1])
        doc = json.loads((run_dir / "results.json").read_text())
        doc["run_dir"] = str(run_dir)
    except (OSError, IndexError, ValueError):
        doc = {"valid": "unknown", "error": failure}
    return doc, wall


def history_ops(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The run's history ops as dicts; none when it cannot be read (detection then falls back to the run's end)."""
    try:
        return [op.to_dict() for op in read_jsonl(Path(str(doc["run_dir"])) / "history.jsonl")]
    except (KeyError, OSError, HistoryError, ValueError):
        return []


def search(label: str, mode: str, seed: int, *, spec: Mapping[str, Any], kinds: frozenset[str], budget_s: float,
           run_s: float, results: Path, coverage_s: float, sut_revision: str | None = None,
           ignore: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Attempts of ``spec`` until one shows ``kinds`` (empty: an invalid verdict not only through the anomaly
    kinds in ``ignore``, as :func:`shows`) or the budget of main-phase
    seconds is spent.  A guided search keeps what it learned from one attempt to the next
    (``nemesis.guided_memory``, fresh per search), as a campaign would.  ``label`` names the spec and memory
    files under ``results``; the answer lists every attempt and, when found, the detecting attempt's anomaly
    kinds (``anomalies``)."""
    spec = json.loads(json.dumps(spec))
    if mode == "guided":
        memory = results / f"memory-{label}-{seed}.json"
        memory.unlink(missing_ok=True)
        spec["nemesis"]["guided_memory"] = str(memory)
    spec_path = results / f"search-{label}-{mode}-{seed}.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    spent, main_s, wall, attempts = 0.0, 0.0, 0.0, []
    first_cov = None
    i = 0
    while spent + run_s <= budget_s + 1e-9:
        doc, w = run_once(spec_path, mode, seed * 1000 + i, results, sut_revision=sut_revision)
        spent, wall = spent + run_s, wall + w
        if first_cov is None:
            first_cov = coverage_at(doc, coverage_s)
        hit = shows(doc, kinds, ignore=ignore)
        at = detection_s(doc, history_ops(doc), kinds=kinds, run_s=run_s, ignore=ignore) if hit else None
        attempts.append({"seed": seed * 1000 + i, "found": hit, "valid": doc.get("valid"),
                         "anomalies": anomaly_kinds(doc),
                         "main_phase_s": round(main_phase_s(doc, run_s), 3), "detect_in_attempt_s": at,
                         "coverage": (doc.get("coverage") or {}).get("points"), "run_dir": doc.get("run_dir"),
                         "wall_s": round(w, 1), **({"error": doc["error"]} if "error" in doc else {})})
        print(f"#   {label} {mode} seed={seed} attempt={i} found={hit} at={at} valid={doc.get('valid')} "
              f"coverage={attempts[-1]['coverage']} wall={w:.0f}s", file=sys.stderr, flush=True)
        i += 1
        if at is not None:
            return {"seed": seed, "found": True, "detect_s": round(main_s + at, 3), "detect_wall_s": round(wall, 1),
                    "anomalies": attempts[-1]["anomalies"], "attempts": attempts, "coverage_at_s": first_cov}
        main_s += main_phase_s(doc, run_s)
    return {"seed": seed, "found": False, "detect_s": None, "detect_wall_s": round(wall, 1), "anomalies": [],
            "attempts": attempts, "coverage_at_s": first_cov}


class Progress:
    """Finished searches, one JSON line each, under the results root: a long bench that is stopped (or crashes)
    resumes where it was when run again on the same root with the same settings; a line written under other
    settings or another spec of its case is ignored, so a changed budget or case never mixes with an old one."""

    def __init__(self, path: Path, settings: Mapping[str, Any]) -> None:
        self.path, self.settings = path, dict(settings)
        self.done: dict[tuple[str, str, int], tuple[Any, dict[str, Any]]] = {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut by a crash mid-write
            if isinstance(rec, dict) and rec.get("settings") == self.settings and isinstance(rec.get("search"), dict):
                key = (str(rec.get("case")), str(rec.get("mode")), int(rec["search"].get("seed", -1)))
                self.done[key] = (rec.get("spec"), rec["search"])

    def get(self, case: str, mode: str, seed: int, spec: Mapping[str, Any]) -> dict[str, Any] | None:
        found = self.done.get((case, mode, seed))
        return found[1] if found is not None and found[0] == spec else None

    def add(self, case: str, mode: str, spec: Mapping[str, Any], done: dict[str, Any]) -> None:
        self.done[(case, mode, int(done["seed"]))] = (dict(spec), done)
        line = json.dumps({"case": case, "mode": mode, "settings": self.settings, "spec": spec, "search": done},
                          default=str)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def checkout_commit() -> str | None:
    """The checkout's commit, with ``+dirty`` when files differ from it (what a bench run was measured with)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) or None
