"""``splitbrain test-all SPEC...``: run a matrix of specs, one summary table, one JUnit file.

Every spec is loaded and validated first (with the same override flags as ``splitbrain test``); one bad spec
stops everything before any cluster starts (exit 2, listing each bad spec).  Then each spec runs
``--test-count`` times in order.  The table shows spec, seed, verdict, anomalies, time and results directory
per run; the exit code is the worst verdict (255 crashed > 1 invalid > 2 unknown > 0 valid).

``--matrix`` turns each spec into cells: every workload of the spec alone x every nemesis package of
the spec alone (aliases such as ``all`` expanded), e.g. the nightly suite::

    splitbrain test-all examples/nightly.yaml --matrix --junit results/nightly.xml

A cell the spec's own validation rejects (a workload that needs a nemesis package the cell lacks,
say) is listed as skipped with the reason, not run; a spec whose base form is invalid is an error.
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
    p.add_argument("--matrix", action="store_true",
                   help="run each spec as cells: every workload alone x every nemesis package alone")
    p.add_argument("--dry-run", action="store_true", help="list the runs (and skipped cells) without starting any")
    add_spec_arguments(p)
    add_output_arguments(p)


def matrix_cells(spec: Any) -> list[tuple[str, dict[str, Any]]]:
    """(label, overrides) per cell of ``spec``: its workloads x its expanded nemesis packages (pure)."""
    from nemesis.packages import expand

    workloads = [w.name for w in spec.workloads]
    packages = expand(list(spec.nemesis.packages)) or ["none"]
    return [(f"{w} x {p}", {"workload": w, "nemesis": p}) for w in workloads for p in packages]


def _load_all(paths: list[str], overrides: dict[str, Any], *, matrix: bool = False
              ) -> tuple[list[tuple[str, Prepared]], list[str], list[str]]:
    """(label, prepared) per run, errors (bad specs), skipped matrix cells (with reasons)."""
    prepared: list[tuple[str, Prepared]] = []
    errors: list[str] = []
    skipped: list[str] = []
    for path in paths:
        try:
            base = prepare(path, overrides)
        except SpecError as exc:
            errors.append(str(exc))
            continue
        if not matrix:
            prepared.append((path, base))
            continue
        for label, cell in matrix_cells(base.spec):
            try:
                prepared.append((f"{path}: {label}", prepare(path, {**overrides, **cell})))
            except SpecError as exc:
                skipped.append(f"{path}: {label}: {exc}")
    return prepared, errors, skipped


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    prepared, errors, skipped = _load_all(args.specs, overrides_from_args(args), matrix=args.matrix)
    if errors:
        for e in errors:
            print(f"splitbrain test-all: invalid spec: {e}", file=sys.stderr)
        return EXIT_UNKNOWN
    for cell in skipped:
        print(f"splitbrain test-all: skipped cell {cell}", file=sys.stderr)
    if args.matrix:
        print(f"splitbrain test-all: {len(prepared)} cells to run, {len(skipped)} skipped")
    if args.dry_run:
        for label, p in prepared:
            print(f"  {label}  (seed {p.spec.seed}, {p.spec.test_count} run(s) of {p.spec.time_limit_s:g} s, "
                  f"backend {p.spec.backend})")
        return 0
    rows: list[tuple[str, RunSummary]] = []
    junit_runs: list[tuple[RunSummary, Any]] = []
    codes: list[int] = []
    for label, p in prepared:
        try:
            code, outcomes = asyncio.run(execute(p, results_root=args.results, quiet=args.quiet,
                                                 nodes_file=getattr(args, "nodes_file", None)))
        except BackendUnavailable as exc:
            print(f"splitbrain test-all: {label}: {exc}", file=sys.stderr)
            s = RunSummary(p.spec.name, "-", "unknown", seed=p.spec.seed, rel_path=f"backend unavailable: {exc}"[:80])
            rows.append((label, s))
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
            rows.append((label, s))
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
