"""Runs one test end to end: setup, phases, teardown, checking, results directory.

:func:`run_test` takes a :class:`~harness.spec.TestSpec` and :class:`TestParts` (DB, client,
nemesis, checkers, generators -- the protocols of :mod:`harness.protocols`, so the runner knows
nothing about the real cluster) and:

1. creates ``results/<name>/<ts>/`` and writes ``test.yaml``;
2. sets up the DB on every node, the nemesis, one client per worker (:mod:`harness.interpreter`);
3. runs the phases -- main (``time_limit_s``) -> heal (nemesis final generator) -> recovery wait
   (``phases.recovery_s``) -> final reads (``phases.final_drain_s``) -- fsyncing the history at
   every phase end;
4. tears down (clients, nemesis), collects node logs (:class:`~harness.protocols.LogFiles`) into
   ``nodes/<node>/``, tears the DB down unless ``leave_running``;
5. runs the checkers on the history read back from disk (a crashing checker gives "unknown") and
   writes ``results.json`` and ``junit.xml``; returns the exit code (0/1/2/255).

SIGINT/SIGTERM stops generation: in-flight ops get ``grace_s`` to complete, the rest are closed
as ``info`` ("interrupted"), the history is closed cleanly and everything is torn down; a run
that was interrupted is never reported valid (True becomes "unknown").  A second signal cancels
the run at once (teardown still runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checker.history import read_jsonl
from harness import generator as g
from harness.explain import crash_where, summary_lines
from harness.history_writer import HistoryWriter
from harness.interpreter import Interpreter
from harness.load import describe_load
from harness.progress import Progress
from harness.protocols import (
    DB,
    Checker,
    Client,
    LogFiles,
    Nemesis,
)
from harness.spec import TestSpec, resolved_yaml
from harness.store import (
    EXIT_CRASHED,
    EXIT_INVALID,
    EXIT_UNKNOWN,
    EXIT_VALID,
    RunDir,
    create_run_dir,
    exit_code,
    merge_results,
    write_junit,
    write_results,
)
from nemesis import accounting

__all__ = ["Interpreter", "RunOutcome", "TestParts", "fault_line", "run_repeated", "run_test", "worst_exit_code",
           "write_schedule"]

log = logging.getLogger("splitbrain.runner")
NEMESIS = g.NEMESIS_THREAD


@dataclass
class TestParts:
    """What a test is made of.  ``generator`` is the main phase (clients and nemesis routed with
    :func:`harness.generator.clients`/``nemesis``); ``heal_generator`` heals every fault (nemesis
    thread); ``final_generator`` performs final reads/drains (client threads)."""

    __test__ = False  # not a pytest class

    client: Client
    checkers: Mapping[str, Checker]
    generator: Any
    db: DB | None = None
    nemesis: Nemesis | None = None
    heal_generator: Any = None
    final_generator: Any = None
    client_nodes: Sequence[str] | None = None
    op_timeouts: Mapping[str, float] | None = None  # f -> seconds, overriding op_timeout_s for slow ops
    schedule: Sequence[Any] = ()  # the nemesis steps of the main phase (nemesis.schedule.Step), planned up front


@dataclass
class RunOutcome:
    run_dir: RunDir
    valid: Any
    exit_code: int
    interrupted: bool
    results: dict[str, Any]


def _check_safe(checker: Checker, test: dict[str, Any], history: Sequence[Any]) -> Any:
    try:
        return checker.check(test, history, {})
    except Exception as exc:
        return {"valid": "unknown", "error": f"checker crashed: {exc!r}", "traceback": traceback.format_exc()}


async def run_test(
    spec: TestSpec,
    parts: TestParts,
    *,
    results_root: str = "results",
    remote: Any = None,
    quiet: bool = True,
    op_timeout_s: float = 5.0,
    nemesis_timeout_s: float = 60.0,
    grace_s: float = 5.0,
    heal_limit_s: float = 60.0,
    install_signal_handlers: bool = True,
    on_run_dir: Callable[[RunDir], None] | None = None,
) -> RunOutcome:
    """Run one test end to end and write its results directory.  See the module docstring."""
    run = create_run_dir(results_root, spec.name)
    if on_run_dir is not None:
        on_run_dir(run)
    run.test_yaml.write_text(resolved_yaml(spec), encoding="utf-8")
    nodes = list(spec.nodes.all)
    test: dict[str, Any] = {
        "name": spec.name, "spec": spec, "nodes": nodes, "run_dir": str(run.path), "remote": remote,
        "seed": spec.seed, "concurrency": spec.concurrency,
    }
    progress = Progress(quiet=quiet)
    writer = HistoryWriter(run.history, client_threads=spec.concurrency, keep=False)
    interp = Interpreter(test, writer, client_threads=spec.concurrency, seed=spec.seed, op_timeout_s=op_timeout_s,
                         nemesis_timeout_s=nemesis_timeout_s, progress=progress, op_timeouts=parts.op_timeouts)
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    signals = {"count": 0}

    def on_signal() -> None:
        signals["count"] += 1
        if signals["count"] == 1:
            log.warning("interrupted: stopping generation; in-flight ops get %.1fs", grace_s)
            interp.stop()
        elif main_task is not None:
            main_task.cancel()

    installed = []
    if install_signal_handlers:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal)
                installed.append(sig)
    crash: str = ""
    observer: Any = None
    crash_at = ""  # file:line in function of the innermost project frame of a crash
    interrupted = False
    main_start_ns: int | None = None
    started = time.monotonic()
    db, nemesis = parts.db, parts.nemesis
    set_up: list[str] = []
    print(f"[splitbrain] test {spec.name} seed={spec.seed} -> {run.path}", flush=True)
    progress.start()
    try:
        progress.phase("setup")
        if db is not None:
            async def setup_node(n: str) -> None:
                set_up.append(n)  # before awaiting: a half-set-up node still gets torn down
                await db.setup(test, n)
            await asyncio.gather(*(setup_node(n) for n in nodes))
        observer = await _start_observer(test, db, nodes, writer, run)
        if nemesis is not None:
            nemesis = await nemesis.setup(test)
        await interp.start_workers(parts.client, nemesis, list(parts.client_nodes or nodes))
        await parts.client.setup(test)
        phase_list: list[tuple[str, Any, float | None]] = [
            ("main", g.time_limit(spec.time_limit_s, parts.generator), spec.time_limit_s),
        ]
        if parts.heal_generator is not None:
            phase_list.append(("heal", g.time_limit(heal_limit_s, g.nemesis(parts.heal_generator)), heal_limit_s))
        phase_list.append(("recovery", g.sleep(spec.phases.recovery_s) if spec.phases.recovery_s else None,
                           spec.phases.recovery_s))
        if parts.final_generator is not None:
            phase_list.append(("final", g.time_limit(spec.phases.final_drain_s, g.clients(parts.final_generator)),
                               spec.phases.final_drain_s))
        if parts.schedule:
            write_schedule(run.path / "schedule.yaml", parts.schedule, seed=spec.seed)
        for name, gen, limit in phase_list:
            progress.phase(name, limit)
            if name == "main":
                main_start_ns = writer.now_ns()
            completed = await interp.run(gen, phase=name)
            writer.sync()
            if not completed:
                interrupted = True
                break
    except asyncio.CancelledError:
        if signals["count"] < 2:
            raise
        interrupted = True
        crash = "cancelled by a second interrupt"
        if main_task is not None:
            main_task.uncancel()
    except Exception as exc:
        crash = f"{exc.__class__.__name__}: {exc}"
        crash_at = crash_where([(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)])
        log.error("test crashed: %s\n%s", crash, traceback.format_exc())
    finally:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await interp.drain(grace_s if interrupted or crash
                               else max([op_timeout_s, *(parts.op_timeouts or {}).values()]) + 1.0)
        if observer is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await observer.stop()
        writer.close()
        progress.phase("teardown")
        await _teardown(test, parts, interp, nemesis, run, spec, remote, set_up)
        progress.stop()
        for sig in installed:
            loop.remove_signal_handler(sig)
    history = read_jsonl(run.history)
    results = {name: _check_safe(c, test, history) for name, c in parts.checkers.items()}
    merged = merge_results(results)
    valid = merged.get("valid", "unknown")
    if interp.errors:
        merged["client_errors"] = interp.errors[:20]
    if (interrupted or crash) and valid is True:
        valid = "unknown"
    merged["valid"] = valid
    load = interp.load_figures(history, rate_hz=spec.rate)  # achieved rate, per worker and node (harness.load)
    if load is not None:
        merged["load"] = load
    faults = accounting.summarize(op.to_dict() for op in history if not op.is_client)
    observed = _observed(run, history, observer, main_start_ns, interp.phase_spans.get("main", (0, None))[1], spec,
                         parts)
    fault_warnings = accounting.warnings(faults)
    for line in fault_warnings:
        log.warning("%s", line)
        print(f"[splitbrain] WARNING: {line}", flush=True)
    doc = write_results(run, merged, name=spec.name, seed=spec.seed, interrupted=interrupted,
                        crashed=crash or None, crashed_at=crash_at or None, counts=dict(writer.counts),
                        duration_s=time.monotonic() - started, main_phase_start_ns=main_start_ns,
                        main_phase_end_ns=interp.phase_spans.get("main", (0, None))[1], faults=faults,
                        fault_warnings=fault_warnings, **observed,
                        **_provenance(spec))
    write_junit(run, spec.name, merged, time_s=time.monotonic() - started,
                error=f"{crash} (at {crash_at})" if crash and crash_at else crash,
                properties={"seed": str(spec.seed), "spec": str(run.test_yaml),
                            "faults": fault_line(faults) or "none"})
    code = exit_code(valid, crashed=bool(crash) and not interrupted)
    for line in summary_lines(doc, width=_summary_width(), faults=fault_line(faults), crash=crash, where=crash_at):
        print(f"[splitbrain] {line}", flush=True)
    if load is not None:
        print(f"[splitbrain] {describe_load(load)}", flush=True)
    if "coverage" in observed:
        cov = observed["coverage"]
        print(f"[splitbrain] nemesis {observed['nemesis_mode']}: {cov['events']} cluster events observed "
              f"(events.jsonl), coverage {cov['points']} points", flush=True)
    print(f"[splitbrain] {spec.name}: valid={valid!s} exit={code} seed={spec.seed} results={run.path}", flush=True)
    return RunOutcome(run, valid, code, interrupted, doc)


async def _start_observer(test: dict[str, Any], db: DB | None, nodes: Sequence[str], writer: HistoryWriter,
                          run: RunDir) -> Any:
    """The run's event observer (:mod:`harness.observe`), for a DB whose nodes answer admin RPCs; also put in
    ``test["observer"]`` for the guided nemesis.  None (and no events) for other DBs."""
    if db is None or not hasattr(db, "admin_addr") or not hasattr(db, "role"):
        return None
    from harness.observe import Observer

    try:
        observer = await Observer(test, db, nodes, now_ns=writer.now_ns, run_dir=run.path).start()
    except Exception as exc:  # observation is evidence about the run, never a reason to fail it
        log.warning("no event observation for this run: %r", exc)
        return None
    test["observer"] = observer
    return observer


def _observed(run: RunDir, history: Sequence[Any], observer: Any, main_start_ns: int | None,
              main_end_ns: int | None, spec: TestSpec, parts: TestParts) -> dict[str, Any]:
    """``results.json`` keys from observation: ``coverage`` (:mod:`nemesis.coverage`) and ``nemesis_mode``;
    for a guided run, ``schedule.yaml`` is written from the executed steps (nothing was planned up front)."""
    out: dict[str, Any] = {"nemesis_mode": spec.nemesis.mode if spec.nemesis.schedule is None else "schedule"}
    try:
        from nemesis.coverage import coverage_of, summary

        ops = [op.to_dict() for op in history if not op.is_client]
        if observer is not None:
            out["coverage"] = summary(coverage_of(observer.events, ops), start_ns=main_start_ns or 0,
                                      events=len(observer.events))
        if spec.nemesis.mode == "guided" and spec.nemesis.schedule is None and not parts.schedule:
            from nemesis.replay import executed_steps

            steps = executed_steps(ops, main_start_ns=main_start_ns, time_limit_s=spec.time_limit_s,
                                   main_end_ns=main_end_ns)
            write_schedule(run.path / "schedule.yaml", steps, seed=spec.seed, guided=True)
    except Exception as exc:  # evidence about the run, never a reason to lose its verdict
        log.warning("observation summary failed: %r", exc)
    return out


def _summary_width() -> int:
    """The terminal's width (less the ``[splitbrain] `` prefix); 160 when stdout is not a terminal (CI logs)."""
    import shutil
    import sys

    if not sys.stdout.isatty():
        return 160
    return max(40, shutil.get_terminal_size((100, 24)).columns - 13)


