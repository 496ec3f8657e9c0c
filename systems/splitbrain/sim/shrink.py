"""Play a given schedule in simulation, shrink a failing one, and turn it into a spec for a real run.

* :func:`load_schedule` reads ``--schedule FILE`` -- a list of ``nemesis.schedule`` steps (a run's
  ``schedule.yaml``) or a spec whose ``nemesis.schedule`` holds them -- checks it against the schedule format
  (:func:`nemesis.schedule.parse`) and then against what the simulator plays
  (:func:`system_under_test.sim.playback.plan`); :class:`ScheduleFileError` is one line naming the file and
  the step.
* :func:`shrink` runs ddmin (:mod:`nemesis.shrink`) over the schedule's units (each fault with its undo step,
  :func:`nemesis.schedule.units`) in simulation, with the failing run's seed: a candidate still fails when its
  run reports one of the original failing checkers' anomaly kinds.  Runs are deterministic, so one run per
  candidate decides, and the result is 1-minimal when the budget did not stop the search.
* :func:`repro_spec` is the spec of a real-process run (``splitbrain test``) with the simulated run's cluster
  settings, its workload and a schedule; pure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from checker.compose import results_to_json
from nemesis.replay import anomaly_kinds, reproduces
from nemesis.schedule import ScheduleError, join_units, to_data, units
from nemesis.schedule import parse as parse_schedule
from nemesis.shrink import Candidate, ddmin
from nemesis.targets import Topology
from system_under_test.sim import SimConfig, SimRun
from system_under_test.sim import run as run_sim
from system_under_test.sim.admin import REGISTER_LEASE_MS
from system_under_test.sim.cluster import TOPIC
from system_under_test.sim.playback import PlayError, Timed, plan
from systems.splitbrain.selectors import SELECTORS
from systems.splitbrain.sim.check import check_run

__all__ = ["CONTROLLERS", "BROKERS", "ScheduleFileError", "ShrinkResult", "load_schedule", "plan_steps",
           "repro_spec", "shrink"]

CONTROLLERS = ("c1", "c2", "c3")
BROKERS = ("b1-1", "b1-2", "b1-3")
TOPOLOGY = Topology(CONTROLLERS, (BROKERS,), selectors=SELECTORS)
NAMES = CONTROLLERS + BROKERS


class ScheduleFileError(ValueError):
    """A schedule file the simulator cannot play (one line: the file, the step, the reason)."""


def plan_steps(raw: Any, seconds: float, *, source: str = "schedule") -> tuple[Timed, ...]:
    """Check ``raw`` steps in the schedule format, then as the simulator's vocabulary, and plan them."""
    try:
        parse_schedule(raw, TOPOLOGY)
        return plan(raw, NAMES, seconds)
    except (ScheduleError, PlayError) as exc:
        raise ScheduleFileError(f"{source}: {exc}") from None


