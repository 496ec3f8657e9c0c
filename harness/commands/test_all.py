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

``--jobs N`` runs up to N specs or cells at once, each as its own ``splitbrain test`` process (its resolved
spec written to a temporary file, its output in ``<results>/.test-all/<n>.log``).  Runs never share
anything: each has its own backend (namespaces on their own subnet, or containers with their own labels), its
own owner and supervisor, its own run directory.  The table and JUnit file are the same as with ``--jobs 1``
(rows in spec order); a child that fails before making a run directory is a row with its exit code and the
last line it printed.  Ctrl-C reaches every child (they stop gracefully, each writing its run directory); the
command waits for them and exits 130.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from harness.commands._backend import BackendUnavailable
from harness.commands._exit import refuse
from harness.commands._parts import Prepared, add_spec_arguments, check_results_root, overrides_from_args, prepare
from harness.commands._runs import print_table
from harness.commands.test import add_output_arguments, execute
from harness.junit import write_junit_file
from harness.runner import worst_exit_code
from harness.runs import RunSummary, read_run
from harness.spec import SpecError
from harness.store import EXIT_UNKNOWN

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", nargs="+", metavar="SPEC", help="YAML test specs")
    p.add_argument("--matrix", action="store_true",
                   help="run each spec as cells: every workload alone x every nemesis package alone")
    p.add_argument("--dry-run", action="store_true", help="list the runs (and skipped cells) without starting any")
    p.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help="run up to N specs/cells at once, each in its own process (default 1)")
    add_spec_arguments(p)
    add_output_arguments(p)


def _jobs(text: str) -> int:
    """argparse type of ``--jobs``: a whole number of parallel runs, 1..64."""
    n = int(text) if text.strip().isdecimal() else 0
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of parallel runs in 1..64")
    return n


# The command a --jobs child runs (tests point it at an interpreter that registers test-only workloads).
CHILD_COMMAND: list[str] = [sys.executable, "-m", "harness.cli"]


def matrix_cells(spec: Any) -> list[tuple[str, dict[str, Any]]]:
    """(label, overrides) per cell of ``spec``: its workloads x its expanded nemesis packages, and x its
    ``nemesis.modes`` when it lists any (so a nightly mixes guided and random cells) (pure)."""
    from nemesis.packages import expand

    workloads = [w.name for w in spec.workloads]
    packages = expand(list(spec.nemesis.packages)) or ["none"]
    cells = [(f"{w} x {p}", {"workload": w, "nemesis": p}) for w in workloads for p in packages]
    modes = list(getattr(spec.nemesis, "modes", ()) or ())
    if not modes:
        return cells
    return [(f"{label} x {m}", {**cell, "nemesis_mode": m}) for label, cell in cells for m in modes]


def _load_all(paths: list[str], overrides: dict[str, Any], *, matrix: bool = False, allow_weak_quorum: bool = False
              ) -> tuple[list[tuple[str, Prepared]], list[str], list[str]]:
    """(label, prepared) per run, errors (bad specs), skipped matrix cells (with reasons)."""
    prepared: list[tuple[str, Prepared]] = []
    errors: list[str] = []
    skipped: list[str] = []
    for path in paths:
        try:
            base = prepare(path, overrides, allow_weak_quorum=allow_weak_quorum)
        except SpecError as exc:
            errors.append(str(exc))
            continue
        if not matrix:
            prepared.append((path, base))
            continue
        for label, cell in matrix_cells(base.spec):
            try:
                one = prepare(path, {**overrides, **cell}, allow_weak_quorum=allow_weak_quorum)
                prepared.append((f"{path}: {label}", one))
            except SpecError as exc:
                skipped.append(f"{path}: {label}: {exc}")
    return prepared, errors, skipped


def run(args: argparse.Namespace) -> int:
    prepared, errors, skipped = _load_all(args.specs, overrides_from_args(args), matrix=args.matrix,
                                          allow_weak_quorum=args.allow_weak_quorum)
    if errors:
        for e in errors:
            refuse("test-all", f"invalid spec: {e}")
        return EXIT_UNKNOWN
    problem = None if args.dry_run else check_results_root("--results", args.results)
    if problem:
        return refuse("test-all", problem)
    for cell in skipped:
        print(f"splitbrain test-all: skipped cell {cell}", file=sys.stderr)
    if args.matrix:
        print(f"splitbrain test-all: {len(prepared)} cells to run, {len(skipped)} skipped")
    if args.dry_run:
        for label, p in prepared:
            print(f"  {label}  (seed {p.spec.seed}, {p.spec.test_count} run(s) of {p.spec.time_limit_s:g} s, "
                  f"backend {p.spec.backend})")
        return 0
    rows, codes = _run_parallel_rows(prepared, args) if args.jobs > 1 else _run_in_order(prepared, args)
    print_table([(label, s) for label, (s, _) in rows], title="splitbrain test-all")
    by = {v: sum(1 for _, (s, _) in rows if s.verdict == v) for v in ("valid", "invalid", "unknown", "crashed")}
    print(f"{len(rows)} runs: {by['valid']} valid, {by['invalid']} invalid, {by['unknown']} unknown, "
          f"{by['crashed']} crashed")
    if args.junit:
        write_junit_file(args.junit, [run for _, run in rows])
    return 130 if 130 in codes else worst_exit_code(codes)


