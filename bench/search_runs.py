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
* :class:`Progress` -- finished searches in ``progress.jsonl``, so a stopped bench resumes;
* :class:`SimTally`, :func:`proc_cpu_s` (pure) and :func:`sim_search`, :func:`sim_probe` -- a search by the
  whole-cluster simulator of a revision (``splitbrain sim`` run by the revision's own interpreter) instead of real
  runs: seeds until one is invalid or the simulator's CPU seconds reach the budget; and a probe that says whether
  a given range of lines of one file ran at all in the simulated cluster.
"""

from __future__ import annotations

import json
import math
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
    checker that names no kind counts as its own name -- except in a run that crashed (``crashed`` in its
    results: the cluster did not come up, say), which is ``crashed`` plus whatever kinds were counted: its
    ``*/stats`` checkers fail only because no op ran, and listing them hid why."""
    out: set[str] = set()
    crashed = bool(doc.get("crashed"))
    checkers = doc.get("checkers")
    for name, entry in (checkers.items() if isinstance(checkers, Mapping) else ()):
        if isinstance(entry, Mapping) and entry.get("valid") is False:
            counted = [k for k, v in (entry.get("anomaly_counts") or {}).items() if v]
            out.update(counted or ([] if crashed else [str(name)]))
    return sorted(out | ({"crashed"} if crashed else set()))


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


# ---------------------------------------------------------------------------------------------------------
# Searching with the whole-cluster simulator of a revision (``splitbrain sim``)

SIM_SEEDS_PER_SEARCH = 1000
"""Search seed ``s`` plays simulator seeds ``s*1000 .. s*1000+999`` in order (one ``splitbrain sim`` sweep), as a
real search's attempt ``i`` uses seed ``s*1000 + i``."""
SIM_WALL_FACTOR = 30.0
"""A sweep is stopped as an error after ``SIM_WALL_FACTOR`` x its CPU budget of wall time (plus a minute): on a
loaded machine the simulator gets a fraction of a core, but a sweep that gets almost none is a stuck one."""
NOT_IN_REVISION = "simulator not in this revision"
SIM_EXIT_CRASHED = 255
"""``splitbrain``'s exit code when a command crashed (harness/cli.py): in a sweep, the simulated cluster raised."""


def proc_cpu_s(stat: str, ticks_per_s: float) -> float:
    """CPU seconds (user + system) of a process from the text of its ``/proc/<pid>/stat`` (pure).  The fields
    after the command name, which is in parentheses and may hold spaces, are read from the last ``)``."""
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_s  # utime and stime: fields 14 and 15 of proc(5)


@dataclass
class SimTally:
    """The accounting of one simulator search, fed one finished seed at a time (pure; the shell is
    :func:`sim_search`).

    ``budget_cpu_s`` is CPU seconds of the simulator's process (interpreter start, simulation and checkers of every
    seed), read when a seed's line arrives.  A seed counts only if it finished within the budget: one that ended
    beyond it is not seen, found or not (as a real search counts only attempts within its budget).  The search stops
    at the first counted seed that shows an anomaly (:func:`shows`, with ``ignore``), when the budget is spent, or
    when the simulator crashed (an exception out of the simulated cluster: reported as found with kind ``crash``,
    since the seed replays it, but named as such).  Simulated seconds are the simulator's own clock, start to drain.
    """

    budget_cpu_s: float
    ignore: frozenset[str] = frozenset()
    seeds_run: int = 0
    simulated_s: float = 0.0
    cpu_s: float = 0.0
    ignored_seeds: list[int] = field(default_factory=list)
    unknown_seeds: list[int] = field(default_factory=list)
    found: dict[str, Any] | None = None
    stop: str | None = None

    def __post_init__(self) -> None:
        if not self.budget_cpu_s > 0:
            raise ValueError(f"SimTally.budget_cpu_s must be > 0, got {self.budget_cpu_s}")

    def observe(self, *, sim_seed: int, cpu_s: float, simulated_s: float, doc: Mapping[str, Any],
                detect_in_seed_s: float | None = None) -> bool:
        """Account one finished seed (``doc``: its results, at least ``valid``; ``detect_in_seed_s``: simulated
        seconds into the seed at which its anomaly could first be seen).  True when the search is over."""
        if self.stop is not None:
            raise RuntimeError("SimTally.observe after the search stopped")
        if cpu_s > self.budget_cpu_s:
            self.stop = "budget"
            return True
        self.seeds_run += 1
        self.cpu_s = cpu_s
        before_s = self.simulated_s
        self.simulated_s = round(before_s + simulated_s, 3)
        if doc.get("valid") not in (True, False):
            self.unknown_seeds.append(sim_seed)
        elif shows(doc, frozenset(), ignore=self.ignore):
            at = simulated_s if detect_in_seed_s is None else detect_in_seed_s
            self.found = {"sim_seed": sim_seed, "detect_cpu_s": round(cpu_s, 3), "detect_sim_s": round(at, 3),
                          "simulated_s_to_detect": round(before_s + at, 3), "anomalies": anomaly_kinds(doc)}
            self.stop = "found"
            return True
        elif doc.get("valid") is False:
            self.ignored_seeds.append(sim_seed)
        if cpu_s >= self.budget_cpu_s:
            self.stop = "budget"
            return True
        return False

    def crashed(self, *, sim_seed: int, cpu_s: float, error: str) -> None:
        """The simulator raised while playing ``sim_seed`` (after the seeds already observed)."""
        if cpu_s > self.budget_cpu_s:
            self.stop = "budget"
            return
        self.cpu_s = cpu_s
        self.found = {"sim_seed": sim_seed, "detect_cpu_s": round(cpu_s, 3), "detect_sim_s": None,
                      "simulated_s_to_detect": None, "anomalies": ["crash"], "crash": error}
        self.stop = "crash"

    def result(self, seed: int, *, wall_s: float, error: str | None = None) -> dict[str, Any]:
        """The search's record, in the shape of :func:`search`'s (``detect_s`` is CPU seconds here; the budget's
        unit is named by ``budget_unit``)."""
        hit = self.found if error is None else None
        out: dict[str, Any] = {
            "seed": seed, "found": hit is not None, "detect_s": hit["detect_cpu_s"] if hit else None,
            "detect_wall_s": round(wall_s, 1), "anomalies": list(hit["anomalies"]) if hit else [],
            "budget_unit": "cpu_s", "status": "error" if error is not None else "searched",
            "stop": "error" if error is not None else (self.stop or "seeds exhausted"),
            "seeds_run": self.seeds_run, "simulated_s": self.simulated_s, "cpu_s": round(self.cpu_s, 3),
            "ignored_seeds": list(self.ignored_seeds), "unknown_seeds": list(self.unknown_seeds),
        }
        if hit:
            out.update({k: v for k, v in hit.items() if k not in ("anomalies", "detect_cpu_s")})
        if error is not None:
            out["error"] = error
        return out


def _sim_seed_doc(out: Path, line: Mapping[str, Any]) -> dict[str, Any]:
    """The results of a seed the sweep wrote (an invalid or unknown one), with ``run_dir``; its JSON line's
    fields when the directory cannot be read (then no checker is known to fail: :func:`shows` counts it)."""
    run_dir = Path(str(line.get("dir") or out / f"seed-{line.get('seed')}"))
    try:
        doc = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"valid": line.get("valid"), "anomaly_counts": line.get("anomaly_counts") or {}}
    doc["run_dir"] = str(run_dir)
    return doc


