"""``splitbrain test SPEC``: run a test spec against the real cluster.

Order of work (nothing starts before everything is validated):

1. load the YAML spec with the command-line overrides, validate cluster options, nemesis packages and
   targets, workload names and options (an error exits 2 naming the file, the key and the reason);
2. for each of ``test_count`` runs (seeds ``seed``, ``seed+1``, ...): create the backend (fresh namespaces /
   containers per run, so no run sees another's data), build fresh DB, workloads and nemesis packages, run
   :func:`harness.runner.run_test`, write ``latency.png``/``rate.png``/``timeline.html``, close the backend
   (always: after a crash and on Ctrl-C too; ``--leave-running`` keeps the last run's cluster and records it
   for ``splitbrain cluster down``);
3. ``--junit FILE`` writes one JUnit document for all runs; the exit code is the worst run's
   (255 crashed > 1 invalid > 2 unknown > 0 valid).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import eventloop
from harness.commands._artifacts import write_artifacts
from harness.commands._backend import BackendUnavailable, open_remote, ssh_targets, sut_node_command
from harness.commands._clusters import cluster_record, recordable, write_record
from harness.commands._exit import refuse
from harness.commands._parts import (
    Prepared,
    RunsNodeCommands,
    add_spec_arguments,
    build_parts,
    check_results_root,
    overrides_from_args,
    prepare,
)
from harness.commands._runs import print_table
from harness.junit import write_junit_file
from harness.revisions import SutBuild
from harness.runner import RunOutcome, run_repeated, run_test
from harness.runs import read_run
from harness.spec import SpecError, TestSpec
from harness.store import EXIT_CRASHED

__all__ = ["configure", "execute", "run", "sut_banner"]

log = logging.getLogger("splitbrain.commands.test")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="the YAML test spec")
    add_spec_arguments(p)
    add_output_arguments(p)


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", default="results", help="results root directory (default: results)")
    p.add_argument("--junit", help="write one JUnit XML file for all runs")
    p.add_argument("--quiet", action="store_true", help="no live progress line")
    p.add_argument("--run-dirs-file", help=argparse.SUPPRESS)  # test-all --jobs: where a child lists its runs


def _cancel_on_sigterm(task: asyncio.Task[Any] | None) -> Callable[[], None]:
    """SIGTERM cancels the main task (so ``finally`` blocks close the backend); returns the undo."""
    loop = asyncio.get_running_loop()
    if task is None:
        return lambda: None
    try:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    except (NotImplementedError, RuntimeError):
        return lambda: None

    def undo() -> None:
        loop.remove_signal_handler(signal.SIGTERM)

    return undo


async def execute(
    prepared: Prepared, *, results_root: str = "results", quiet: bool = True, nodes_file: str | None = None,
    state_dir: Path | None = None,
) -> tuple[int, list[RunOutcome]]:
    """Run every repetition of a validated spec (see the module docstring).

    Raises:
        BackendUnavailable: the backend cannot be created (no run directory is made for that run).
    """
    last_seed = prepared.spec.seed + prepared.spec.test_count - 1

    async def run_one(one: TestSpec) -> RunOutcome:
        outcome = await _run_on_backend(prepared, one, results_root=results_root, quiet=quiet, nodes_file=nodes_file,
                                        state_dir=state_dir, keep_cluster=one.leave_running and one.seed == last_seed)
        _after_run(one, outcome)
        return outcome

    return await run_repeated(prepared.spec, run_one)


async def _run_on_backend(prepared: Prepared, one: TestSpec, *, results_root: str, quiet: bool,
                          nodes_file: str | None, state_dir: Path | None, keep_cluster: bool) -> RunOutcome:
    """One run on a backend of its own: fresh parts, the backend opened, :func:`run_test`, the backend closed
    (always) -- unless ``keep_cluster`` and the run was not interrupted: then the cluster is recorded for
    ``splitbrain cluster down`` and left up."""
    parts, db = build_parts(one, prepared.options)
    undo = _cancel_on_sigterm(asyncio.current_task())
    remote = None
    keep = False
    try:
        remote = await open_remote(one, nodes_file=nodes_file, state_dir=state_dir, results_dir=results_root,
                                   sut=prepared.sut)
        if prepared.sut is not None and isinstance(db, RunsNodeCommands):  # validate_spec refused the other DBs
            db.command = await sut_node_command(remote, one, prepared.sut)
        undo()  # run_test installs its own SIGINT/SIGTERM handling (graceful stop)
        outcome = await run_test(one, parts, results_root=results_root, remote=remote, quiet=quiet)
        undo = _cancel_on_sigterm(asyncio.current_task())
        if keep_cluster and not outcome.interrupted:
            keep = True
            record = cluster_record(one, remote, recordable(one, db), results_root=results_root)
            path = write_record(results_root, record)
            if hasattr(remote, "keep_as_cluster"):  # from now on the record, not this process, owns it
                remote.keep_as_cluster(path, results_root)
            print(f"[splitbrain] cluster left running ({path}); stop it with: splitbrain cluster down "
                  f"{one.name} --results {results_root}", flush=True)
    finally:
        undo()
        if remote is not None and not keep:
            await remote.close()
    return outcome


def _after_run(one: TestSpec, outcome: RunOutcome) -> None:
    """Plots and the timeline; for a run that did not pass, where to look and how to reproduce and shrink it."""
    written = write_artifacts(outcome.run_dir.path, title=f"{one.name} seed={one.seed}")
    if written:
        log.info("wrote %s", ", ".join(written))
    if outcome.exit_code != 0:
        run = shlex.quote(str(outcome.run_dir.path))
        print(f"[splitbrain] look at: {look_at(outcome.run_dir.path, written)}", flush=True)
        print(f"[splitbrain] reproduce with: splitbrain repro {run} (same seed, client ops and executed faults); "
              f"shrink the faults with: splitbrain shrink {run}", flush=True)


def look_at(run: Path, written: list[str]) -> Path:
    """The file to open first for a run that did not pass: a linearizability failure's window (the ops around
    the one that cannot be placed), else the timeline (failing ops among everything that happened, with the
    faults), else ``results.json`` (a crash before any op)."""
    windows = sorted(f for f in written if f.startswith("linear-") and f.endswith(".svg"))
    if windows:
        return run / windows[0]
    return run / "timeline.html" if "timeline.html" in written else run / "results.json"


def run(args: argparse.Namespace) -> int:
    try:
        prepared = prepare(args.spec, overrides_from_args(args),
                           allow_weak_quorum=getattr(args, "allow_weak_quorum", False))
        if prepared.spec.backend == "ssh":
            ssh_targets(prepared.spec, getattr(args, "nodes_file", None))
    except (SpecError, BackendUnavailable) as exc:
        return _refused(exc)
    problem = check_results_root("--results", args.results)
    if problem:
        return refuse("test", problem)
    print(f"[splitbrain] {prepared.spec.name}: seed={prepared.spec.seed} backend={prepared.spec.backend} "
          f"runs={prepared.spec.test_count}", flush=True)
    if prepared.sut is not None:
        print(f"[splitbrain] {sut_banner(prepared.sut)}", flush=True)
    try:
        code, outcomes = eventloop.run(execute(prepared, results_root=args.results, quiet=args.quiet,
                                               nodes_file=getattr(args, "nodes_file", None)))
    except (SpecError, BackendUnavailable) as exc:
        return _refused(exc)
    except (KeyboardInterrupt, asyncio.CancelledError):
        return refuse("test", "interrupted outside a run; the backend was closed", code=130)
    except Exception as exc:  # the harness itself failed (not the system under test): report, exit 255
        log.error("splitbrain test crashed", exc_info=True)
        return refuse("test", f"crashed: {exc.__class__.__name__}: {exc}", code=EXIT_CRASHED)
    if getattr(args, "run_dirs_file", None):
        with open(args.run_dirs_file, "a", encoding="utf-8") as fh:
            fh.writelines(f"{o.run_dir.path}\n" for o in outcomes)
    runs = [read_run(o.run_dir.path) for o in outcomes]
    if len(outcomes) > 1:
        print_table([(args.spec, summary) for summary, _ in runs])
    if args.junit:
        try:
            write_junit_file(args.junit, runs)
        except OSError as exc:
            refuse("test", f"cannot write JUnit file {args.junit}: {exc}")
    return code


def _refused(exc: SpecError | BackendUnavailable) -> int:
    return refuse("test", f"invalid spec: {exc}" if isinstance(exc, SpecError) else exc)


def sut_banner(sut: SutBuild) -> str:
    """One line on the cluster build a run uses (printed before it starts; the missing requests are a warning)."""
    line = f"cluster at revision {sut.short} (version {sut.version}); harness, clients and checkers at this checkout"
    if sut.missing_requests:
        line += (f"; warning: the revision lacks {len(sut.missing_requests)} request(s) this harness knows "
                 f"({', '.join(sut.missing_requests[:4])}{', ...' if len(sut.missing_requests) > 4 else ''}): "
                 "faults or observations that send them will fail")
    if sut.missing_optional_fields:
        fields = sut.missing_optional_fields
        line += (f"; its schemas lack {len(fields)} optional field(s) this harness knows ({', '.join(fields[:4])}"
                 f"{', ...' if len(fields) > 4 else ''}): a request that sets one would be refused")
    return line
