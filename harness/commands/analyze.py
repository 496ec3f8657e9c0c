"""``splitbrain analyze [RUN]``: re-check a stored run without touching any cluster.

Reads the run's ``test.yaml`` (the exact spec), rebuilds its workloads' checkers and its availability verdict
(:func:`harness.runner.availability_checker`), runs them on
``history.jsonl`` (a torn last line -- a crashed run -- is tolerated; an invoke without completion counts as
``info``), rewrites ``results.json`` and ``junit.xml`` (keeping the run facts: seed, counts, interrupted,
crashed, duration) and, unless ``--no-plots``, the plots and timeline.  RUN defaults to ``<results>/latest``;
it may be a run directory, a test directory (its latest run) or a path relative to ``--results``.

Exit code: the verdict's (0 valid, 1 invalid, 2 unknown); a run that was interrupted or crashed is never
reported valid.  A missing run, spec or history exits 2 with a message saying what was looked for.  A history
that is empty or cannot be read (a malformed line, not UTF-8, unreadable file) is no evidence either way: the
verdict is ``unknown`` with the reason (``results.json`` says it too), exit 2, never a traceback and never
``invalid``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import traceback
from pathlib import Path
from typing import Any

from checker.history import HistoryError, read_jsonl
from harness.commands._artifacts import write_artifacts
from harness.commands._exit import refuse
from harness.commands._parts import build_workloads, make_db, namespaced_checkers, system_options
from harness.junit import write_junit
from harness.runner import AVAILABILITY, CLUSTER_EVENTS, availability_checker, cluster_events_checker
from harness.runs import RunNotFound, resolve_run_dir
from harness.spec import SpecError, load_spec
from harness.store import RunDir, exit_code, merge_results, read_results, write_results

__all__ = ["UnreadableHistory", "analyze_run", "configure", "run"]


class UnreadableHistory(ValueError):
    """The run's history is empty or cannot be read; the message names the file (and line) and the reason."""

_FACTS = ("name", "seed", "interrupted", "crashed", "ended", "counts", "duration_s", "load", "replication_lag",
          "main_phase_start_ns", "main_phase_end_ns", "cluster_version", "git_revision", "provenance")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", nargs="?", default=None, help="run dir, test dir or path under --results (default: latest)")
    p.add_argument("--results", default="results", help="results root directory (default: results)")
    p.add_argument("--no-plots", action="store_true", help="do not rewrite latency.png, rate.png, timeline.html")


def _check_safe(checker: Any, test: dict[str, Any], history: list[Any]) -> Any:
    try:
        return checker.check(test, history, {})
    except Exception as exc:
        return {"valid": "unknown", "error": f"checker crashed: {exc!r}", "traceback": traceback.format_exc()}


def analyze_run(run_dir: str | Path, *, plots: bool = True) -> tuple[int, dict[str, Any]]:
    """Re-run the checkers of one stored run and rewrite its results (see the module docstring).

    Returns:
        (exit code, the new results.json document).
    Raises:
        SpecError: the run's test.yaml is missing or invalid, or names an unknown workload.
        FileNotFoundError: the run has no history.jsonl.
        UnreadableHistory: the history is empty or unreadable (``results.json`` was rewritten as unknown first).
    """
    path = Path(run_dir)
    spec = load_spec(path / "test.yaml")
    workloads = build_workloads(spec, make_db(spec, system_options(spec)))
    if not (path / "history.jsonl").exists():
        raise FileNotFoundError(f"{path}: no history.jsonl (the run never started its workers)")
    unreadable = ""
    try:
        history = read_jsonl(path / "history.jsonl")
    except (HistoryError, UnicodeDecodeError, OSError) as exc:
        history, unreadable = [], f"unreadable history: {exc} (repair or remove that line, then analyze again)"
    if not unreadable and not history:
        unreadable = (f"{path / 'history.jsonl'}: empty history (no operation was recorded), nothing to check "
                      "(rerun the test: `splitbrain repro RUN`)")
    old = read_results(path)
    known = old or {}
    facts = {k: known[k] for k in _FACTS if k in known}
    facts.setdefault("name", spec.name)
    facts.setdefault("seed", spec.seed)
    if old is None:
        facts["crashed"] = "no usable results.json: the run ended before checking"
    test = {"name": spec.name, "spec": spec, "nodes": list(spec.nodes.all), "run_dir": str(path), "remote": None,
            "seed": spec.seed, "concurrency": spec.concurrency}
    if unreadable:  # no evidence either way: the checkers would call an empty history invalid
        merged: dict[str, Any] = {"valid": "unknown", "error": unreadable}
    else:
        results = {name: _check_safe(c, test, history) for name, c in namespaced_checkers(workloads).items()}
        availability = availability_checker(spec)  # the run's availability verdict, as the runner made it
        if availability is not None:
            results[AVAILABILITY] = _check_safe(
                availability, {**test, "main_phase_start_ns": known.get("main_phase_start_ns")}, history)
        events = cluster_events_checker(path)  # the invariants judged on the run's observed events, as the runner did
        if events is not None:
            results[CLUSTER_EVENTS] = _check_safe(events, test, history)
        merged = merge_results(results)
    valid = merged.get("valid", "unknown")
    if (facts.get("interrupted") or facts.get("crashed")) and valid is True:
        valid = "unknown"
    merged["valid"] = valid
    if history:  # fault accounting is read from the history's nemesis completions (nemesis.accounting)
        from nemesis import accounting

        facts["faults"], facts["fault_warnings"] = accounting.account(op.to_dict() for op in history
                                                                      if not op.is_client)
    run = RunDir(path.parent.parent, path.parent.name, path)
    doc = write_results(run, merged, **facts, analyzed_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                        history_ops=len(history))
    write_junit(run, spec.name, merged, time_s=float(facts.get("duration_s") or 0.0),
                error=str(facts.get("crashed") or ""))
    if plots and not unreadable:
        write_artifacts(path, title=f"{spec.name} seed={spec.seed}")
    if unreadable:
        raise UnreadableHistory(unreadable)
    return exit_code(valid), doc


def run(args: argparse.Namespace) -> int:
    try:
        run_dir = resolve_run_dir(args.run, args.results)
        code, doc = analyze_run(run_dir, plots=not args.no_plots)
    except (RunNotFound, FileNotFoundError) as exc:
        return refuse("analyze", exc)
    except SpecError as exc:
        return refuse("analyze", f"cannot rebuild the run's checkers: {exc}")
    except UnreadableHistory as exc:
        return refuse("analyze", f"verdict unknown (also in results.json): {exc}")
    counts = doc.get("anomaly_counts") or {}
    an = ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no anomalies"
    print(f"{run_dir}: valid={doc.get('valid')} ({an}); {doc.get('history_ops')} ops re-checked; exit {code}")
    return code
