"""Judge a simulated run with the checkers of a real run, and store it like one.

:func:`check_run` runs, on a :class:`system_under_test.sim.SimRun`:

* ``queue`` -- :func:`checker.queue.check_queue` (lost, duplicated, reordered sends ...), with the run's
  settings in its stats as the queue workload's checker reports them;
* ``invariants`` -- :func:`checker.invariants.check_invariants` over the history and the brokers' node events of
  the kinds it reads (one master and one writer per master epoch, epochs never decrease per observer, ids
  unique and stable ...; the simulator's other events, such as ``truncate``, are kept for the reader only);
* ``availability`` -- :func:`checker.availability.check_availability` with the defaults a spec gets from its
  lease (writes resume within 2 leases + 4 s of a fault that leaves them possible, and after the final heal);
* ``restarts`` -- a broker that refused to start again (a torn ``.broker.meta``: ``restart-refused``), the
  anomaly the ``broker-ids`` workload's restart checker reports;
* for each other simulated workload, the checkers a real run of it gets, under the names a real run gives them
  (``<workload>/<checker>``, :data:`WORKLOAD_CHECKERS`): ``broker-ids/linearizable`` (the allocator ops against
  ``IdAllocator``), ``broker-ids/invariants``, ``broker-ids/stats``; ``membership/membership``
  (``stale-epoch-accepted``, ``bounce-kept-epoch`` ...), ``membership/invariants``, ``membership/stats``;
  ``controller-register/linearizable`` (read / elect / alter against ``ControllerMetadata``),
  ``controller-register/stats``.  The ``broker-ids`` allocator ops and the ``controller-register`` elect and alter
  ops are writes of the controllers' path, so ``availability`` judges them too, as in a real run.
* ``<workload>/setup`` -- only for a workload whose setup did not finish: invalid (``wrong-initial-state``) when
  the ``controller-register`` setup read a set in another state than the model's initial one after broker 1's
  first election -- the real setup raises on it -- unknown when it ran out of time.

:func:`write_run` stores ``history.jsonl``, ``node-events.jsonl``, ``schedule.yaml`` (the executed faults as a
``nemesis.schedule``, validated by :func:`nemesis.schedule.parse`) and ``results.json`` in a directory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from checker.availability import Topology, check_availability, resolve
from checker.compose import Anomaly, Result, check_safe, compose, result_from_anomalies, results_to_json
from checker.invariants import KINDS, check_invariants
from checker.queue import check_queue
from nemesis.schedule import parse as parse_schedule
from nemesis.targets import Topology as TargetTopology
from system_under_test.client.register_requests import REGISTER_FS, REPLICAS
from system_under_test.sim import SimRun
from system_under_test.sim.admin import SETUP_WRONG_STATE
from systems.splitbrain.selectors import SELECTORS
from workloads.broker_ids import ALLOC_FS, IdsInvariantChecker, LinearizableIdsChecker
from workloads.common import StatsChecker
from workloads.controller_register import LinearizableChecker
from workloads.membership import MEMBERSHIP_FS, MembershipChecker, MembershipInvariants
from workloads.models import ControllerMetadata

__all__ = ["REGISTER_CHECK_S", "WORKLOAD_CHECKERS", "check_run", "replay_command", "schedule_of", "write_run"]

REGISTER_CHECK_S = 20.0
"""Budget (seconds) of one run's ``controller-register`` linearizability search (the real workload's default is
60 s; a simulated sweep checks many runs)."""

WORKLOAD_CHECKERS: dict[str, dict[str, Any]] = {
    "broker-ids": {"linearizable": LinearizableIdsChecker(), "invariants": IdsInvariantChecker(),
                   "stats": StatsChecker(("next-id", "apply-id"), ALLOC_FS)},
    "membership": {"membership": MembershipChecker(), "invariants": MembershipInvariants(),
                   "stats": StatsChecker(("bounce",), MEMBERSHIP_FS)},
    "controller-register": {
        "linearizable": LinearizableChecker(ControllerMetadata(replicas=REPLICAS), time_limit_s=REGISTER_CHECK_S),
        "stats": StatsChecker(("read",), REGISTER_FS)},
}
"""The checkers of each simulated workload but ``queue``, as its builder in ``workloads/`` gives them to a real
run (the lanes' ``restarts`` checker is the simulation's own ``restarts``: lanes are not simulated).  The
``controller-register`` model allows unclean elections when the run does (:func:`_checkers`), as the builder's
does; its search is bounded by :data:`REGISTER_CHECK_S` (exhausted: unknown)."""


def _checkers(workload: str, run: SimRun) -> dict[str, Any]:
    checkers = WORKLOAD_CHECKERS.get(workload, {})
    if workload == "controller-register" and run.config.enable_elect_unclean_master:
        lin = checkers["linearizable"]
        checkers = {**checkers, "linearizable": replace(lin, model=ControllerMetadata(replicas=REPLICAS,
                                                                                      unclean=True))}
    return checkers


def _stats(d: Mapping[str, Any]) -> Result:
    """A stats checker's dict as a Result (the runner's rule: a dict result carries its own ``valid``)."""
    return Result(d.get("valid", True), {}, {k: v for k, v in d.items() if k != "valid"})


def _workload_checker(checker: Any, run: SimRun) -> Result:
    res = checker.check({}, run.history, {})
    return _stats(res) if isinstance(res, Mapping) else res


def _restarts(run: SimRun) -> Result:
    anomalies = [Anomaly("restart-refused", node, (), "the broker starts again", reason,
                         f"{node} refused to start after a crash: {reason[:160]}")
                 for node, reason in sorted(run.refused.items())]
    return result_from_anomalies({"restart-refused": anomalies} if anomalies else {},
                                 stats={"refused": len(anomalies)})


def _setup(kind: str, message: str) -> Result:
    """A workload's setup that did not finish: invalid when it saw a wrong state (the real setup raises on it,
    and no fault can explain it: the setup runs before the nemesis), unknown when it ran out of time."""
    if kind != SETUP_WRONG_STATE:
        return Result("unknown", error=message)
    return result_from_anomalies({kind: [Anomaly(kind, "setup", (), "the model's initial state", message, message)]})


def _queue(run: SimRun) -> Result:
    res = check_queue(run.history)
    return Result(res.valid, res.anomalies, {**res.stats, "settings": run.config.settings}, res.error, res.counts)


def check_run(run: SimRun) -> dict[str, Result]:
    """Every checker's result on ``run`` (see the module docstring), by name; a crashing checker is unknown."""
    topo = Topology(run.controllers, run.broker_sets)
    exp = resolve({}, lease_timeout_ms=run.config.lease_timeout_ms)
    results = {
        "queue": check_safe(_queue, run),
        "invariants": check_safe(check_invariants, run.history, [e for e in run.node_events if e["event"] in KINDS]),
        "restarts": check_safe(_restarts, run),
    }
    for wl in run.config.workloads:
        for name, checker in _checkers(wl, run).items():
            results[f"{wl}/{name}"] = check_safe(_workload_checker, checker, run)
    for wl, (kind, message) in sorted(run.setup_errors.items()):
        results[f"{wl}/setup"] = _setup(kind, message)
    if exp is not None:
        results["availability"] = check_safe(check_availability, run.history, topo, list(run.config.workloads), exp,
                                             start_s=run.main_start_s)
    return results


