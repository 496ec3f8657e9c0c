"""``splitbrain gate --baseline REV --candidate REV SPEC...``: is the candidate build worse than the baseline?

Both builds of the system (two git revisions of this repository, built once each by :mod:`harness.revisions` with
the part of the build the specs' system adapter offers: :class:`harness.revisions.BuildsRevisions`) run
under this harness -- the same clients, nemeses, generators and checkers -- with the same specs and the same seeds,
cell by cell: every spec is expanded into its cells (each workload alone x each fault package alone x each nemesis
mode, as ``test-all --matrix`` does).  A cell is a *safety* cell when its cluster options are the safe settings
(no planted bug, no unclean election, acks only once every in-sync replica has the write:
:func:`harness.gate_outcome.cell_kind`), else a *rate* cell.  The decisions are
:mod:`spark_analysis.sequential`'s (the same code as ``splitbrain spark gate``): one definite anomaly of the
candidate in a safety cell fails the gate at once; rate cells run a sequential test on seed-paired runs; recovery,
unavailability and p99 latency under each fault kind are compared pair by pair.  Each pair (one seed, both builds)
goes to the run pool (:mod:`harness.fleet`: local processes, ``--jobs``, or a Spark fleet, ``--master``) as soon as
the allocator asks for it, and every finished run is observed at once, so the gate stops when the evidence is
enough -- or when ``--budget-runs`` is spent.

Output: a line per finished run, the decision table, a summary line, JUnit (``--junit``); for a failed safety
cell, the failing run's explanation and the command that replays it.  Exit 0 pass, 1 regression, 2 undecided
within the budget (or bad input: a bad flag, spec or revision is refused before anything starts, in one line; so
are specs of more than one system, and a system whose adapter offers no revision builds or whose DB runs no node
commands of this repository -- the message names the system and what it lacks).
Each run's spec carries the build's commit (``cluster.revision``) and its short sha as ``cluster.version``, so the
runs also land in the warehouse (``--warehouse``, ingested as they finish) grouped by build.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.commands._exit import refuse
from harness.commands._parts import Prepared, RunsNodeCommands, check_results_root, make_db, prepare
from harness.spec import SpecError, resolved_yaml
from harness.store import EXIT_UNKNOWN

if TYPE_CHECKING:
    from harness.revisions import RevisionSystem

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", nargs="+", metavar="SPEC", help="YAML test specs (each expanded into its cells)")
    p.add_argument("--baseline", required=True, metavar="REV", help="git revision of the last good build")
    p.add_argument("--candidate", required=True, metavar="REV", help="git revision of the build to judge")
    p.add_argument("--master", help="run on a Spark fleet (spark://HOST:7077, local[N]) instead of this machine")
    p.add_argument("--jobs", type=_whole("--jobs", 1, 64), default=2, metavar="N",
                   help="runs in flight at once (default 2: both builds of one seed)")
    p.add_argument("--budget-runs", type=_whole("--budget-runs", 2, 1_000_000), default=400, metavar="N",
                   help="most runs the gate may start, both builds and all cells together (default 400)")
    p.add_argument("--alpha", type=_fraction("--alpha", 0.0, 0.5), default=0.05,
                   help="false alarms across all cells held at this level (default 0.05)")
    p.add_argument("--power", type=_fraction("--power", 0.5, 1.0), default=0.95,
                   help="chance of catching the effects the gate is built for (default 0.95)")
    p.add_argument("--min-effect", type=_fraction("--min-effect", 0.0, 100.0, closed_low=True), default=0.25,
                   help="recovery/latency slowdowns up to this fraction are not regressions (default 0.25)")
    p.add_argument("--min-rate", type=_fraction("--min-rate", 0.0, 1.0), default=0.10,
                   help="smallest anomaly rate a safety cell must catch with --power (default 0.10)")
    p.add_argument("--perf-runs", type=_whole("--perf-runs", 0, 10_000), default=30, metavar="N",
                   help="seed pairs per cell compared for recovery, unavailability and p99 latency under each fault "
                        "kind (default 30; 0: no performance comparison)")
    p.add_argument("--first-seed", type=int, default=1, help="the first seed of every cell (default 1)")
    p.add_argument("--time-limit", type=float, help="main phase length of every run (spec: time_limit_s)")
    p.add_argument("--backend", help="local | docker | ssh, for every spec")
    p.add_argument("--nodes-file", help="ssh backend: YAML file of node -> host")
    p.add_argument("--results", default="results", help="results root of the runs (default: results)")
    p.add_argument("--warehouse", help="ingest every finished run into this Spark warehouse as it finishes")
    p.add_argument("--junit", help="write the gate's JUnit XML here (one testcase per cell)")
    p.add_argument("--dry-run", action="store_true", help="list the cells and their kinds, start nothing")


def _whole(flag: str, lo: int, hi: int) -> Any:
    def parse(text: str) -> int:
        n = int(text) if text.strip().lstrip("-").isdecimal() else lo - 1
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number in {lo}..{hi}")
        return n
    parse.__name__ = flag
    return parse


def _fraction(flag: str, lo: float, hi: float, *, closed_low: bool = False) -> Any:
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not ((lo <= x) if closed_low else (lo < x)) or not x < hi:
            raise argparse.ArgumentTypeError(f"{x} is outside {'[' if closed_low else '('}{lo}, {hi})")
        return x
    parse.__name__ = flag
    return parse


@dataclass(frozen=True)
class _Cell:
    key: str
    kind: str
    prepared: Prepared


def _cells(args: argparse.Namespace) -> tuple[list[_Cell], list[str]]:
    """Every spec's cells (refusing the run on the first bad spec); and the cells the specs' validation skipped."""
    from harness.commands.test_all import matrix_cells
    from harness.gate_outcome import cell_kind

    overrides = {k: v for k, v in (("time_limit", args.time_limit), ("backend", args.backend)) if v is not None}
    cells: list[_Cell] = []
    skipped: list[str] = []
    for path in args.specs:
        base = prepare(path, overrides)
        for label, cell in matrix_cells(base.spec):
            try:
                one = prepare(path, {**overrides, **cell})
            except SpecError as exc:
                skipped.append(f"{path}: {label}: {exc}")
                continue
            nem = one.spec.nemesis
            faults = "schedule" if nem.schedule else str(cell["nemesis"])  # a written schedule overrides both modes
            key = f"{base.spec.name}: {cell['workload']} x {faults}" + ("" if nem.schedule else f" x {nem.mode}")
            cells.append(_Cell(key, cell_kind(one.options), one))
    keys = [c.key for c in cells]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise SpecError(args.specs[0], "name", dup, "specs with distinct names (two specs give the same cells)")
    return cells, skipped


class _NoRevisions(ValueError):
    """The specs' system cannot run another git revision (the message names it and what it lacks)."""