def _provenance(spec: TestSpec) -> dict[str, Any]:
    """The run's provenance keys for results.json (:mod:`harness.provenance`); never fails the run."""
    label = spec.cluster.get("version")
    try:
        from harness.provenance import collect_provenance

        return collect_provenance(label=None if label is None else str(label), backend=spec.backend)
    except Exception as exc:  # provenance is evidence about the run, not part of it
        log.warning("provenance unavailable: %s", exc)
        return {"cluster_version": label, "git_revision": "unknown",
                "provenance": {"error": f"{exc.__class__.__name__}: {exc}"}}


def fault_line(faults: Mapping[str, Mapping[str, Any]]) -> str:
    """One line of the fault summary: ``kill 3/3, crash-at:raft.before_apply 0/2 (not reached...)``."""
    parts = []
    for label, k in faults.items():
        item = f"{label} {k.get('effective', 0)}/{k.get('requested', 0)}"
        if k.get("not_effective"):
            reason = next(iter(k.get("reasons") or {}), "")
            item += f" ({reason[:60]})" if reason else ""
        parts.append(item)
    return ", ".join(parts)


def write_schedule(path: Any, steps: Sequence[Any], *, seed: int, guided: bool = False) -> None:
    """``schedule.yaml``: the main phase's nemesis steps in the format ``nemesis.schedule`` reads."""
    import yaml

    from nemesis.schedule import to_data

    when = ("chosen during the run by the guided nemesis" if guided else "planned before the main phase")
    header = (f"# The nemesis schedule of this run (seed {seed}), {when}.  Paste it\n"
              "# under nemesis.schedule in a spec to run these faults again; `splitbrain repro` replays\n"
              "# what was executed (see the history's nemesis ops).\n")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(header + yaml.safe_dump(to_data(steps), sort_keys=False, default_flow_style=None, width=120))


