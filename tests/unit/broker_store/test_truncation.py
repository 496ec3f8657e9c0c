"""Slave truncation point (truncation.py): reference EpochFileCacheTest samples, the six cases of the
RIP-44 seed's "Truncation example analysis", and a property test over simulated epoch histories."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.store import EpochEntry, EpochHistory, explain_consistent_point, find_consistent_point


def E(*pairs: tuple[int, int]) -> list[EpochEntry]:
    return [EpochEntry(e, s) for e, s in pairs]


# (id, local entries, local max, master entries, master max, expected point)
REFERENCE_SAMPLES = [
    ("last-epoch-start-differs", E((1, 100), (2, 300), (3, 500)), 700, E((1, 100), (2, 300), (3, 450)), 700, 450),
    ("same-starts-ends-700-600", E((1, 100), (2, 300), (3, 500)), 700, E((1, 100), (2, 300), (3, 500)), 600, 600),
    ("no-common-epoch-start", E((1, 100), (2, 300), (3, 500)), 700, E((1, 200), (2, 400), (3, 600)), 700, -1),
    (
        "local-ahead-by-one-epoch",
        E((1, 100), (2, 300), (3, 500), (4, 700)),
        800,
        E((1, 100), (2, 300), (3, 500)),
        700,
        700,
    ),
]

# The seed's "Truncation example analysis" (its figures are not in the text; each history below is the
# scenario the sentence describes).
SEED_CASES = [
    # (1) A was master of epoch0 up to 1000; B (at 900) became master of epoch1 at 900. A rejoins.
    ("1-old-master-cut-to-900", E((0, 0)), 1000, E((0, 0), (1, 900)), 1300, 900),
    # (2) A lost 900-1000 by async flush; B became master of epoch1 at 1000. A's point is its own end.
    ("2-lost-unflushed-tail", E((0, 0)), 900, E((0, 0), (1, 1000)), 1100, 900),
    # (3) the slave already holds all of epoch1 (master moved on to epoch2 at 1200): nothing to cut.
    ("3-no-truncation-needed", E((0, 0), (1, 1000)), 1200, E((0, 0), (1, 1000), (2, 1200)), 1500, 1200),
    # (4) B mastered epoch1 from 900 to 1000, then A (unclean) became master of epoch2 at 1000; B rejoins:
    # epoch1 is unknown to A, so B falls back to epoch0 and is cut to 900.
    ("4-skip-unknown-epoch", E((0, 0), (1, 900)), 1000, E((0, 0), (2, 1000)), 1200, 900),
    # (5) epoch1 master B wrote to 1000, C copied to 900, A to 800; A became master of epoch2 at 800:
    # both B and C are cut to 800.
    ("5-B-cut-to-800", E((0, 0), (1, 500)), 1000, E((0, 0), (1, 500), (2, 800)), 1100, 800),
    ("5-C-cut-to-800", E((0, 0), (1, 500)), 900, E((0, 0), (1, 500), (2, 800)), 1100, 800),
    # (6) A mastered epoch0 to 1200; B copied 1000 and became master of epoch1 at 1000: A cut to 1000.
    ("6-old-master-cut-to-1000", E((0, 0)), 1200, E((0, 0), (1, 1000)), 1300, 1000),
]


@pytest.mark.parametrize(
    "local,local_max,master,master_max,expected",
    [c[1:] for c in REFERENCE_SAMPLES + SEED_CASES],
    ids=[c[0] for c in REFERENCE_SAMPLES + SEED_CASES],
)
def test_consistent_point(
    local: list[EpochEntry], local_max: int, master: list[EpochEntry], master_max: int, expected: int
) -> None:
    assert find_consistent_point(local, local_max, master, master_max) == expected
    why = explain_consistent_point(local, local_max, master, master_max)
    assert why.offset == expected and (why.epoch is None) == (expected == -1) and why.reason


def test_empty_local_history_has_no_point() -> None:
    assert find_consistent_point([], 0, E((1, 0)), 100) == -1


def test_unordered_entries_rejected() -> None:
    with pytest.raises(ValueError, match="strictly increase"):
        find_consistent_point(E((2, 0), (1, 10)), 20, E((1, 0)), 10)


# -- property: simulated clusters ------------------------------------------------------------------


@dataclass
class Node:
    log: list[tuple[int, int]] = field(default_factory=list)  # one token (epoch, offset) per offset unit
    hist: EpochHistory = field(default_factory=EpochHistory)


steps_st = st.lists(
    st.one_of(
        st.tuples(st.just("elect"), st.integers(0, 2)),
        st.tuples(st.just("write"), st.integers(1, 5)),
        st.tuples(st.just("replicate"), st.integers(0, 2), st.integers(0, 8)),
        st.tuples(st.just("lose"), st.integers(0, 2), st.integers(1, 4)),
    ),
    max_size=40,
)


def sync(slave: Node, master: Node, count: int) -> int:
    """One replication session: truncate to the consistent point, then copy ``count`` units."""
    if slave.hist.entries:
        p = find_consistent_point(slave.hist.entries, len(slave.log), master.hist.entries, len(master.log))
    else:
        p = 0  # empty epoch history: copy from scratch
    if p < 0:
        return p
    del slave.log[p:]
    slave.hist = slave.hist.suffix_truncated(p)
    assert slave.log == master.log[:p], f"slave not a prefix of master after truncation to {p}"
    for o in range(p, min(len(master.log), p + count)):
        rng = master.hist.find_by_offset(o)
        assert rng is not None
        if slave.hist.last_epoch < rng.epoch:
            slave.hist = slave.hist.appended(rng.epoch, rng.start_offset)
        slave.log.append(master.log[o])
    return p


@settings(max_examples=300, deadline=None)
@given(steps_st)
def test_after_truncation_slave_log_is_a_prefix_of_master(steps: list[tuple]) -> None:
    nodes = [Node(), Node(), Node()]
    master: int | None = None
    epoch = 0
    for step in steps:
        if step[0] == "elect":
            epoch += 1
            n = nodes[step[1]]
            n.hist = n.hist.suffix_truncated(len(n.log)).appended(epoch, len(n.log))
            master = step[1]
        elif step[0] == "write" and master is not None:
            m = nodes[master]
            m.log += [(epoch, len(m.log) + i) for i in range(step[1])]
        elif step[0] == "replicate" and master is not None and step[1] != master:
            sync(nodes[step[1]], nodes[master], step[2])
        elif step[0] == "lose":
            n = nodes[step[1]]
            del n.log[max(0, len(n.log) - step[2]) :]
            n.hist = n.hist.beyond_removed(len(n.log))
            if master == step[1]:
                master = None  # a restarted node writes again only after a new election
    if master is None:
        return
    for i, n in enumerate(nodes):
        if i != master:
            p = sync(n, nodes[master], 10**6)
            if p >= 0:
                assert n.log == nodes[master].log, "after a full sync the slave equals the master"
