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
5. runs the checkers on the history read back from disk (a crashing checker gives "unknown") -- the
   workloads' own and the availability verdict (:func:`availability_checker`, named ``availability``) -- and
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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import systems
from checker.history import read_jsonl
from harness import generator as g
from harness.explain import crash_where, summary_lines
from harness.history_writer import HistoryWriter
from harness.interpreter import Interpreter
from harness.junit import write_junit
from harness.lag import describe_lag, lag_summary
from harness.load import describe_load
from harness.progress import Progress
from harness.protocols import (
    DB,
    Checker,
    Client,
    LeaseOptions,
    LogFiles,
    Nemesis,
    OperatorRecovery,
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
    write_results,
)
from nemesis import accounting

__all__ = [
    "AVAILABILITY", "CLUSTER_EVENTS", "AvailabilityChecker", "ClusterEventsChecker", "Interpreter",
    "RunOutcome", "TestParts", "availability_checker", "cluster_events_checker", "fault_line", "run_repeated",
    "run_test", "worst_exit_code", "write_schedule",
]

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


@dataclass
class _Run:
    """One run's state while it runs: what :func:`run_test`'s steps share.  ``crash`` is empty unless the run
    itself failed; ``set_up`` lists the nodes whose DB setup began (each is torn down, even half set up)."""

    spec: TestSpec
    parts: TestParts
    run: RunDir
    test: dict[str, Any]
    writer: HistoryWriter
    interp: Interpreter
    progress: Progress
    remote: Any
    nemesis: Nemesis | None
    started: float = field(default_factory=time.monotonic)
    set_up: list[str] = field(default_factory=list)
    observer: Any = None
    crash: str = ""
    crash_at: str = ""  # file:line in function of the innermost project frame of a crash
    interrupted: bool = False
    signals: int = 0
    recovered: dict[str, str] = field(default_factory=dict)  # node -> what OperatorRecovery did before the final

    @property
    def main_start_ns(self) -> int | None:
        """When the main phase's clock started: its time limit and a schedule's offsets count from here."""
        span = self.interp.phase_spans.get("main")
        return None if span is None else span[0]

    @property
    def main_end_ns(self) -> int | None:
        return self.interp.phase_spans.get("main", (0, None))[1]


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
    r = _start(spec, parts, results_root=results_root, remote=remote, quiet=quiet, op_timeout_s=op_timeout_s,
               nemesis_timeout_s=nemesis_timeout_s, on_run_dir=on_run_dir)
    main_task = asyncio.current_task()
    undo_signals = _on_interrupt(r, main_task, grace_s) if install_signal_handlers else (lambda: None)
    r.progress.start()
    try:
        await _bring_up(r)
        await _run_phases(r, _phases(spec, parts, heal_limit_s))
    except asyncio.CancelledError:
        if r.signals < 2:
            raise
        r.interrupted, r.crash = True, "cancelled by a second interrupt"
        if main_task is not None:
            main_task.uncancel()
    except Exception as exc:
        r.crash = f"{exc.__class__.__name__}: {exc}"
        r.crash_at = crash_where([(f.filename, f.lineno or 0, f.name)
                                  for f in traceback.extract_tb(exc.__traceback__)])
        log.error("test crashed: %s\n%s", r.crash, traceback.format_exc())
    finally:
        await _wind_down(r, grace_s if r.interrupted or r.crash
                         else max([op_timeout_s, *(parts.op_timeouts or {}).values()]) + 1.0)
        r.progress.phase("teardown")
        await _teardown(r)
        r.progress.stop()
        undo_signals()
    history = read_jsonl(r.run.history)
    merged = _check(r, history)
    doc, faults = _record(r, merged, history)
    code = exit_code(doc["valid"], crashed=bool(r.crash) and not r.interrupted)
    _report(r, doc, faults, code)
    return RunOutcome(r.run, doc["valid"], code, r.interrupted, doc)