def _cpu_of(pid: int) -> float | None:
    try:
        return proc_cpu_s(Path(f"/proc/{pid}/stat").read_text(), float(os.sysconf("SC_CLK_TCK")))
    except (OSError, ValueError, IndexError):
        return None


def sim_search(label: str, seed: int, *, python: Path, sim_args: Sequence[str], budget_cpu_s: float,
               results: Path, ignore: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Simulator seeds ``seed*1000 ..`` of one revision until one shows an anomaly (not only of the ``ignore``
    kinds) or the simulator's CPU seconds reach ``budget_cpu_s`` (:class:`SimTally`).

    One ``python -I -u -m harness.cli sim --seed S --seeds 1000 SIM_ARGS --json --out DIR`` sweep: ``python`` is the
    revision's interpreter (:func:`harness.revisions.ensure_build`), so the simulated cluster, the simulator and its
    checkers are the revision's own code.  Its CPU time is read from ``/proc`` as each seed's line arrives; the
    sweep is killed (by its pid) once the budget is spent or a seed is found.  Invalid seeds are written under
    ``results/sim-LABEL-SEED/seed-N`` (history, node events, schedule, results.json) with a replay command."""
    out = results / f"sim-{label}-{seed}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    first = seed * SIM_SEEDS_PER_SEARCH
    # -u: each seed's line arrives when the seed ends (a pipe would otherwise hold them in the child's buffer)
    cmd = [str(python), "-I", "-u", "-m", "harness.cli", "sim", "--seed", str(first), "--seeds",
           str(SIM_SEEDS_PER_SEARCH), *sim_args, "--json", "--out", str(out)]
    tally = SimTally(budget_cpu_s, ignore)
    wall_limit_s = 60.0 + SIM_WALL_FACTOR * budget_cpu_s
    started = time.monotonic()
    error: str | None = None
    lines_seen = 0
    with (out / "stderr.txt").open("wb") as err:
        proc = subprocess.Popen(cmd, cwd=out, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf = b""
        eof = False
        try:
            while tally.stop is None and not eof:
                if not sel.select(timeout=0.5):
                    cpu = _cpu_of(proc.pid)
                    if cpu is not None and cpu > budget_cpu_s:
                        tally.stop = "budget"  # the seed in play ends beyond the budget: it would not count
                    elif time.monotonic() - started > wall_limit_s:
                        error = f"no end within {wall_limit_s:.0f} s of wall time"
                        break
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                eof = not chunk
                buf += chunk
                while b"\n" in buf and tally.stop is None:
                    raw, buf = buf.split(b"\n", 1)
                    cpu = _cpu_of(proc.pid)
                    try:
                        line = json.loads(raw)
                    except ValueError:
                        continue  # not a seed's line
                    if not isinstance(line, dict) or "seed" not in line:
                        continue
                    lines_seen += 1
                    doc: Mapping[str, Any] = line
                    at = None
                    if line.get("valid") is not True:
                        doc = _sim_seed_doc(out, line)
                        length = float(line.get("simulated_s") or 0.0)
                        timed = {**doc, "main_phase_start_ns": 0, "main_phase_end_ns": int(length * 1e9)}
                        at = detection_s(timed, history_ops(doc), run_s=length, ignore=ignore)
                    if tally.observe(sim_seed=int(line["seed"]), cpu_s=cpu if cpu is not None else 0.0,
                                     simulated_s=float(line.get("simulated_s") or 0.0), doc=doc,
                                     detect_in_seed_s=at):
                        break
            if tally.stop is None and error is None:  # the sweep ended by itself: all seeds done, or it failed
                cpu = _cpu_of(proc.pid)  # a zombie's stat still holds its times
                code = proc.wait(timeout=60)
                stderr = (out / "stderr.txt").read_text(encoding="utf-8", errors="replace").strip()
                last = (stderr.splitlines() or [f"exit {code}"])[-1][:300]
                if code == SIM_EXIT_CRASHED:
                    tally.crashed(sim_seed=first + lines_seen, cpu_s=cpu or 0.0, error=last)
                elif lines_seen == 0 and "invalid choice: 'sim'" in stderr:
                    error = NOT_IN_REVISION
                elif code not in (0, 1, 2) or lines_seen == 0:
                    error = f"the simulator failed (exit {code}): {last}"
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=60)
            sel.close()
            proc.stdout.close()
    doc_out = tally.result(seed, wall_s=time.monotonic() - started, error=error)
    if doc_out.get("sim_seed") is not None and doc_out["found"]:
        run_dir = out / f"seed-{doc_out['sim_seed']}"
        doc_out["run_dir"] = str(run_dir) if run_dir.is_dir() else None
        doc_out["replay"] = f"splitbrain sim --seed {doc_out['sim_seed']} {' '.join(sim_args)}"
    if error == NOT_IN_REVISION:
        doc_out["status"] = "not-in-revision"
    print(f"#   {label} simulation seed={seed} found={doc_out['found']} seeds={tally.seeds_run} "
          f"simulated={tally.simulated_s:.0f}s cpu={tally.cpu_s:.1f}s stop={doc_out['stop']}"
          + (f" error={error}" if error else ""), file=sys.stderr, flush=True)
    return doc_out


SIM_PROBE = r"""
import json, runpy, sys
target, lo, hi, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
hit = set()

def _lines(frame, event, arg):
    if event == "line" and lo <= frame.f_lineno <= hi:
        hit.add(frame.f_lineno)
    return _lines

def _calls(frame, event, arg):
    return _lines if frame.f_code.co_filename.endswith(target) else None

sys.argv = ["harness.cli", *sys.argv[5:]]
code = None
sys.settrace(_calls)
try:
    runpy.run_module("harness.cli", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
finally:
    sys.settrace(None)
loaded = sorted(name for name, m in list(sys.modules.items())
                if str(getattr(m, "__file__", None) or "").endswith(target))
with open(out, "w") as fh:
    json.dump({"exit": code, "loaded": loaded, "hit_lines": sorted(hit)}, fh)
"""
"""Run by the revision's interpreter: ``splitbrain sim`` with a line tracer on one file, which records which lines
of a range ran and whether the file was imported at all.  ``sys.settrace`` makes the run a few times slower, so
the probe runs outside a search's budget; the seeds replay exactly, so it sees what the search's seeds did."""


def sim_probe(label: str, *, python: Path, sim_args: Sequence[str], first_seed: int, seeds: int, file: str,
              lines: tuple[int, int], results: Path, timeout_s: float = 1800.0) -> dict[str, Any]:
    """Whether lines ``lines`` (first, last; 1-based, inclusive) of ``file`` (repository-relative) ran when the
    revision's simulator played seeds ``first_seed ..`` (``seeds`` of them) with ``sim_args``: ``loaded`` (the
    module was imported), ``hit_lines`` (those of the range that ran), ``seeds`` and the probe's own CPU seconds.
    An ``error`` key instead when the probe did not finish."""
    out = results / f"probe-{label}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    report = out / "probe.json"
    cmd = [str(python), "-I", "-c", SIM_PROBE, "/" + file.lstrip("/"), str(lines[0]), str(lines[1]), str(report),
           "sim", "--seed", str(first_seed), "--seeds", str(seeds), *sim_args, "--json", "--out", str(out / "runs")]
    before = os.times()
    try:
        subprocess.run(cmd, cwd=out, capture_output=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
        got = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return {"error": f"the probe did not finish: {exc}"[:300], "file": file, "lines": list(lines)}
    after = os.times()
    return {"file": file, "lines": list(lines), "seeds": seeds, "first_seed": first_seed,
            "loaded": bool(got.get("loaded")), "hit_lines": [int(x) for x in got.get("hit_lines") or []],
            "exit": got.get("exit"),
            "cpu_s": round(after.children_user + after.children_system - before.children_user
                           - before.children_system, 2)}
