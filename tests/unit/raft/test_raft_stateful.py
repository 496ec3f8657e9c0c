"""Hypothesis stateful test: random deliver / drop / tick / propose / crash / restart / partition / compact on a
simulated cluster.  The Cluster raises SafetyViolation on its own checks; the invariants below re-check the core
properties naively (one leader per term, logs match, committed entries never lost)."""

from __future__ import annotations

import random

from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from system_under_test.raft.sim import Cluster
from system_under_test.raft.types import Role

NODE = st.integers(min_value=0, max_value=4)


class RaftCluster(RuleBasedStateMachine):
    c: Cluster

    @initialize(seed=st.integers(min_value=0, max_value=2**32 - 1), n=st.sampled_from([3, 5]))
    def setup(self, seed: int, n: int) -> None:
        self.c = Cluster(n, random.Random(seed), drop_rate=0.0, dup_rate=0.0)
        self.leaders: dict[int, str] = {}

    def _id(self, i: int) -> str:
        return self.c.ids[i % len(self.c.ids)]

    @precondition(lambda self: bool(self.c.net))
    @rule(i=st.integers(min_value=0, max_value=1_000))
    def deliver(self, i: int) -> None:
        self.c.deliver(i % len(self.c.net))

    @precondition(lambda self: bool(self.c.net))
    @rule(i=st.integers(min_value=0, max_value=1_000))
    def drop(self, i: int) -> None:
        del self.c.net[i % len(self.c.net)]

    @precondition(lambda self: bool(self.c.net))
    @rule(i=st.integers(min_value=0, max_value=1_000))
    def duplicate(self, i: int) -> None:
        self.c.net.append(self.c.net[i % len(self.c.net)])

    @rule(i=NODE, n=st.integers(min_value=1, max_value=6))
    def tick(self, i: int, n: int) -> None:
        self.c.tick_node(self._id(i), n)

    @rule(i=NODE)
    def campaign(self, i: int) -> None:
        node = self.c.nodes[self._id(i)]
        if node.core is not None:
            node.core.campaign()
            self.c.process(node.node_id)

    @rule()
    def propose(self) -> None:
        self.c.propose()

    @rule(i=NODE, mid_ready=st.booleans())
    def crash(self, i: int, mid_ready: bool) -> None:
        self.c.crash(self._id(i), mid_ready=mid_ready)

    @rule(i=NODE)
    def restart(self, i: int) -> None:
        self.c.restart(self._id(i))

    @rule(i=NODE)
    def compact(self, i: int) -> None:
        self.c.compact(self._id(i))

    @rule()
    def partition(self) -> None:
        self.c.partition()

    @rule()
    def heal(self) -> None:
        self.c.heal()

    @rule()
    def read(self) -> None:
        self.c.read()

    @invariant()
    def one_leader_per_term(self) -> None:
        for node in self.c.nodes.values():
            core = node.core
            if core is not None and core.role is Role.LEADER:
                assert self.leaders.setdefault(core.term, core.node_id) == core.node_id, (core.term, self.leaders)

    @invariant()
    def live_logs_match_up_to_their_common_commit(self) -> None:
        cores = [n.core for n in self.c.nodes.values() if n.core is not None]
        for a in cores:
            for b in cores:
                if a.node_id >= b.node_id:
                    continue
                lo = max(a.log.first_index, b.log.first_index)
                hi = min(a.commit_index, b.commit_index)
                if lo <= hi:
                    assert a.log.slice(lo, hi + 1) == b.log.slice(lo, hi + 1), (a.describe(), b.describe())

    @invariant()
    def committed_entries_are_durable_on_a_majority(self) -> None:
        c = self.c
        for index, (term, _data, _h) in c.applied.items():
            holders = 0
            for node in c.nodes.values():
                d = node.disk
                base = d.snapshot.index if d.snapshot is not None else 0
                if index <= base or (index - base <= len(d.entries) and d.entries[index - base - 1].term == term):
                    holders += 1
            assert holders * 2 > len(c.ids), f"committed entry {term}/{index} is on only {holders} disks"


TestRaftCluster = RaftCluster.TestCase
TestRaftCluster.settings = settings(max_examples=60, stateful_step_count=80, deadline=None)


class BrokenRaftCluster(RaftCluster):
    """The same machine on a core that may vote twice per term: the checks must catch it.  (Pre-vote is off:
    two concurrent real campaigns in one term are then a few rules away instead of a dozen.)"""

    @initialize(seed=st.integers(min_value=0, max_value=2**32 - 1), n=st.sampled_from([3, 5]))
    def setup(self, seed: int, n: int) -> None:
        self.c = Cluster(n, random.Random(seed), drop_rate=0.0, dup_rate=0.0, bug="double-vote", pre_vote=False,
                         check_quorum=False)
        self.leaders = {}


def test_stateful_machine_finds_a_double_vote_bug() -> None:
    import pytest
    from hypothesis.stateful import run_state_machine_as_test

    from system_under_test.raft.sim import SafetyViolation

    with pytest.raises((SafetyViolation, AssertionError)):
        run_state_machine_as_test(
            BrokenRaftCluster,
            settings=settings(max_examples=300, stateful_step_count=80, deadline=None, database=None,
                              print_blob=False, phases=[Phase.generate], derandomize=True),  # no shrinking needed
        )