def _start(spec: TestSpec, parts: TestParts, *, results_root: str, remote: Any, quiet: bool, op_timeout_s: float,
           nemesis_timeout_s: float, on_run_dir: Callable[[RunDir], None] | None) -> _Run:
    """The run directory (with ``test.yaml``), the history writer and the interpreter; nothing is set up yet."""
    run = create_run_dir(results_root, spec.name)
    if on_run_dir is not None:
        on_run_dir(run)
    run.test_yaml.write_text(resolved_yaml(spec), encoding="utf-8")
    test: dict[str, Any] = {
        "name": spec.name, "spec": spec, "nodes": list(spec.nodes.all), "run_dir": str(run.path), "remote": remote,
        "seed": spec.seed, "concurrency": spec.concurrency,
    }
    progress = Progress(quiet=quiet)
    writer = HistoryWriter(run.history, client_threads=spec.concurrency, keep=False)
    interp = Interpreter(test, writer, client_threads=spec.concurrency, seed=spec.seed, op_timeout_s=op_timeout_s,
                         nemesis_timeout_s=nemesis_timeout_s, progress=progress, op_timeouts=parts.op_timeouts)
    print(f"[splitbrain] test {spec.name} seed={spec.seed} -> {run.path}", flush=True)
    return _Run(spec, parts, run, test, writer, interp, progress, remote, parts.nemesis)


def _on_interrupt(r: _Run, main_task: asyncio.Task[Any] | None, grace_s: float) -> Callable[[], None]:
    """SIGINT/SIGTERM: the first stops generation (in-flight ops get ``grace_s``), a second cancels the run.
    Returns the undo."""
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        r.signals += 1
        if r.signals == 1:
            log.warning("interrupted: stopping generation; in-flight ops get %.1fs", grace_s)
            r.interp.stop()
        elif main_task is not None:
            main_task.cancel()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
            installed.append(sig)

    def undo() -> None:
        for sig in installed:
            loop.remove_signal_handler(sig)

    return undo


async def _bring_up(r: _Run) -> None:
    """Set up the DB on every node (at once), the observer, the nemesis, the workers and the client."""
    r.progress.phase("setup")
    db, nodes = r.parts.db, list(r.spec.nodes.all)
    if db is not None:
        async def setup_node(n: str) -> None:
            r.set_up.append(n)  # before awaiting: a half-set-up node still gets torn down
            await db.setup(r.test, n)
        await asyncio.gather(*(setup_node(n) for n in nodes))
    guided = r.spec.nemesis.mode == "guided" and r.spec.nemesis.schedule is None and not r.parts.schedule
    r.observer = await _start_observer(r.test, db, nodes, r.writer, r.run, guided=guided)
    if r.nemesis is not None:
        r.nemesis = await r.nemesis.setup(r.test)
    await r.interp.start_workers(r.parts.client, r.nemesis, list(r.parts.client_nodes or nodes))
    await r.parts.client.setup(r.test)
    if r.parts.schedule:
        write_schedule(r.run.path / "schedule.yaml", r.parts.schedule, seed=r.spec.seed)


def _phases(spec: TestSpec, parts: TestParts, heal_limit_s: float) -> list[tuple[str, Any, float | None]]:
    """(name, generator, limit) of each phase in order: main (workers and nemesis) -> heal (the nemesis's
    final generator) -> recovery (a wait) -> final (final reads on the client threads)."""
    phases: list[tuple[str, Any, float | None]] = [
        ("main", g.time_limit(spec.time_limit_s, parts.generator), spec.time_limit_s)]
    if parts.heal_generator is not None:
        phases.append(("heal", g.time_limit(heal_limit_s, g.nemesis(parts.heal_generator)), heal_limit_s))
    recovery_s = spec.phases.recovery_s
    phases.append(("recovery", g.sleep(recovery_s) if recovery_s else None, recovery_s))
    if parts.final_generator is not None:
        final_s = spec.phases.final_drain_s
        phases.append(("final", g.time_limit(final_s, g.clients(parts.final_generator)), final_s))
    return phases


