"""A replication session is one TCP connection: a slave that dies closes its own connection to the master, not
another slave's that happens to carry the same session number (each broker numbers its sessions itself)."""

from __future__ import annotations

from typing import Any

from system_under_test.sim.cluster import SimCluster, SimConfig


def test_a_killed_slave_closes_only_its_own_replication_session() -> None:
    c = SimCluster(SimConfig(seed=0, seconds=6, faults=()), None)
    w = c.world
    seen: dict[str, Any] = {}

    def crash_a_slave() -> None:
        master = c.master_node()
        assert master is not None
        ha = c.brokers[master].ha
        seen["sessions"] = sorted(s.session for s in ha.slaves.values())
        slaves = sorted(n for n in c.broker_names if n != master)
        seen["victim"], seen["other"] = slaves
        seen["master"] = master
        c.brokers[slaves[0]].crash()

    def look() -> None:
        ha = c.brokers[seen["master"]].ha
        ids = {c.brokers[n].broker_id: n for n in c.broker_names}
        seen["connected"] = {ids[sid]: t.connected for sid, t in ha.trackings.items()}

    w.at(c.main_start_ms + 3000, crash_a_slave)
    w.at(c.main_start_ms + 3100, look)
    c.run()
    assert len(set(seen["sessions"])) == 1, f"both slaves' sessions share a number here: {seen['sessions']}"
    assert seen["connected"] == {seen["victim"]: False, seen["other"]: True}, seen