# A row of the table: the spec's label, and the run's summary with its results.json (None: it has none).
_Row = tuple[str, tuple[RunSummary, dict[str, Any] | None]]


def _no_run(p: Prepared, verdict: str, why: str) -> tuple[RunSummary, None]:
    """The row of a spec that made no run directory (its results column says why)."""
    return RunSummary(p.spec.name, "-", verdict, seed=p.spec.seed, rel_path=why[:80]), None


def _run_in_order(prepared: list[tuple[str, Prepared]], args: argparse.Namespace) -> tuple[list[_Row], list[int]]:
    """Run the specs one after another in this process; stops at an interrupted run or Ctrl-C (code 130)."""
    rows: list[_Row] = []
    codes: list[int] = []
    for label, p in prepared:
        try:
            code, outcomes = asyncio.run(execute(p, results_root=args.results, quiet=args.quiet,
                                                 nodes_file=getattr(args, "nodes_file", None)))
        except BackendUnavailable as exc:
            print(f"splitbrain test-all: {label}: {exc}", file=sys.stderr)
            rows.append((label, _no_run(p, "unknown", f"backend unavailable: {exc}")))
            codes.append(EXIT_UNKNOWN)
            continue
        except KeyboardInterrupt:
            print("splitbrain test-all: interrupted", file=sys.stderr)
            codes.append(130)
            break
        codes.append(code)
        rows += [(label, read_run(Path(o.run_dir.path))) for o in outcomes]
        if any(o.interrupted for o in outcomes):
            break
    return rows, codes


def _run_parallel_rows(prepared: list[tuple[str, Prepared]], args: argparse.Namespace
                       ) -> tuple[list[_Row], list[int]]:
    """:func:`_run_parallel`, as rows in spec order (a child without a run directory: its exit code and last line)."""
    rows: list[_Row] = []
    codes: list[int] = []
    for (label, p), (code, run_dirs, last_line) in zip(prepared, _run_parallel(prepared, args), strict=True):
        codes.append(code)
        if not run_dirs:
            rows.append((label, _no_run(p, "crashed" if code == 255 else "unknown", f"exit {code}: {last_line}")))
        rows += [(label, read_run(d)) for d in run_dirs]
    return rows, codes


def _run_parallel(prepared: list[tuple[str, Prepared]], args: argparse.Namespace) -> list[tuple[int, list[Path], str]]:
    """Run every prepared spec as a ``splitbrain test`` child, at most ``args.jobs`` at once.

    Returns, per spec in order: (exit code, its run directories, the last line it printed).
    """
    import subprocess
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from harness.spec import resolved_yaml

    logs = Path(args.results) / ".test-all"
    logs.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="test-all-", dir=logs))

    def one(i: int) -> tuple[int, list[Path], str]:
        label, p = prepared[i]
        spec_file, dirs_file, log_file = work / f"{i}.yaml", work / f"{i}.runs", logs / f"{work.name}-{i}.log"
        spec_file.write_text(resolved_yaml(p.spec), encoding="utf-8")
        argv = [*CHILD_COMMAND, "test", str(spec_file), "--results", args.results, "--quiet",
                "--run-dirs-file", str(dirs_file)]
        if getattr(args, "nodes_file", None):
            argv += ["--nodes-file", args.nodes_file]
        if getattr(args, "allow_weak_quorum", False):
            argv.append("--allow-weak-quorum")
        print(f"[splitbrain] start {i + 1}/{len(prepared)}: {label} (seed {p.spec.seed}; log {log_file})",
              flush=True)
        with open(log_file, "wb") as log:
            code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        try:
            run_dirs = [Path(line) for line in dirs_file.read_text(encoding="utf-8").splitlines() if line]
        except OSError:
            run_dirs = []
        lines = [ln for ln in log_file.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        code = 255 if code < 0 else code  # killed by a signal: the harness did not finish
        print(f"[splitbrain] done {i + 1}/{len(prepared)}: {label}: exit {code}", flush=True)
        return code, run_dirs, lines[-1] if lines else ""

    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            return list(pool.map(one, range(len(prepared))))
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)

