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

Fan-out (:mod:`harness.fleet`): ``--jobs N`` runs up to N runs at once on this machine, ``--master
spark://HOST:7077`` (or ``local[N]``) runs each as a Spark task on the fleet's hosts.  Either way every
spec/cell x seed is its own ``splitbrain test`` process (its resolved spec, ``test_count`` 1, written to a
temporary file; its output in ``<results>/.fleet/<fleet id>/<n>-<attempt>.log``).  Runs never share anything:
each has its own backend (namespaces on their own subnet, or containers with their own labels), its own owner
and supervisor, its own run directory.  The table and JUnit file are the same as with ``--jobs 1`` (rows in spec
order); a child that fails before making a run directory is a row with its exit code and the last line it
printed; a run whose host was lost is retried with the same seed and only the finished attempt is a row.
``--warehouse DIR`` ingests each run as it finishes.  Ctrl-C stops the runs gracefully (each writes its run
directory); the command waits for them and exits 130.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import eventloop
from harness.commands._backend import BackendUnavailable
from harness.commands._exit import refuse
from harness.commands._parts import Prepared, add_spec_arguments, check_results_root, overrides_from_args, prepare
from harness.commands._runs import print_table
from harness.commands.test import add_output_arguments, execute
from harness.fleet import LocalPool, MasterError, RunRequest, RunResult, master_syntax_problem, open_pool
from harness.junit import write_junit_file
from harness.runner import worst_exit_code
from harness.runs import RunSummary, read_run
from harness.spec import SpecError
from harness.store import EXIT_UNKNOWN