def verdict(results: Mapping[str, Result]) -> Any:
    return compose(results).valid


def schedule_of(run: SimRun) -> list[dict[str, Any]]:
    """The executed faults as ``nemesis.schedule`` steps, checked against that module's own validation."""
    topo = TargetTopology(run.controllers, run.broker_sets, selectors=SELECTORS)
    parse_schedule(run.schedule, topo)
    return run.schedule


def replay_command(run: SimRun, schedule_file: str | None = None) -> str:
    """The command that replays ``run``: its seed and flags, and ``--schedule`` when it played a given one."""
    cfg = run.config
    parts = [f"splitbrain sim --seed {cfg.seed} --seconds {cfg.seconds:g}"]
    for bug in sorted(cfg.bugs):
        parts.append(f"--bug {bug}")
    if cfg.threads != 4:
        parts.append(f"--threads {cfg.threads}")
    if not cfg.all_ack_in_sync_state_set:
        parts.append("--unsafe no-all-ack")
    if cfg.enable_elect_unclean_master:
        parts.append("--unsafe unclean-election")
    faults, workloads = run.pools if run.pools is not None else (cfg.faults, cfg.workloads)
    if run.swarm is not None:
        parts.append("--swarm")
    if schedule_file is not None:
        parts.append(f"--schedule {schedule_file}")
    else:
        parts.append(f"--faults {','.join(faults) if faults else 'none'}")
    parts.append(f"--workloads {','.join(workloads)}")
    return " ".join(parts)


def write_run(run: SimRun, results: Mapping[str, Result], out: Path, schedule_file: str | None = None) -> None:
    """Store the run in ``out`` (created): history, node events, schedule and results."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "history.jsonl").open("w", encoding="utf-8") as fh:
        for op in run.history:
            fh.write(json.dumps(op, separators=(",", ":"), default=str) + "\n")
    with (out / "node-events.jsonl").open("w", encoding="utf-8") as fh:
        for e in run.node_events:
            fh.write(json.dumps(e, separators=(",", ":"), default=str) + "\n")
    (out / "schedule.yaml").write_text(yaml.safe_dump(schedule_of(run), sort_keys=False), encoding="utf-8")
    doc = results_to_json(results)
    doc["simulation"] = {"seed": run.config.seed, "replay": replay_command(run, schedule_file), "stats": run.stats,
                         "simulated_s": run.simulated_s,
                         "swarm": run.swarm.describe() if run.swarm is not None else None}
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
