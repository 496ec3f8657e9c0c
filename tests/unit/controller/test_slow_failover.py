"""The ``slow-failover`` bug of the leader scan: a dead master is fenced after one lease, as without the bug, but
re-elected only once its last heartbeat is ``SLOW_FAILOVER_LEASES`` leases old; the election it then makes is the
one the correct scan makes."""

from __future__ import annotations

from typing import Any

import pytest

from system_under_test.controller import ElectMaster, FenceBroker, scan
from system_under_test.controller.scan import SLOW_FAILOVER, SLOW_FAILOVER_LEASES

STEP_MS = 250


def _failover(sim: Any, bugs: frozenset[str]) -> tuple[int, int, list[int]]:
    """Master 1 of {1, 2, 3} stops heartbeating at t0; 2 and 3 keep on.  Returns (ms from t0 to its fencing, ms
    to the election, the elected broker ids)."""
    for _ in range(3):
        sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2, 3])
    t0 = sim.now_ms
    fenced_ms = elected_ms = -1
    elected: list[int] = []
    while sim.now_ms - t0 < 20 * sim.config.lease_timeout_ms and elected_ms < 0:
        sim.advance(STEP_MS)
        sim.heartbeat("bs", 2)
        sim.heartbeat("bs", 3)
        events = scan(sim.state, sim.heartbeats, sim.config, sim.now_ms, bugs=bugs)
        if any(isinstance(e, FenceBroker) and e.broker_id == 1 for e in events):
            fenced_ms = sim.now_ms - t0
        if any(isinstance(e, ElectMaster) for e in events):
            elected_ms = sim.now_ms - t0
            elected = [e.broker_id for e in events if isinstance(e, ElectMaster)]
        if events:
            assert all(r.ok for r in sim.apply_entry(events))
    return fenced_ms, elected_ms, elected


@pytest.mark.parametrize("lease_ms", [1000, 2000])
def test_the_bug_delays_only_the_election(make_sim: Any, lease_ms: int) -> None:
    good = _failover(make_sim(lease_ms=lease_ms), frozenset())
    slow = _failover(make_sim(lease_ms=lease_ms), frozenset({SLOW_FAILOVER}))
    assert good[0] == slow[0] and lease_ms < good[0] <= lease_ms + STEP_MS  # fenced after one lease either way
    assert good[1] == good[0]  # the correct scan fences and elects in one batch
    assert SLOW_FAILOVER_LEASES * lease_ms <= slow[1] <= SLOW_FAILOVER_LEASES * lease_ms + STEP_MS
    assert good[2] == slow[2] == [2]  # the same election, only later


def test_a_master_alive_by_its_lease_is_not_delayed(make_sim: Any) -> None:
    """The bug waits only for a master whose lease ran out; one that is fenced while its lease lives (a controlled
    shutdown, a fence record) is replaced as before."""
    sim = make_sim()
    for _ in range(2):
        sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2])
    epoch = sim.state.broker_epoch("bs", 1)
    assert all(r.ok for r in sim.apply_entry([FenceBroker("c1", "bs", 1, epoch)]))
    events = scan(sim.state, sim.heartbeats, sim.config, sim.now_ms, bugs=frozenset({SLOW_FAILOVER}))
    assert [e.broker_id for e in events if isinstance(e, ElectMaster)] == [2]