def _revision_parts(cells: list[_Cell]) -> tuple[RevisionSystem, dict[str, frozenset[str]]]:
    """The specs' one system's part of a revision's build (its adapter's ``revisions``), and every option its DBs
    pass their node commands (checked against each revision when it is built).

    Raises:
        _NoRevisions: the specs name more than one system (the builds' cache is keyed by commit, and the gate
            compares one system's two builds), or a system whose adapter offers no revision builds
            (:class:`harness.revisions.BuildsRevisions`) or whose DB runs no node commands of this repository
            (:class:`harness.commands._parts.RunsNodeCommands`).
    """
    import systems
    from harness.revisions import revision_system_of

    names = sorted({c.prepared.spec.system for c in cells})
    if len(names) != 1:
        raise _NoRevisions(f"the specs name the systems {', '.join(map(repr, names))}; a gate compares two builds "
                           "of one system (gate each system's specs on their own)")
    name = names[0]
    lacking = []
    revisions = revision_system_of(systems.get(name))
    if revisions is None:
        lacking.append("revision builds (its adapter has no `revisions`: harness.revisions.BuildsRevisions)")
    flags: dict[str, set[str]] = {}
    for cell in cells:
        db = make_db(cell.prepared.spec, cell.prepared.options)
        if not isinstance(db, RunsNodeCommands):
            lacking.append("node commands of this repository (its DB has no `command` and `node_flags`: "
                           "harness.commands._parts.RunsNodeCommands)")
            break
        for command, used in db.node_flags().items():
            flags.setdefault(command, set()).update(used)
    if revisions is None or lacking:
        raise _NoRevisions(f"system {name!r} cannot run another git revision: it offers no "
                           f"{' and no '.join(lacking)}")
    return revisions, {command: frozenset(used) for command, used in flags.items()}


