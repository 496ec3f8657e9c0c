"""The packet nemesis's tc tree (pure): all traffic or only to chosen destinations, netem as a leaf."""

from __future__ import annotations

from nemesis.packet_behavior import tc_tree


def test_whole_node_shaping_makes_the_shaped_class_the_default() -> None:
    cmds = tc_tree(["delay", "50ms", "0ms"], None, [])
    assert cmds[0][-2:] == ["default", "2"]
    assert ["qdisc", "add", "dev", "eth0", "parent", "1:2", "handle", "20:", "netem", "delay", "50ms", "0ms"] in cmds
    assert not any(c[0] == "filter" for c in cmds)


def test_pairs_shape_only_matching_destinations_at_the_rate() -> None:
    cmds = tc_tree(None, "1mbit", ["10.0.0.2", "10.0.0.3"])
    assert cmds[0][-2:] == ["default", "1"]  # everything else stays unshaped
    assert cmds[2][-2:] == ["rate", "1mbit"]
    filters = [c for c in cmds if c[0] == "filter"]
    assert [f[f.index("dst") + 1] for f in filters] == ["10.0.0.2/32", "10.0.0.3/32"]
    assert all(f[-1] == "1:2" for f in filters)
    assert not any("netem" in c for c in cmds)
