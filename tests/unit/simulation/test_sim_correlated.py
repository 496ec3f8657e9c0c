"""The ``correlated-kill`` fault (a rack or power failure): two or three brokers of the set crash within
``CORRELATED_SPREAD_MS`` of one another and come back one by one; it is written as plain ``kill``/``start`` steps,
so a drawn run replays byte for byte from its schedule, and the unmutated cluster stays valid under it."""

from __future__ import annotations

import json
from typing import Any

from checker.compose import results_to_json
from system_under_test.sim import SimConfig, SimRun, run
from system_under_test.sim.cluster import SimCluster
from system_under_test.sim.faults import CORRELATED_SPREAD_MS, Burst
from systems.splitbrain.sim.check import check_run
from systems.splitbrain.sim.shrink import plan_steps

BROKERS = ("b1-1", "b1-2", "b1-3")


def _bytes(r: SimRun) -> bytes:
    return json.dumps([r.history, r.node_events, r.schedule], separators=(",", ":")).encode()


def _bursts(schedule: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Runs of broker kills, each within the spread of the one before."""
    out: list[list[dict[str, Any]]] = []
    for step in schedule:
        if step["f"] != "kill":
            continue
        last = out[-1][-1] if out else None
        if last is not None and (step["at_s"] - last["at_s"]) * 1000 <= CORRELATED_SPREAD_MS:
            out[-1].append(step)
        else:
            out.append([step])
    return out


def test_a_correlated_kill_crashes_brokers_close_together_and_restarts_each_on_its_own() -> None:
    cfg = SimConfig(seed=1, seconds=30, faults=("correlated-kill",))
    r = run(cfg)
    bursts = _bursts(r.schedule)
    assert bursts and all(2 <= len(b) <= 3 for b in bursts), bursts
    for burst in bursts:
        victims = [s["value"] for s in burst]
        assert set(victims) <= set(BROKERS) and len(set(victims)) == len(victims)
        starts = [s for s in r.schedule if s["f"] == "start" and s["value"] in victims and s["at_s"] > burst[0]["at_s"]]
        assert {s["value"] for s in starts} >= set(victims), "every victim is started again"
    assert r.stats["faults"]["correlated-kill"] == sum(len(b) for b in bursts)
    verdict = results_to_json(check_run(r))
    assert verdict["valid"] is True, verdict["anomaly_counts"]


def test_a_drawn_correlated_kill_replays_byte_for_byte_from_its_schedule() -> None:
    cfg = SimConfig(seed=1007, seconds=30, faults=("kill", "correlated-kill"), threads=4)
    drawn = run(cfg)
    assert any(len(b) >= 2 for b in _bursts(drawn.schedule))
    played = run(cfg, plan_steps(drawn.schedule, cfg.seconds))
    assert played.schedule == drawn.schedule
    assert _bytes(played) == _bytes(drawn)


def test_a_burst_never_starts_a_node_another_fault_holds_down() -> None:
    """A burst's kill of a node that is already down changes nothing, so the burst drops that node's restart:
    whatever took it down decides when it comes back (here nothing does until the final heal)."""
    c = SimCluster(SimConfig(seed=3, seconds=10, faults=("clock",)), None)
    w, nemesis = c.world, c.nemesis
    seen: dict[str, bool] = {}

    def strike() -> None:
        c.brokers["b1-2"].crash()  # held down by another fault
        nemesis._burst("correlated-kill", Burst(((0, {"f": "kill", "value": "b1-1"}, 1000),
                                                 (100, {"f": "kill", "value": "b1-2"}, 500))), True)

    def look() -> None:
        seen.update({n: c.brokers[n].up for n in ("b1-1", "b1-2")})

    w.at(c.main_start_ms + 3000, strike)
    w.at(c.main_start_ms + 4500, look)
    r = c.run()
    assert seen == {"b1-1": True, "b1-2": False}
    process = [(s["at_s"], s["f"], s["value"]) for s in r.schedule if s["f"] in ("kill", "start")]
    assert process == [(3.0, "kill", "b1-1"), (4.0, "start", "b1-1"), (10.0, "start", "b1-2")], process
    assert r.stats["faults"]["correlated-kill"] == 1