def run(args: argparse.Namespace) -> int:
    from harness.revisions import RevisionError, ensure_build

    try:
        cells, skipped = _cells(args)
    except SpecError as exc:
        return refuse("gate", f"invalid spec: {' '.join(str(exc).split())}")
    if not cells:
        return refuse("gate", "the specs have no cell to run (every cell was skipped)")
    if any(c.prepared.spec.backend == "ssh" for c in cells) and not args.nodes_file:
        return refuse("gate", "--nodes-file: the ssh backend needs a file naming a host for every node")
    try:
        revisions, node_flags = _revision_parts(cells)
    except _NoRevisions as exc:
        return refuse("gate", exc)
    builds: dict[str, Any] = {}
    for name in ("baseline", "candidate"):
        try:
            builds[name] = ensure_build(getattr(args, name), system=revisions, node_flags=node_flags)
        except RevisionError as exc:
            return refuse("gate", f"--{name}: {exc}")
    from spark_analysis.sequential import Cell, GateSettings, SequentialGate

    try:
        settings = GateSettings(alpha=args.alpha, power=args.power, min_rate=args.min_rate,
                                min_effect=args.min_effect, budget_runs=args.budget_runs, first_seed=args.first_seed,
                                perf_runs=args.perf_runs)
    except ValueError as exc:
        return refuse("gate", exc)
    for line in skipped:
        print(f"splitbrain gate: skipped cell {line}", file=sys.stderr)
    b, c = builds["baseline"], builds["candidate"]
    print(f"[gate] baseline {args.baseline} = {b.short} (version {b.version}); candidate {args.candidate} = "
          f"{c.short} (version {c.version}); {len(cells)} cell(s); budget {settings.budget_runs} runs; "
          f"alpha {settings.alpha}, power {settings.power}", flush=True)
    if b.revision == c.revision:
        print("[gate] warning: both revisions are the same commit; the gate can only pass or be undecided",
              flush=True)
    for cell in cells:
        print(f"[gate]   {cell.kind:6}  {cell.key}", flush=True)
    if args.dry_run:
        return 0
    problem = check_results_root("--results", args.results)
    if problem:
        return refuse("gate", problem)
    gate = SequentialGate(tuple(Cell(x.key, x.kind) for x in cells), settings)
    try:
        pool = _open_pool(args)
    except ValueError as exc:  # a bad or unreachable --master
        return refuse("gate", exc)
    report = _drive(gate, pool, {x.key: x for x in cells}, builds, args)
    return _finish(report, args, b.short, c.short)


def _open_pool(args: argparse.Namespace) -> Any:
    from harness.fleet import LocalPool, SparkPool

    if args.master:
        return SparkPool(args.master, warehouse=args.warehouse, progress=sys.stderr)
    return LocalPool(args.jobs, warehouse=args.warehouse, progress=sys.stderr)


def _request(cell: _Cell, build: Any, name: str, seed: int, args: argparse.Namespace) -> Any:
    from harness.fleet import RunRequest

    spec = cell.prepared.spec
    spec = replace(spec, seed=seed, test_count=1, leave_running=False,
                   cluster={**spec.cluster, "revision": build.revision, "version": build.short})
    extra = ("--nodes-file", str(Path(args.nodes_file).resolve())) if args.nodes_file else ()
    return RunRequest(f"{cell.key} seed={seed} {name}", resolved_yaml(spec), str(Path(args.results).resolve()), extra)