__all__ = ["configure", "one_per_seed", "requests_of", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", nargs="+", metavar="SPEC", help="YAML test specs")
    p.add_argument("--matrix", action="store_true",
                   help="run each spec as cells: every workload alone x every nemesis package alone")
    p.add_argument("--dry-run", action="store_true", help="list the runs (and skipped cells) without starting any")
    p.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help="run up to N specs/cells at once, each in its own process (default 1)")
    p.add_argument("--master", metavar="URL",
                   help="run each spec/cell x seed as a Spark task: spark://HOST:7077 (a standalone master whose "
                        "hosts all mount --results at the same path) or local[N]")
    p.add_argument("--spark-conf", type=_spark_conf, action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark option for --master (repeatable), e.g. spark.task.cpus=2: cores each run takes")
    p.add_argument("--warehouse", metavar="DIR",
                   help="ingest each run into this Parquet warehouse as it finishes (see splitbrain spark)")
    add_spec_arguments(p)
    add_output_arguments(p)


def _jobs(text: str) -> int:
    """argparse type of ``--jobs``: a whole number of parallel runs, 1..64."""
    n = int(text) if text.strip().isdecimal() else 0
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of parallel runs in 1..64")
    return n


def _spark_conf(text: str) -> tuple[str, str]:
    """argparse type of ``--spark-conf``: ``spark.KEY=VALUE``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip().startswith("spark.") or not value.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE with a key starting 'spark.'")
    return key.strip(), value.strip()


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
    fan_out = args.jobs > 1 or args.master is not None or args.warehouse is not None
    problem = _fan_out_problem(args, prepared, fan_out=fan_out)
    if problem is None and not args.dry_run:
        problem = check_results_root("--results", args.results)
        if problem is None and args.warehouse is not None:
            problem = _warehouse_problem(args.warehouse)
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
    if fan_out:
        try:
            rows, codes = _run_on_pool(prepared, args)
        except MasterError as exc:
            return refuse("test-all", exc)
    else:
        rows, codes = _run_in_order(prepared, args)
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
            code, outcomes = eventloop.run(execute(p, results_root=args.results, quiet=args.quiet,
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


def _fan_out_problem(args: argparse.Namespace, prepared: list[tuple[str, Prepared]], *, fan_out: bool
                     ) -> str | None:
    """Why the fan-out flags cannot be used as given (checked before anything starts), or None."""
    if args.master is not None and args.jobs > 1:
        return "--jobs and --master are alternatives: --jobs N runs on this machine, --master on a Spark fleet"
    if args.spark_conf and args.master is None:
        return "--spark-conf needs --master"
    if args.master is not None:
        problem = master_syntax_problem(args.master)
        if problem:
            return problem
    kept = [label for label, p in prepared if p.spec.leave_running and fan_out]
    if kept:
        return f"--leave-running with fan-out ({kept[0]}): a pool's runs never leave a cluster up; run it alone"
    return None


def _warehouse_problem(warehouse: str) -> str | None:
    """Why ``--warehouse`` cannot be written (it is created if missing), or None."""
    try:
        Path(warehouse).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"--warehouse {warehouse}: cannot create the warehouse directory ({exc.strerror}); pass a writable one"
    if not os.access(warehouse, os.W_OK | os.X_OK):
        return f"--warehouse {warehouse}: the warehouse directory is not writable; pass a writable one"
    return None


def one_per_seed(prepared: list[tuple[str, Prepared]]) -> list[tuple[str, Prepared]]:
    """Each spec/cell once per seed (``seed``, ``seed+1``, ... ``test_count`` of them), ``test_count`` 1 each, in
    spec order: the unit a pool runs (pure)."""
    return [(label, replace(p, spec=replace(p.spec, seed=p.spec.seed + i, test_count=1)))
            for label, p in prepared for i in range(p.spec.test_count)]


def requests_of(runs: list[tuple[str, Prepared]], args: argparse.Namespace) -> list[RunRequest]:
    """The pool's request for each of ``runs`` (see :func:`one_per_seed`): resolved spec, absolute results root,
    the child flags that are not in the spec."""
    from harness.spec import resolved_yaml

    root = str(Path(args.results).resolve())
    extra: list[str] = []
    if getattr(args, "nodes_file", None):
        extra += ["--nodes-file", str(Path(args.nodes_file).resolve())]
    if getattr(args, "allow_weak_quorum", False):
        extra.append("--allow-weak-quorum")
    return [RunRequest(label, resolved_yaml(p.spec), root, tuple(extra)) for label, p in runs]


def _run_on_pool(prepared: list[tuple[str, Prepared]], args: argparse.Namespace) -> tuple[list[_Row], list[int]]:
    """Every request on the pool the flags name; rows in request order (a child without a run directory: its exit
    code and last line).  Ctrl-C cancels the pool (runs stop gracefully) and the rows of what ran are kept.

    Raises:
        MasterError: ``--master`` unreachable or without executors (nothing has started).
    """
    runs = one_per_seed(prepared)
    requests = requests_of(runs, args)
    pool = open_pool(master=args.master, jobs=args.jobs, warehouse=args.warehouse,
                     progress=None if args.quiet else sys.stderr, conf=dict(args.spark_conf))
    results: dict[int, RunResult] = {}
    interrupted = False
    with pool:
        print(f"[splitbrain] fleet {pool.fleet_id}: {len(requests)} runs on "
              f"{args.master or f'this machine, {args.jobs} at once'}", flush=True)
        for r in requests:
            pool.submit(r)
        while True:
            try:
                for result in pool.completed():
                    results[result.index] = result
                break
            except KeyboardInterrupt:
                interrupted = True
                print("splitbrain test-all: interrupted; stopping the runs (they write their run directories)",
                      file=sys.stderr, flush=True)
                if isinstance(pool, LocalPool):
                    pool.cancel(signal_children=False)
                else:
                    pool.cancel()
    rows: list[_Row] = []
    codes: list[int] = [130] if interrupted else []
    for index in sorted(results):
        res = results[index]
        codes.append(res.exit_code)
        if not res.run_dirs:
            p = runs[index][1]
            verdict = "crashed" if res.exit_code == 255 else "unknown"
            rows.append((res.label, _no_run(p, verdict, f"exit {res.exit_code}: {res.last_line}")))
        rows += [(res.label, read_run(Path(d))) for d in res.run_dirs]
    return rows, codes