async def _run_phases(r: _Run, phases: Sequence[tuple[str, Any, float | None]]) -> None:
    """Run the phases in order, fsyncing the history at each end; an interrupt ends the run after its phase.
    Before the final phase, a DB that can (:class:`OperatorRecovery`) brings back what its own recovery left down."""
    for name, gen, limit in phases:
        if name == "final":
            await _operator_recovery(r)
        r.progress.phase(name, limit)
        completed = await r.interp.run(gen, phase=name)
        r.writer.sync()
        if not completed:
            r.interrupted = True
            return


async def _operator_recovery(r: _Run) -> None:
    """Ask an :class:`OperatorRecovery` DB to bring back each node its own recovery left down; what it did (or why
    it could not) goes to ``r.recovered`` and so to ``results.json``."""
    db = r.parts.db
    if not isinstance(db, OperatorRecovery):
        return
    for node in r.spec.nodes.all:
        try:
            did = await db.recover(r.test, node)
        except Exception as exc:  # a node that cannot be brought back is reported, and the final phase still runs
            did = f"could not bring it back: {exc.__class__.__name__}: {exc}"
        if did is not None:
            r.recovered[node] = did
            log.warning("operator recovery of %s: %s", node, did)


async def _wind_down(r: _Run, drain_s: float) -> None:
    """Let in-flight ops finish (up to ``drain_s``), stop the observer, close the history."""
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await r.interp.drain(drain_s)
    if r.observer is not None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await r.observer.stop()
    r.writer.tap = None
    r.writer.close()


def _check(r: _Run, history: Sequence[Any]) -> dict[str, Any]:
    """The checkers' merged verdict on the history read back from disk; an interrupted or crashed run is never
    valid (True becomes "unknown")."""
    results = {name: _check_safe(c, r.test, history) for name, c in r.parts.checkers.items()}
    availability = availability_checker(r.spec)
    if availability is not None and AVAILABILITY not in results and availability.applies(history):
        results[AVAILABILITY] = _check_safe(availability, {**r.test, "main_phase_start_ns": r.main_start_ns}, history)
    events = cluster_events_checker(r.test["run_dir"])
    if events is not None and CLUSTER_EVENTS not in results:
        results[CLUSTER_EVENTS] = _check_safe(events, r.test, history)
    merged = merge_results(results)
    valid = merged.get("valid", "unknown")
    if r.interp.errors:
        merged["client_errors"] = r.interp.errors[:20]
    merged["valid"] = "unknown" if (r.interrupted or r.crash) and valid is True else valid
    load = r.interp.load_figures(history, rate_hz=r.spec.rate)  # achieved rate, per worker and node (harness.load)
    if load is not None:
        merged["load"] = load
    return merged


AVAILABILITY = "availability"  # the name of the availability verdict in results.json
CLUSTER_EVENTS = "cluster-events"  # the name of the invariants judged on the observer's events in results.json


@dataclass(frozen=True)
class ClusterEventsChecker:
    """The invariants a run can judge on its observer's broker events (``events.jsonl``, :mod:`harness.observe`):
    :func:`checker.invariants.check_cluster_events` -- ``role-reapplied``, which no workload's history shows (the
    writes resume at once; only the brokers' own role changes tell)."""

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Any:
        from checker.invariants import check_cluster_events
        from harness.observe import read_events

        return check_cluster_events(read_events(test["run_dir"]))


def cluster_events_checker(run_dir: str | Path | None) -> ClusterEventsChecker | None:
    """The run's event invariants checker, or None when the run observed no events (a DB without the admin
    event RPC, or an observer that never ran)."""
    from harness.observe import EVENTS_FILE

    if run_dir is None or not (Path(run_dir) / EVENTS_FILE).exists():
        return None
    return ClusterEventsChecker()


@dataclass(frozen=True)
class AvailabilityChecker:
    """The availability verdict of a run (:mod:`checker.availability`) as a harness checker: the spec's
    topology and workloads, and its expectations resolved against the cluster's lease.  ``check`` reads when
    the main phase started from ``test["main_phase_start_ns"]`` (the cluster counts as whole from then)."""

    topology: Any  # checker.availability.Topology
    workloads: tuple[str, ...]
    expectations: Any  # checker.availability.Expectations

    def applies(self, history: Sequence[Any]) -> bool:
        """Whether the history holds a client op of one of its workloads (a run whose client is something else,
        such as a test's scripted client under a spec that names ``queue`` by default, is not judged)."""
        from checker.availability import WORKLOAD_OPS

        fs = frozenset().union(*(WORKLOAD_OPS[w].fs for w in self.workloads))
        return any(op.f in fs for op in history if op.is_client)

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Any:
        from checker.availability import check_availability

        start_ns = test.get("main_phase_start_ns")
        return check_availability(history, self.topology, self.workloads, self.expectations,
                                  start_s=(start_ns or 0) / 1e9)


