"""The simulator logs both ends of every lease renewal on one exact time axis, and the ``lease-outlives-controller``
invariant reads them: silent on the design, loud on the broker that counts its lease from the reply
(``lease-renewed-at-reply`` of the mutation bench; docs/anomalies.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.sim import SimConfig, run
from system_under_test.sim import broker as sim_broker
from system_under_test.sim.network import Network, SimNode
from system_under_test.sim.world import World
from systems.splitbrain.sim.check import check_run

# A clock's life: (world ms until the next rate change, the new rate).
rate_changes = st.lists(st.tuples(st.integers(1, 5000), st.sampled_from((0.5, 0.8, 1.0, 1.25, 2.0))), max_size=6)


class _Clock(SimNode):
    def on_start(self) -> None:
        pass

    def on_crash(self) -> None:
        pass

    def on_message(self, src: str, msg: object) -> None:
        pass


@given(rate_changes, st.integers(1, 3000))
def test_world_ms_at_places_a_reading_of_the_present_rate_no_later_than_it_was_made(
        changes: list[tuple[int, float]], tail: int) -> None:
    """Since the clock's last change, each reading maps back to no later than the world ms it was first read, and
    no earlier than the ms before (the inverse of a rounded-down clock); a reading below the one at the change is
    not placed.  A reset to rate 1 is the world's clock itself."""
    world = World(0)
    node = _Clock("n", world, Network(world))
    for d, rate in changes:
        world.now_ms += d
        node.set_clock_rate(rate)
        if rate == 1.0:
            assert node.now_ms() == world.now_ms
    since = node.clock_since
    first_at: dict[int, int] = {}  # reading -> the first world ms it was read
    for t in range(since, since + tail + 1):
        world.now_ms = t
        first_at.setdefault(node.now_ms(), t)
    for reading, t in first_at.items():
        placed = node.world_ms_at(reading)
        assert placed is not None and t - 1 < placed <= t, (reading, t, placed)
    assert node.world_ms_at(min(first_at) - 1) is None


def test_every_renewal_of_the_design_counts_from_no_later_than_its_grant() -> None:
    r = run(SimConfig(seed=7, seconds=10))
    grants = {e["heartbeat"]: e["time"] for e in r.node_events if e["event"] == "lease-granted"}
    renewals = [e for e in r.node_events if e["event"] == "lease-renewed"]
    paired = [e for e in renewals if e["heartbeat"] in grants]
    assert len(paired) > 50, "the run must renew leases for the check to mean anything"
    assert all(e["lease_from"] <= grants[e["heartbeat"]] for e in paired)
    assert check_run(r)["invariants"].valid is True


def test_a_broker_counting_its_lease_from_the_reply_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation bench's ``lease-renewed-at-reply``, applied in memory: the reply's arrival as the renewal."""
    def at_reply(last_renew_ms: int, sent_ms: int, now_ms: int) -> int | None:
        return None if sent_ms > now_ms else now_ms

    monkeypatch.setattr(sim_broker, "renewed_at", at_reply)
    res = check_run(run(SimConfig(seed=7, seconds=10)))["invariants"]
    assert res.valid is False
    assert set(res.counts) == {"lease-outlives-controller"}
    for a in res.anomalies["lease-outlives-controller"]:
        assert a.observed["overlap_ms"] > 0 and a.observed["renewals"] >= 1