def worst_exit_code(codes: Sequence[int]) -> int:
    """The exit code of several runs: crashed (255) over invalid (1) over unknown (2) over valid (0)."""
    for code in (EXIT_CRASHED, EXIT_INVALID, EXIT_UNKNOWN):
        if code in codes:
            return code
    return EXIT_VALID


async def run_repeated(
    spec: TestSpec, make_parts: Callable[[TestSpec], TestParts], **kwargs: Any
) -> tuple[int, list[RunOutcome]]:
    """Run ``spec.test_count`` tests (seeds ``seed``, ``seed+1``, ...), each with fresh parts and its
    own results directory.  Stops after an interrupted run.  Returns the worst exit code and the outcomes."""
    outcomes: list[RunOutcome] = []
    for i in range(spec.test_count):
        one = dataclasses.replace(spec, seed=spec.seed + i)
        outcome = await run_test(one, make_parts(one), **kwargs)
        outcomes.append(outcome)
        if outcome.interrupted:
            break
    return worst_exit_code([o.exit_code for o in outcomes]), outcomes


async def _teardown(
    test: dict[str, Any], parts: TestParts, interp: Interpreter, nemesis: Nemesis | None, run: RunDir,
    spec: TestSpec, remote: Any, set_up: list[str],
) -> None:
    """Best effort, every step guarded: clients, nemesis, logs, DB."""
    for step in (lambda: parts.client.teardown(test), interp.stop_workers,
                 (lambda: nemesis.teardown(test)) if nemesis is not None else None):
        if step is None:
            continue
        try:
            await asyncio.wait_for(step(), 30.0)
        except (Exception, asyncio.CancelledError) as exc:
            log.warning("teardown step failed: %r", exc)
    db = parts.db
    if db is None:
        return
    for node in set_up:
        if isinstance(db, LogFiles) and remote is not None:
            for remote_path, name in db.log_files(test, node).items():
                try:
                    await remote.download(node, remote_path, str(run.node_dir(node) / name))
                except Exception as exc:
                    log.warning("cannot collect %s from %s: %r", remote_path, node, exc)
    if spec.leave_running:
        log.warning("leave_running: the cluster is left up")
        return
    for node in set_up:
        try:
            await asyncio.wait_for(db.teardown(test, node), 30.0)
        except (Exception, asyncio.CancelledError) as exc:
            log.warning("db teardown of %s failed: %r", node, exc)