def availability_checker(spec: TestSpec) -> AvailabilityChecker | None:
    """The run's availability checker: None when the spec turns it off (``checker.availability.enabled:
    false``), names no workload it can judge, or has no controllers, or its system's options have no broker lease
    (:class:`harness.protocols.LeaseOptions`).  The bounds it does not state derive from ``cluster.lease_timeout_ms``
    (the cluster's default lease when absent)."""
    from checker.availability import WORKLOAD_OPS, Topology, resolve

    workloads = tuple(w.name for w in spec.workloads if w.name in WORKLOAD_OPS)
    if not workloads or not spec.nodes.controllers:
        return None
    options = systems.get(spec.system).options(spec.cluster, file=spec.source)
    if not isinstance(options, LeaseOptions):  # no lease to derive the bounds from
        return None
    expectations = resolve(spec.checker.get("availability") or {}, lease_timeout_ms=options.lease_timeout_ms)
    if expectations is None:
        return None
    return AvailabilityChecker(Topology(spec.nodes.controllers, spec.nodes.broker_sets), workloads, expectations)


def _record(r: _Run, merged: dict[str, Any], history: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write ``results.json`` (verdict, run facts, fault accounting, observation, provenance) and ``junit.xml``;
    returns the results document and the fault accounting."""
    spec = r.spec
    faults, fault_warnings = accounting.account(op.to_dict() for op in history if not op.is_client)
    observed = _observed(r.run, history, r.observer, r.main_start_ns, r.main_end_ns, spec, r.parts)
    for line in fault_warnings:
        log.warning("%s", line)
        print(f"[splitbrain] WARNING: {line}", flush=True)
    doc = write_results(r.run, merged, name=spec.name, seed=spec.seed, interrupted=r.interrupted,
                        crashed=r.crash or None, crashed_at=r.crash_at or None, counts=dict(r.writer.counts),
                        duration_s=time.monotonic() - r.started, main_phase_start_ns=r.main_start_ns,
                        main_phase_end_ns=r.main_end_ns, faults=faults, fault_warnings=fault_warnings, **observed,
                        **({"operator_recovery": dict(r.recovered)} if r.recovered else {}), **_provenance(spec))
    write_junit(r.run, spec.name, merged, time_s=time.monotonic() - r.started,
                error=f"{r.crash} (at {r.crash_at})" if r.crash and r.crash_at else r.crash,
                properties={"seed": str(spec.seed), "spec": str(r.run.test_yaml),
                            "faults": fault_line(faults) or "none"})
    return doc, faults


def _report(r: _Run, doc: Mapping[str, Any], faults: Mapping[str, Any], code: int) -> None:
    """The run's summary lines on stdout: verdicts, load, observation coverage, the final one-liner."""
    for line in summary_lines(doc, width=_summary_width(), faults=fault_line(faults), crash=r.crash,
                              where=r.crash_at):
        print(f"[splitbrain] {line}", flush=True)
    for node, did in (doc.get("operator_recovery") or {}).items():
        print(f"[splitbrain] operator recovery before the final phase: {node}: {did}", flush=True)
    if doc.get("load") is not None:
        print(f"[splitbrain] {describe_load(doc['load'])}", flush=True)
    if doc.get("replication_lag") is not None:
        print(f"[splitbrain] {describe_lag(doc['replication_lag'])}", flush=True)
    if "coverage" in doc:
        cov = doc["coverage"]
        print(f"[splitbrain] nemesis {doc['nemesis_mode']}: {cov['events']} cluster events observed "
              f"(events.jsonl), coverage {cov['points']} points", flush=True)
    print(f"[splitbrain] {r.spec.name}: valid={doc['valid']!s} exit={code} seed={r.spec.seed} "
          f"results={r.run.path}", flush=True)


async def _start_observer(test: dict[str, Any], db: DB | None, nodes: Sequence[str], writer: HistoryWriter,
                          run: RunDir, *, guided: bool = False) -> Any:
    """The run's event observer (:mod:`harness.observe`), for a DB whose nodes answer admin RPCs or that can say
    who leads (``primaries``), and for any DB in a ``guided`` run (the clients' outcomes are then what guides it:
    :func:`harness.observe.clients_only`); also put in ``test["observer"]`` for the guided nemesis.  None (and no
    events) otherwise."""
    from harness.observe import Observer, clients_only

    if db is None or (clients_only(db) and not guided):
        return None

    tap: list[dict[str, Any]] = []
    try:
        observer = await Observer(test, db, nodes, now_ns=writer.now_ns, run_dir=run.path, history_tap=tap).start()
    except Exception as exc:  # observation is evidence about the run, never a reason to fail it
        log.warning("no event observation for this run: %r", exc)
        return None
    writer.tap = tap  # only once an observer drains it
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
            lag = lag_summary(getattr(observer, "lag_samples", ()), start_ns=main_start_ns, end_ns=main_end_ns)
            if lag is not None:
                out["replication_lag"] = lag
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
        import systems
        from harness.provenance import collect_provenance, sut_source_of

        revision = spec.cluster.get("revision")
        return collect_provenance(label=None if label is None else str(label), backend=spec.backend,
                                  sut_revision=None if revision is None else str(revision),
                                  source=sut_source_of(systems.get(spec.system)))
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
    spec: TestSpec, run_one: Callable[[TestSpec], Awaitable[RunOutcome]]
) -> tuple[int, list[RunOutcome]]:
    """Run ``spec.test_count`` tests (seeds ``seed``, ``seed+1``, ...) with ``run_one`` (which builds fresh
    parts, so each run has its own results directory).  Stops after an interrupted run.  Returns the worst
    exit code and the outcomes."""
    outcomes: list[RunOutcome] = []
    for i in range(spec.test_count):
        outcome = await run_one(dataclasses.replace(spec, seed=spec.seed + i))
        outcomes.append(outcome)
        if outcome.interrupted:
            break
    return worst_exit_code([o.exit_code for o in outcomes]), outcomes