def _read_run(run_dir: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """The run's results.json and history (None where unreadable: the gate then sees a crashed run)."""
    import orjson

    try:
        results = json.loads((Path(run_dir) / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    history: list[dict[str, Any]] = []
    try:
        with open(Path(run_dir) / "history.jsonl", "rb") as fh:
            for line in fh:
                try:
                    history.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    break  # a torn last line
    except OSError:
        return results, None
    return results if isinstance(results, dict) else None, history


def _drive(gate: Any, pool: Any, cells: dict[str, _Cell], builds: dict[str, Any], args: argparse.Namespace) -> Any:
    """Hand out pairs while the gate asks for them, observe every run as it finishes; the final report."""
    from harness.gate_outcome import run_outcome

    pending: dict[int, tuple[str, str, int]] = {}  # pool index -> (cell, build, seed)
    done = 0

    def fill() -> None:
        free_pairs = max(0, (args.jobs - len(pending)) // 2) or (0 if pending else 1)
        for pair in gate.next_pairs(free_pairs):
            for name in ("baseline", "candidate"):
                index = pool.submit(_request(cells[pair.cell], builds[name], name, pair.seed, args))
                pending[index] = (pair.cell, name, pair.seed)

    with pool:
        try:
            fill()
            for result in pool.completed():
                if result.index not in pending:
                    continue
                cell, name, seed = pending.pop(result.index)
                run_dir = result.run_dirs[0] if result.run_dirs else ""
                results, history = _read_run(run_dir) if run_dir else (None, None)
                outcome = run_outcome(cell=cell, build=name, seed=seed, results=results, history=history,
                                      ref=run_dir)
                gate.observe(outcome)
                done += 1
                kinds = f" ({', '.join(outcome.anomalies)})" if outcome.anomalies else ""
                where = run_dir or f"no run directory: {result.last_line}"
                print(f"[gate] {done} done, {len(pending)} in flight: {cell} seed={seed} {name}: "
                      f"{outcome.verdict}{kinds} -- {where}", flush=True)
                report = gate.report()
                if gate.finished:
                    # A failed cell's baseline runs still in flight say whether the candidate's anomaly is new (a
                    # regression) or old (the baseline shows it too): wait for them, then stop everything else.
                    failed = {cr.cell.key for cr in report.cells if cr.decision == "fail"}
                    if not any(c in failed and b == "baseline" for c, b, _ in pending.values()):
                        pool.cancel()
                        break
                    continue
                fill()
        except KeyboardInterrupt:
            pool.cancel()
            print("[gate] interrupted: reporting what was decided so far", file=sys.stderr, flush=True)
    final = gate.report(final=True)
    for cr in final.cells:  # after the baseline's run of the failing seed, so "old bug or new" is known
        if cr.decision == "fail":
            _explain_failure(cr)
    return final


def _explain_failure(cr: Any) -> None:
    """A failed cell, in words: its reason, and for each failing run what its checkers said and how to replay it."""
    from harness.explain import summary_lines

    print(f"[gate] FAIL {cr.cell.key}: {cr.reason}", flush=True)
    for ref in cr.failing_refs[:3]:
        results, _ = _read_run(ref)
        for line in summary_lines(results or {}, width=160)[:6]:
            print(f"[gate]     {line}", flush=True)
        print(f"[gate]     replay: splitbrain repro {shlex.quote(ref)}", flush=True)


def _finish(report: Any, args: argparse.Namespace, baseline: str, candidate: str) -> int:
    from spark_analysis.gate import render_junit, render_table, summary_line

    print(render_table(report, baseline, candidate), flush=True)
    print(summary_line(report, baseline, candidate), flush=True)
    if args.junit:
        try:
            Path(args.junit).parent.mkdir(parents=True, exist_ok=True)
            Path(args.junit).write_text(render_junit(report, baseline, candidate), encoding="utf-8")
        except OSError as exc:
            refuse("gate", f"--junit {args.junit}: cannot write ({exc.strerror})")
    code = int(report.exit_code)
    return code if code in (0, 1) else EXIT_UNKNOWN
