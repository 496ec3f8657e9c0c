"""``splitbrain test-all SPEC...``: run a matrix of specs, one summary table, one JUnit file.

Every spec is loaded and validated first (with the same override flags as ``splitbrain test``); one bad spec
stops everything before any cluster starts (exit 2, listing each bad spec).  Then each spec runs
``--test-count`` times in order.  The table shows spec, seed, verdict, anomalies, time and results directory
per run; the exit code is the worst verdict (255 crashed > 1 invalid > 2 unknown > 0 valid).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from harness.commands._backend import BackendUnavailable
from harness.commands._parts import Prepared, add_spec_arguments, overrides_from_args, prepare
from harness.commands._runs import RunSummary, junit_for_runs, read_summary, summary_table
from harness.commands.test import add_output_arguments, execute
from harness.runner import worst_exit_code
from harness.spec import SpecError
from harness.store import EXIT_UNKNOWN

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", nargs="+", metavar="SPEC", help="YAML test specs")
    add_spec_arguments(p)
    add_output_arguments(p)


def _load_all(paths: list[str], overrides: dict[str, Any]) -> tuple[list[Prepared], list[str]]:
    prepared, errors = [], []
    for path in paths:
        try:
            prepared.append(prepare(path, overrides))
        except SpecError as exc:
            errors.append(str(exc))
    return prepared, errors


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    prepared, errors = _load_all(args.specs, overrides_from_args(args))
    if errors:
        for e in errors:
            print(f"splitbrain test-all: invalid spec: {e}", file=sys.stderr)
        return EXIT_UNKNOWN
    rows: list[tuple[str, RunSummary]] = []
    junit_runs: list[tuple[RunSummary, Any]] = []
    codes: list[int] = []
    for p in prepared:
        try:
            code, outcomes = asyncio.run(execute(p, results_root=args.results, quiet=args.quiet,
                                                 nodes_file=getattr(args, "nodes_file", None)))
        except BackendUnavailable as exc:
            print(f"splitbrain test-all: {p.spec.source}: {exc}", file=sys.stderr)
            s = RunSummary(p.spec.name, "-", "unknown", seed=p.spec.seed, rel_path=f"backend unavailable: {exc}"[:80])
            rows.append((p.spec.source, s))
            junit_runs.append((s, None))
            codes.append(EXIT_UNKNOWN)
            continue
        except KeyboardInterrupt:
            print("splitbrain test-all: interrupted", file=sys.stderr)
            codes.append(130)
            break
        codes.append(code)
        for o in outcomes:
            s = read_summary(Path(o.run_dir.path))
            rows.append((p.spec.source, s))
            junit_runs.append((s, _doc(Path(o.run_dir.path))))
        if any(o.interrupted for o in outcomes):
            break
    console = Console()
    if not console.is_terminal:
        console = Console(width=220)  # CI logs: never wrap the paths
    console.print(summary_table(rows, title="splitbrain test-all"))
    by = {v: sum(1 for _, s in rows if s.verdict == v) for v in ("valid", "invalid", "unknown", "crashed")}
    print(f"{len(rows)} runs: {by['valid']} valid, {by['invalid']} invalid, {by['unknown']} unknown, "
          f"{by['crashed']} crashed")
    if args.junit:
        Path(args.junit).parent.mkdir(parents=True, exist_ok=True)
        Path(args.junit).write_text(junit_for_runs(junit_runs), encoding="utf-8")
    return 130 if 130 in codes else worst_exit_code(codes)


def _doc(run_dir: Path) -> Any:
    try:
        return json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