async def _teardown(r: _Run) -> None:
    """Best effort, every step guarded: client, workers and nemesis; then the node logs; then the DB (unless
    ``leave_running``)."""
    await _stop_clients_and_nemesis(r)
    if r.parts.db is None:
        return
    await _collect_logs(r, r.parts.db)
    if r.spec.leave_running:
        log.warning("leave_running: the cluster is left up")
        return
    for node in r.set_up:
        try:
            await asyncio.wait_for(r.parts.db.teardown(r.test, node), 30.0)
        except (Exception, asyncio.CancelledError) as exc:
            log.warning("db teardown of %s failed: %r", node, exc)


async def _stop_clients_and_nemesis(r: _Run) -> None:
    nemesis = r.nemesis
    for step in (lambda: r.parts.client.teardown(r.test), r.interp.stop_workers,
                 (lambda: nemesis.teardown(r.test)) if nemesis is not None else None):
        if step is None:
            continue
        try:
            await asyncio.wait_for(step(), 30.0)
        except (Exception, asyncio.CancelledError) as exc:
            log.warning("teardown step failed: %r", exc)


async def _collect_logs(r: _Run, db: DB) -> None:
    """Each set-up node's log files (:class:`~harness.protocols.LogFiles`) into ``nodes/<node>/``, through the
    remote (a run without one has nothing to collect)."""
    if not isinstance(db, LogFiles) or r.remote is None:
        return
    for node in r.set_up:
        for remote_path, name in db.log_files(r.test, node).items():
            try:
                await r.remote.download(node, remote_path, str(r.run.node_dir(node) / name))
            except Exception as exc:
                log.warning("cannot collect %s from %s: %r", remote_path, node, exc)
