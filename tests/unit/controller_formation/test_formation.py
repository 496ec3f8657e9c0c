"""Cluster formation (seeds/cluster-join-protocol.md): the decision table and the signature files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.controller.formation import (
    MemberStatus,
    SignatureError,
    StoreSignatures,
    StoreState,
    Verdict,
    decide,
)

VOTERS = ("c1", "c2", "c3")
OPTS = {"cluster_name": "x", "lease_timeout_ms": 2000}


def st_(node: str, state: str = "empty", cid: str | None = None, sid: str | None = None, *, active: bool = False,
        opts: dict[str, object] | None = None) -> MemberStatus:
    return MemberStatus(node, StoreState(state), cid, sid, dict(opts or OPTS), f"new-{node}", active)


def peers(*ms: MemberStatus) -> dict[str, MemberStatus]:
    return {m.node_id: m for m in ms}


@pytest.mark.parametrize(
    "me, others, wait_for, verdict, fragment",
    [
        # Wait for N (seed: "Wait for N initial members")
        (st_("c1"), [], 3, Verdict.WAIT, "have 1 of 3"),
        (st_("c1"), [st_("c2")], 2, Verdict.ACTIVATE, "new cluster (id proposed by c1)"),
        # All empty: everybody adopts the smallest node id's proposal
        (st_("c2"), [st_("c1"), st_("c3")], 3, Verdict.ACTIVATE, "proposed by c1"),
        # Options must be identical
        (st_("c1"), [st_("c2", opts={"cluster_name": "y", "lease_timeout_ms": 2000})], 2, Verdict.ABORT,
         "option 'cluster_name' differs: c1 has 'x', c2 has 'y'"),
        # Foreign store
        (st_("c1", "dirty", "A"), [st_("c2", "clean", "B", "s")], 2, Verdict.ABORT, "different clusters"),
        # Restart after orderly shutdown
        (st_("c1", "clean", "A", "s1"), [st_("c2", "clean", "A", "s1"), st_("c3", "empty")], 3, Verdict.ACTIVATE,
         "restart of an existing cluster"),
        # Clean stores with different final signatures
        (st_("c1", "clean", "A", "s1"), [st_("c2", "clean", "A", "s2")], 2, Verdict.ABORT, "disagree on the final"),
        # Total failure: all dirty -> manual recovery
        (st_("c1", "dirty", "A"), [st_("c2", "dirty", "A"), st_("c3", "dirty", "A")], 3, Verdict.ABORT,
         "manual recovery needed"),
        # Dirty member + a clean one: recover from the clean store
        (st_("c1", "dirty", "A"), [st_("c2", "clean", "A", "s"), st_("c3", "dirty", "A")], 3, Verdict.ACTIVATE,
         "restart"),
        # Joining an active cluster: empty store adopts, matching store rejoins, foreign store aborts
        (st_("c3"), [st_("c1", "dirty", "A", active=True)], 3, Verdict.ACTIVATE, "joining active member c1"),
        (st_("c3", "dirty", "A"), [st_("c1", "dirty", "A", active=True)], 3, Verdict.ACTIVATE, "joining"),
        (st_("c3", "dirty", "B"), [st_("c1", "dirty", "A", active=True)], 3, Verdict.ABORT, "different clusters"),
        # A stranger
        (st_("c1"), [st_("zz")], 2, Verdict.ABORT, "not one of the voters"),
    ],
    ids=["wait", "wait-for-2", "all-empty", "option-mismatch", "foreign-store", "clean-restart",
         "final-sig-mismatch", "all-dirty", "dirty-plus-clean", "join-empty", "join-dirty", "join-foreign",
         "stranger"],
)
def test_decision_table(me: MemberStatus, others: list[MemberStatus], wait_for: int, verdict: Verdict,
                        fragment: str) -> None:
    d = decide(me, peers(*others), voters=VOTERS, wait_for=wait_for)
    assert d.verdict is verdict, d
    assert fragment in d.reason
    if verdict is Verdict.ACTIVATE:
        assert d.cluster_id


def test_dirty_recovery_raft_accepts_total_failure() -> None:
    me = st_("c1", "dirty", "A")
    d = decide(me, peers(st_("c2", "dirty", "A"), st_("c3", "dirty", "A")), voters=VOTERS, wait_for=3,
               dirty_recovery="raft")
    assert d.verdict is Verdict.ACTIVATE and d.cluster_id == "A"


@given(st.permutations(["c1", "c2", "c3"]))
def test_every_member_of_a_new_cluster_picks_the_same_id(order: list[str]) -> None:
    statuses = {n: st_(n) for n in order}
    ids = {decide(statuses[n], statuses, voters=VOTERS, wait_for=3).cluster_id for n in order}
    assert ids == {"new-c1"}


def test_status_wire_round_trip_and_validation() -> None:
    m = st_("c1", "clean", "A", "s1")
    assert MemberStatus.from_wire(m.to_wire()) == m
    with pytest.raises(ValueError, match="empty store cannot carry"):
        st_("c1", "empty", "A")
    with pytest.raises(ValueError, match="malformed formation status"):
        MemberStatus.from_wire({"node_id": "c1"})


def test_signature_files(tmp_path: Path) -> None:
    sig = StoreSignatures(tmp_path / "d")
    assert sig.state() is StoreState.EMPTY
    sig.write_cluster("A", "x", 1)
    assert sig.state() is StoreState.DIRTY and sig.cluster_id() == "A"
    with pytest.raises(SignatureError, match="already belongs to cluster 'A'"):
        sig.write_cluster("B", "x", 2)
    sig.mark_clean("s1", 10, 2, 3)
    assert sig.state() is StoreState.CLEAN and sig.clean() == {"shutdown_id": "s1", "last_index": 10, "term": 2,
                                                              "time_ms": 3}
    sig.mark_dirty()
    assert sig.state() is StoreState.DIRTY
    p = tmp_path / "d" / "cluster.sig"
    p.write_bytes(p.read_bytes().replace(b"A", b"Z"))
    with pytest.raises(SignatureError, match="CRC mismatch"):
        sig.cluster_id()
