"""The simulated ``disk`` fault (``corrupt-file`` in a tail mode): a broker whose log lost fsynced records stays
out of mastership until replication refills it, as the real broker does (``broker/ha/role.py``), and the run
stays valid."""

from __future__ import annotations

import pytest

from checker.compose import compose
from system_under_test.sim import SimConfig, run
from system_under_test.sim.playback import plan
from systems.splitbrain.sim.check import check_run, replay_command

NAMES = ("c1", "c2", "c3", "b1-1", "b1-2", "b1-3")


@pytest.mark.parametrize(("seed", "victim", "mode"), [(0, "b1-1", "truncate-tail"), (1, "b1-2", "bitflip-tail"),
                                                      (2, "b1-3", "truncate-tail")])
def test_a_broker_that_lost_durable_records_leads_only_after_its_log_is_refilled(seed: int, victim: str,
                                                                                 mode: str) -> None:
    steps = [{"at_s": 6.0, "f": "corrupt-file", "value": {"targets": victim, "mode": mode}}]
    r = run(SimConfig(seed=seed, seconds=20, faults=()), plan(steps, NAMES, 20))
    merged = compose(check_run(r))
    assert merged.valid is True, f"{dict(merged.counts)}; replay: {replay_command(r)}"
    assert r.schedule[0]["f"] == "corrupt-file" and r.schedule[0]["value"] == steps[0]["value"]
    fault = next(op for op in r.history if op["process"] == "nemesis" and op["type"] == "info")
    cleared = [e["time"] for e in r.node_events if e["node"] == victim and e["event"] == "durable-loss-cleared"]
    assert cleared and cleared[0] > fault["time"], "the loss is found at the restart and cleared once refilled"
    led = [e["time"] for e in r.node_events if e["node"] == victim and e["event"] == "became-master"
           and fault["time"] < e["time"]]
    assert all(t >= cleared[0] for t in led), "no mastership while the loss stands"