def load_schedule(path: str | Path, seconds: float) -> tuple[list[dict[str, Any]], tuple[Timed, ...]]:
    """The steps of ``path`` (a list, or a spec's ``nemesis.schedule``) and their plan; see the module docstring."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScheduleFileError(f"--schedule {path}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ScheduleFileError(f"--schedule {path}: not YAML ({' '.join(str(exc).split())})") from None
    if isinstance(raw, Mapping):
        nem = raw.get("nemesis")
        raw = nem.get("schedule") if isinstance(nem, Mapping) else None
        if raw is None:
            raise ScheduleFileError(f"--schedule {path}: a mapping without nemesis.schedule; expected a list of "
                                    "steps or a spec with nemesis.schedule")
    steps = list(raw or [])
    return steps, plan_steps(steps, seconds, source=f"--schedule {path}")


_REAL_WORKLOADS: dict[str, Callable[[SimConfig], dict[str, Any]]] = {
    "queue": lambda cfg: {"name": "queue", "options": {"topic": TOPIC, "queues_per_set": cfg.queues,
                                                      "slave_read_fraction": 0.0, "commit_fraction": 0.0}},
    "broker-ids": lambda cfg: {"name": "broker-ids", "options": {"failpoints": 0}},
    "membership": lambda cfg: {"name": "membership"},
    "controller-register": lambda cfg: {"name": "controller-register", "options": {"lease_ms": REGISTER_LEASE_MS}},
}
"""Each simulated workload (``SIM_WORKLOADS``) as the real workload entry of a repro spec."""


def repro_spec(cfg: SimConfig, schedule: Sequence[Mapping[str, Any]], *, name: str) -> dict[str, Any]:
    """A spec for ``splitbrain test``: the simulated run's nodes, cluster settings, bugs, load and phases, its
    workloads as real ones -- the queue as the simulated clients run it (no slave reads, no commits), the
    ``broker-ids`` allocator without lanes (the simulator has none; ``registration-crash`` steps of the schedule
    play the crashes), ``membership`` with its defaults, ``controller-register`` with the simulated virtual
    brokers' long lease -- and ``schedule``."""
    cluster: dict[str, Any] = {"lease_timeout_ms": cfg.lease_timeout_ms,
                               "all_ack_in_sync_state_set": cfg.all_ack_in_sync_state_set,
                               "enable_elect_unclean_master": cfg.enable_elect_unclean_master,
                               "flush": "sync" if cfg.sync_flush else "async"}
    if cfg.bugs:
        cluster["bugs"] = sorted(cfg.bugs)
    return {
        "name": name, "backend": "local",
        "nodes": {"controllers": list(CONTROLLERS), "broker_sets": [list(BROKERS)]},
        "cluster": cluster,
        "workloads": [_REAL_WORKLOADS[w](cfg) for w in cfg.workloads],
        "nemesis": {"schedule": [dict(s) for s in schedule]},
        "concurrency": cfg.threads, "rate": round(cfg.threads * 1000 / cfg.think_ms, 3),
        "time_limit_s": cfg.seconds,
        "phases": {"recovery_s": cfg.settle_s, "final_drain_s": cfg.drain_s},
        "seed": cfg.seed,
    }


@dataclass
class ShrinkResult:
    """What a shrink found: the units of the original schedule, the smallest failing choice, every candidate
    asked (with whether it failed), whether ddmin finished, and the CPU seconds the candidate runs took."""

    units: list[tuple[Any, ...]]
    best: Candidate
    tried: list[tuple[Candidate, bool]] = field(default_factory=list)
    complete: bool = True
    cpu_s: float = 0.0

    def schedule(self, c: Candidate | None = None) -> list[dict[str, Any]]:
        return to_data(join_units([self.units[i] for i in (self.best if c is None else c)]))


def shrink(cfg: SimConfig, original: SimRun, kinds: set[str], *, budget: int,
           progress: Callable[[str], None] = lambda line: None) -> ShrinkResult:
    """ddmin over ``original``'s executed schedule (module docstring), at most ``budget`` candidate runs."""
    result = ShrinkResult(units(parse_schedule(original.schedule, TOPOLOGY)), ())
    result.best = tuple(range(len(result.units)))
    gen = ddmin(len(result.units))
    try:
        c = next(gen)
        while True:
            if len(result.tried) >= budget:
                result.complete = False
                break
            c = gen.send(_test(cfg, result, c, kinds, progress))
    except StopIteration as stop:
        final: Candidate = stop.value
        if len(final) < len(result.best) and (final, True) in result.tried:
            result.best = final
    return result


def _test(cfg: SimConfig, result: ShrinkResult, c: Candidate, kinds: set[str],
          progress: Callable[[str], None]) -> bool:
    t0 = time.process_time()
    run = run_sim(cfg, plan_steps(result.schedule(c), cfg.seconds))
    doc = results_to_json(check_run(run))
    result.cpu_s += time.process_time() - t0
    failed = reproduces(doc, kinds)
    result.tried.append((c, failed))
    if failed and len(c) < len(result.best):
        result.best = c
    got = ",".join(sorted(anomaly_kinds(doc) & kinds)) or f"valid={doc['valid']}"
    progress(f"[shrink] candidate {len(result.tried)}: {len(c)} unit(s) {list(c)} -> "
             f"{'FAILS (' + got + ')' if failed else 'passes'}; smallest failing {len(result.best)} unit(s)")
    return failed
