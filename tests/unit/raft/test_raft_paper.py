"""RaftCore against the sentences of the Raft paper (each test names its section), etcd raft_paper_test style.

Single-core tests drive a RaftCore directly with hand-built messages; multi-node tests use the
simulator's Cluster with a lossless network (drop_rate=0) so every delivery is scripted.
"""

from __future__ import annotations

import random

import pytest

from system_under_test.raft.core import TRANSFER_CONTEXT, RaftCore, describe_ready
from system_under_test.raft.progress import ProgressState
from system_under_test.raft.sim import Cluster, SafetyViolation
from system_under_test.raft.types import (
    Entry,
    EntryKind,
    HardState,
    Message,
    MessageType,
    ProposalDropped,
    RaftConfig,
    Ready,
    Role,
    Snapshot,
)

MT = MessageType
IDS = ("n1", "n2", "n3")


def core(node_id: str = "n1", *, voters: tuple[str, ...] = IDS, seed: int = 1, **kw: object) -> RaftCore:
    cfg = RaftConfig(node_id=node_id, voters=voters, **kw)  # type: ignore[arg-type]
    return RaftCore(cfg, random.Random(seed))


def drain(c: RaftCore) -> list[Ready]:
    out = []
    while c.has_ready():
        rd = c.ready()
        c.advance(rd)
        out.append(rd)
    return out


def msgs(c: RaftCore) -> list[Message]:
    return [m for rd in drain(c) for m in rd.messages]


def lossless(n: int = 3, **kw: object) -> Cluster:
    return Cluster(n, random.Random(7), drop_rate=0.0, dup_rate=0.0, **kw)  # type: ignore[arg-type]


def elect(c: Cluster, node_id: str = "n1") -> RaftCore:
    c.core(node_id).campaign()
    c.process(node_id)
    c.stabilize()
    lead = c.core(node_id)
    assert lead.role is Role.LEADER, lead.describe()
    return lead


def make_leader(c: RaftCore) -> None:
    """Drive a lone core through a (pre-)election by answering its vote requests."""
    c.campaign()
    for _ in range(2):
        for m in msgs(c):
            if m.type in (MT.PRE_VOTE, MT.VOTE):
                c.step(Message(MT(m.type + 1), m.dst, m.src, m.term))
    assert c.role is Role.LEADER, c.describe()
    drain(c)


# ---------------------------------------------------------------------------------------------- §5.2
@pytest.mark.parametrize("election_ticks", [3, 5, 10])
def test_5_2_follower_times_out_into_candidate_within_randomized_range(election_ticks: int) -> None:
    starts = set()
    for seed in range(30):
        c = core(seed=seed, election_ticks=election_ticks, pre_vote=False)
        for t in range(1, 2 * election_ticks + 1):
            c.tick()
            if c.role is Role.CANDIDATE:
                starts.add(t)
                break
        assert c.role is Role.CANDIDATE and c.term == 1 and c.vote == "n1"
    assert min(starts) >= election_ticks and max(starts) < 2 * election_ticks
    assert len(starts) > 1, "election timeouts must be randomized"


def test_5_2_candidate_requests_votes_and_persists_own_vote_first() -> None:
    c = core(pre_vote=False)
    c.campaign()
    rd = c.ready()
    assert rd.hard_state == HardState(1, "n1", 0) and rd.must_sync
    assert sorted((m.type, m.dst, m.term) for m in rd.messages) == [(MT.VOTE, "n2", 1), (MT.VOTE, "n3", 1)]


@pytest.mark.parametrize(
    ("voters", "grants", "rejects", "role"),
    [
        (("n1",), (), (), Role.LEADER),
        (IDS, ("n2",), (), Role.LEADER),
        (IDS, (), ("n2",), Role.CANDIDATE),
        (IDS, (), ("n2", "n3"), Role.FOLLOWER),
        (("n1", "n2", "n3", "n4", "n5"), ("n2",), (), Role.CANDIDATE),
        (("n1", "n2", "n3", "n4", "n5"), ("n2", "n5"), ("n3",), Role.LEADER),
        (("n1", "n2", "n3", "n4", "n5"), (), ("n2", "n3", "n4"), Role.FOLLOWER),
    ],
)
def test_5_2_candidate_wins_with_majority(voters: tuple[str, ...], grants: tuple[str, ...],
                                          rejects: tuple[str, ...], role: Role) -> None:
    c = core(voters=voters, pre_vote=False)
    c.campaign()
    for v in grants:
        c.step(Message(MT.VOTE_RESP, v, "n1", 1))
    for v in rejects:
        c.step(Message(MT.VOTE_RESP, v, "n1", 1, reject=True))
    assert c.role is role
    if role is Role.LEADER:
        assert c.log.entry(1).kind is EntryKind.NOOP


def test_5_2_vote_at_most_once_per_term_and_persisted_before_reply() -> None:
    c = core("n2", pre_vote=False, check_quorum=False)
    c.step(Message(MT.VOTE, "n1", "n2", 1))
    rd = c.ready()
    assert rd.hard_state is not None and rd.hard_state.vote == "n1" and rd.must_sync
    assert [(m.type, m.dst, m.reject) for m in rd.messages] == [(MT.VOTE_RESP, "n1", False)]
    c.advance(rd)
    c.step(Message(MT.VOTE, "n3", "n2", 1))
    assert [(m.dst, m.reject) for m in msgs(c)] == [("n3", True)]
    c.step(Message(MT.VOTE, "n1", "n2", 1))  # a retry from the same candidate is granted again
    assert [(m.dst, m.reject) for m in msgs(c)] == [("n1", False)]


def test_5_2_vote_survives_restart() -> None:
    c = core("n2", pre_vote=False, check_quorum=False)
    c.step(Message(MT.VOTE, "n1", "n2", 1))
    hs = drain(c)[0].hard_state
    assert hs is not None
    c2 = RaftCore(c.config, random.Random(2), hard_state=hs)
    c2.step(Message(MT.VOTE, "n3", "n2", 1))
    assert [(m.dst, m.reject) for m in msgs(c2)] == [("n3", True)]


def test_5_2_candidate_returns_to_follower_on_append_from_leader_of_its_term() -> None:
    c = core(pre_vote=False)
    c.campaign()
    drain(c)
    c.step(Message(MT.APPEND, "n2", "n1", 1, log_term=0, index=0))
    assert c.role is Role.FOLLOWER and c.leader == "n2" and c.term == 1


@pytest.mark.parametrize("mtype", [MT.APPEND, MT.HEARTBEAT, MT.VOTE, MT.APPEND_RESP])
def test_5_1_higher_term_turns_leader_into_follower(mtype: MessageType) -> None:
    c = core(voters=("n1", "n2"), pre_vote=False, check_quorum=False)
    make_leader(c)
    c.step(Message(mtype, "n2", "n1", 5))
    assert c.role is Role.FOLLOWER and c.term == 5


def test_5_1_stale_term_message_is_ignored() -> None:
    c = core(pre_vote=False, check_quorum=False)
    c.step(Message(MT.HEARTBEAT, "n2", "n1", 3))
    drain(c)
    c.step(Message(MT.APPEND, "n3", "n1", 2, entries=(Entry(2, 1),)))
    assert c.last_index == 0 and c.leader == "n2" and msgs(c) == []


def test_9_6_pre_vote_does_not_bump_term_of_isolated_node() -> None:
    c = core(pre_vote=True)
    for _ in range(100):
        c.tick()
    drain(c)
    assert c.term == 0 and c.role is Role.PRE_CANDIDATE


def test_9_6_pre_vote_then_real_vote() -> None:
    c = core(pre_vote=True)
    c.campaign()
    sent = msgs(c)
    assert {(m.type, m.term) for m in sent} == {(MT.PRE_VOTE, 1)} and c.term == 0
    c.step(Message(MT.PRE_VOTE_RESP, "n2", "n1", 1))
    assert c.role is Role.CANDIDATE and c.term == 1
    assert {(m.type, m.term) for m in msgs(c)} == {(MT.VOTE, 1)}


def test_leader_stickiness_ignores_votes_while_leader_is_live_except_transfer() -> None:
    c = core("n2", pre_vote=True, check_quorum=True)
    c.step(Message(MT.HEARTBEAT, "n1", "n2", 1))
    drain(c)
    c.step(Message(MT.VOTE, "n3", "n2", 2, log_term=0, index=0))
    assert c.term == 1 and msgs(c) == []
    c.step(Message(MT.PRE_VOTE, "n3", "n2", 2))
    assert msgs(c) == []
    c.step(Message(MT.VOTE, "n3", "n2", 2, context=TRANSFER_CONTEXT))
    assert c.term == 2 and c.vote == "n3"
    assert [(m.type, m.reject) for m in msgs(c)] == [(MT.VOTE_RESP, False)]


def test_check_quorum_leader_steps_down_without_majority_contact() -> None:
    c = core(check_quorum=True, election_ticks=5)
    make_leader(c)
    for _ in range(10):
        c.tick()
    assert c.role is Role.FOLLOWER and c.leader is None


def test_check_quorum_leader_stays_with_majority_contact() -> None:
    c = core(check_quorum=True, election_ticks=5)
    make_leader(c)
    for _ in range(20):
        c.tick()
        c.step(Message(MT.HEARTBEAT_RESP, "n2", "n1", c.term))
    assert c.role is Role.LEADER


# ---------------------------------------------------------------------------------------------- §5.3
def test_5_3_leader_replicates_and_commits_on_majority() -> None:
    cl = lossless()
    lead = elect(cl)
    idx = [lead.propose(b"a"), lead.propose(b"b")]
    cl.process("n1")
    cl.stabilize()
    assert idx == [2, 3]
    for i in cl.ids:
        assert cl.core(i).commit_index == 3 and cl.nodes[i].sm_index == 3
    assert cl.applied[3][1] == b"b"


def test_5_3_commit_needs_majority_not_just_leader() -> None:
    cl = lossless()
    lead = elect(cl)
    cl.crash("n2")
    cl.crash("n3")
    lead.propose(b"x")
    cl.process("n1")
    cl.stabilize()
    assert lead.commit_index == 1 and lead.last_index == 2


def test_5_3_follower_rejects_append_with_mismatched_prev_and_hints() -> None:
    c = core("n2", pre_vote=False, check_quorum=False)
    c.step(Message(MT.APPEND, "n1", "n2", 2, log_term=0, index=0, entries=(Entry(1, 1), Entry(1, 2), Entry(2, 3))))
    drain(c)
    c.step(Message(MT.APPEND, "n1", "n2", 3, log_term=3, index=5, entries=(Entry(3, 6),)))
    (resp,) = msgs(c)
    assert (resp.type, resp.reject, resp.index, resp.reject_hint, resp.log_term) == (MT.APPEND_RESP, True, 5, 3, 2)


def test_5_3_fast_backoff_converges_in_few_round_trips() -> None:
    """A follower with a long divergent suffix is repaired in O(terms) round trips, not O(entries)."""
    cfg = RaftConfig(node_id="n1", voters=("n1", "n2"), pre_vote=False, check_quorum=False, max_batch_entries=100)
    lead = RaftCore(cfg, random.Random(1), hard_state=HardState(3, None, 2),
                    entries=[Entry(1 if i < 3 else 3, i) for i in range(1, 11)])
    follower = core("n2", voters=("n1", "n2"), pre_vote=False, check_quorum=False)
    follower.step(Message(MT.APPEND, "n1", "n2", 2, log_term=0, index=0,
                          entries=tuple(Entry(1 if i < 3 else 2, i) for i in range(1, 30))))
    drain(follower)
    lead.campaign()
    trips = 0
    pending = msgs(lead)
    while pending and trips < 20:
        trips += 1
        for m in pending:
            follower.step(m)
        pending = []
        for m in msgs(follower):
            lead.step(m)
        pending = msgs(lead)
    assert follower.last_index == lead.last_index == 11 and follower.log.term(3) == 3
    assert trips <= 4, f"took {trips} round trips for a 27-entry divergent suffix"


def test_5_3_batching_limits_entries_per_append() -> None:
    cl = lossless(max_batch_entries=2, max_inflight=64)
    lead = elect(cl)
    cl.crash("n3")
    for i in range(9):
        lead.propose(b"%d" % i)
    cl.process("n1")
    cl.stabilize()
    cl.restart("n3")
    sizes = []
    for _ in range(200):
        if not cl.net:
            cl.tick_node("n1")
            if cl.core("n3").last_index == lead.last_index:
                break
            continue
        m = cl.net.pop(0)
        cl.net.append(m)
        if m.type is MT.APPEND and m.dst == "n3" and m.entries:
            sizes.append(len(m.entries))
        cl.deliver(len(cl.net) - 1)
    assert cl.core("n3").last_index == lead.last_index == 10
    assert sizes and max(sizes) == 2


def test_5_3_pipelining_bounded_by_max_inflight() -> None:
    cl = lossless(max_batch_entries=1, max_inflight=3)
    lead = elect(cl)
    cl.net.clear()
    for i in range(10):
        lead.propose(b"%d" % i)
    cl.process("n1")
    to_n2 = [m for m in cl.net if m.type is MT.APPEND and m.dst == "n2" and m.entries]
    assert len(to_n2) == 3
    pr = lead.progress("n2")
    assert pr is not None and pr.state is ProgressState.REPLICATE and pr.is_paused()
    cl.stabilize()
    assert cl.core("n2").last_index == lead.last_index and lead.commit_index == lead.last_index


def test_5_3_lost_appends_are_repaired_after_heartbeat() -> None:
    cl = lossless()
    lead = elect(cl)
    lead.propose(b"a")
    cl.process("n1")
    cl.drop_matching(lambda m: m.type is MT.APPEND)
    for _ in range(3):
        cl.tick_node("n1")
        cl.stabilize()
    assert all(cl.core(i).commit_index == 2 for i in cl.ids)


# ---------------------------------------------------------------------------------------------- §5.4
@pytest.mark.parametrize(
    ("cand_last_term", "cand_last_index", "granted"),
    [(1, 3, False), (2, 1, False), (2, 2, True), (2, 5, True), (3, 1, True)],
)
def test_5_4_1_voter_denies_candidate_with_less_up_to_date_log(cand_last_term: int, cand_last_index: int,
                                                                granted: bool) -> None:
    c = core("n2", pre_vote=False, check_quorum=False)
    c.step(Message(MT.APPEND, "n1", "n2", 2, log_term=0, index=0, entries=(Entry(1, 1), Entry(2, 2))))
    c.step(Message(MT.HEARTBEAT, "n1", "n2", 2, commit=0))
    drain(c)
    c2 = RaftCore(c.config, random.Random(3), hard_state=HardState(2, None, 0), entries=c.log.slice(1, 3))
    c2.step(Message(MT.VOTE, "n3", "n2", 3, log_term=cand_last_term, index=cand_last_index))
    (resp,) = msgs(c2)
    assert resp.reject is not granted


def _figure8(bug: str) -> Cluster:
    """Raft paper Figure 8 on three nodes: an old-term entry replicated to a majority is not committed."""
    votes = (MT.VOTE, MT.VOTE_RESP)
    cl = Cluster(3, random.Random(1), bug=bug, drop_rate=0, dup_rate=0, max_batch_entries=1, pre_vote=False,
                 check_quorum=False)
    a, b, c = cl.ids

    def win(node: str) -> None:
        for _ in range(3):
            if cl.core(node).role is not Role.LEADER:
                cl.core(node).campaign()
                cl.process(node)
                cl.deliver_matching(lambda m: m.type in votes)
        assert cl.core(node).role is Role.LEADER

    win(a)
    cl.stabilize()
    cl.core(a).propose(b"x")  # x@2 (term 1) only on a
    cl.process(a)
    cl.net.clear()
    cl.crash(a)
    win(b)  # term 2; b's NOOP@2 stays on b
    cl.net.clear()
    cl.crash(b)
    cl.restart(a)
    win(a)  # term 3: a re-replicates x@2 to c, but c never gets a's NOOP@3
    cl.deliver_matching(lambda m: m.type in (MT.APPEND, MT.APPEND_RESP) and not (
        cl.core(c).last_index >= 2 and any(e.index == 3 for e in m.entries)))
    assert cl.core(c).log.term(2) == 1
    cl.net.clear()
    cl.crash(a)
    cl.restart(b)
    win(b)  # term 4 with c's vote: b's log (last term 2) beats c's (last term 1)
    cl.stabilize()
    return cl


def test_5_4_2_figure8_old_term_entry_is_not_committed_by_counting() -> None:
    cl = _figure8("none")
    assert cl.applied[2][0] == 2  # b's NOOP won index 2; x was never committed, so nothing was lost


def test_5_4_2_figure8_checker_catches_commit_by_counting() -> None:
    with pytest.raises(SafetyViolation, match="leader completeness"):
        _figure8("old-term-commit")


def test_5_4_2_new_leader_commits_previous_term_entries_via_noop() -> None:
    cl = lossless(pre_vote=False, check_quorum=False)  # no leader stickiness: n3 may vote right away
    lead = elect(cl)
    lead.propose(b"a")
    cl.process("n1")
    cl.drop_matching(lambda m: m.type is MT.APPEND and m.dst == "n3")
    cl.deliver_matching(lambda m: m.type is MT.APPEND and m.dst == "n2")  # n2 has it, ack lost
    cl.net.clear()
    cl.crash("n1")
    assert cl.core("n2").commit_index == 1
    new = elect(cl, "n2")
    assert new.commit_index == 3 and new.log.entry(3).kind is EntryKind.NOOP
    assert cl.applied[2][1] == b"a"


# ---------------------------------------------------------------------------------------------- §6.4 read index
def test_6_4_read_index_waits_for_own_term_commit_and_heartbeat_quorum() -> None:
    c = core(pre_vote=False, check_quorum=False)
    make_leader(c)
    c.read_index(b"r1")
    assert all(not rd.read_states for rd in drain(c))  # NOOP not committed yet: request waits
    c.step(Message(MT.APPEND_RESP, "n2", "n1", 1, index=1))
    out = msgs(c)
    hbs = [m for m in out if m.type is MT.HEARTBEAT and m.context == b"r1"]
    assert {m.dst for m in hbs} == {"n2", "n3"}
    c.step(Message(MT.HEARTBEAT_RESP, "n2", "n1", 1, context=b"r1"))
    reads = [rs for rd in drain(c) for rs in rd.read_states]
    assert [(r.index, r.context) for r in reads] == [(1, b"r1")]


def test_6_4_read_index_on_follower_raises_with_leader_hint() -> None:
    c = core("n2")
    c.step(Message(MT.HEARTBEAT, "n1", "n2", 1))
    with pytest.raises(ProposalDropped) as exc:
        c.read_index(b"r")
    assert exc.value.leader == "n1"


def test_6_4_stale_leader_never_serves_read() -> None:
    cl = lossless()
    lead = elect(cl)
    cl.cut = {(a, b) for a in cl.ids for b in cl.ids if a != b and "n1" in (a, b)}  # isolate the leader
    lead.read_index(b"stale")
    cl.process("n1")
    for _ in range(30):
        cl.tick_node("n1")
        cl.stabilize()
    assert cl.stats["reads_served"] == 0 and lead.role is not Role.LEADER  # check_quorum deposed it
    cl.cut.clear()
    new = cl.leader() or elect(cl, "n2")
    new.read_index(b"fresh")
    cl.process(new.node_id)
    cl.stabilize()
    assert cl.stats["reads_served"] == 1


# ---------------------------------------------------------------------------------------------- §7 snapshots
def test_7_lagging_follower_receives_snapshot() -> None:
    cl = lossless()
    lead = elect(cl)
    cl.crash("n3")
    for i in range(6):
        lead.propose(b"%d" % i)
    cl.process("n1")
    cl.stabilize()
    cl.compact("n1")
    assert lead.log.snapshot_index == 7
    cl.restart("n3")
    for _ in range(5):
        cl.tick_node("n1")
        cl.stabilize()
    assert cl.stats["snapshots_sent"] >= 1
    n3 = cl.nodes["n3"]
    assert n3.disk.snapshot is not None and n3.disk.snapshot.index == 7
    assert n3.sm_index == lead.applied_index and n3.sm_hash == cl.nodes["n1"].sm_hash


def test_7_follower_installs_snapshot_newer_than_commit() -> None:
    c = core("n2", pre_vote=False, check_quorum=False)
    c.step(Message(MT.APPEND, "n1", "n2", 1, log_term=0, index=0, entries=(Entry(1, 1), Entry(1, 2))))
    drain(c)
    snap = Snapshot(10, 1, b"state", IDS)
    c.step(Message(MT.SNAPSHOT, "n1", "n2", 1, snapshot=snap))
    rd = c.ready()
    assert rd.snapshot == snap and rd.must_sync and rd.committed_entries == ()
    assert [(m.type, m.index) for m in rd.messages] == [(MT.APPEND_RESP, 10)]
    c.advance(rd)
    assert (c.log.first_index, c.last_index, c.commit_index, c.applied_index) == (11, 10, 10, 10)
    c.step(Message(MT.SNAPSHOT, "n1", "n2", 1, snapshot=Snapshot(5, 1, b"old", IDS)))  # older: ignored
    rd2 = c.ready()
    assert rd2.snapshot is None and [(m.type, m.index) for m in rd2.messages] == [(MT.APPEND_RESP, 10)]


@pytest.mark.parametrize("index", [0, 5])
def test_7_compact_out_of_range_raises(index: int) -> None:
    c = core(voters=("n1",))
    c.campaign()
    drain(c)
    with pytest.raises(ValueError, match=rf"compact\({index}\) on n1: expected snapshot index 0 < index <= applied 1"):
        c.compact(index, b"")


# ---------------------------------------------------------------------------------------------- transfer (thesis §3.10)
def test_3_10_leadership_transfer() -> None:
    cl = lossless()
    lead = elect(cl)
    lead.transfer_leadership("n3")
    with pytest.raises(ProposalDropped, match="transferring leadership to n3"):
        lead.propose(b"x")
    cl.process("n1")
    cl.stabilize()
    assert cl.core("n3").role is Role.LEADER and lead.role is Role.FOLLOWER


def test_3_10_transfer_to_dead_target_aborts_after_election_timeout() -> None:
    cl = lossless(check_quorum=False)
    lead = elect(cl)
    cl.crash("n3")
    lead.transfer_leadership("n3")
    assert lead.transferee == "n3"
    for _ in range(5):
        cl.tick_node("n1")
        cl.stabilize()
    assert lead.transferee is None and lead.role is Role.LEADER
    assert lead.propose(b"ok") > 0


def test_transfer_rejects_non_voter() -> None:
    c = core(voters=("n1",))
    c.campaign()
    with pytest.raises(ValueError, match="not a voter"):
        c.transfer_leadership("n9")


# ---------------------------------------------------------------------------------------------- shell contract
def test_propose_on_follower_raises_with_leader_hint() -> None:
    c = core("n2")
    c.step(Message(MT.HEARTBEAT, "n3", "n2", 4))
    with pytest.raises(ProposalDropped, match="n2 is follower at term 4") as exc:
        c.propose(b"x")
    assert exc.value.leader == "n3"


def test_misaddressed_and_unknown_sender_messages_are_ignored() -> None:
    c = core("n2")
    c.step(Message(MT.HEARTBEAT, "n1", "n3", 9))
    c.step(Message(MT.HEARTBEAT, "x9", "n2", 9))
    assert c.term == 0 and not c.has_ready()


def test_ready_twice_without_advance_raises() -> None:
    c = core()
    c.campaign()
    c.ready()
    with pytest.raises(RuntimeError, match="before advance"):
        c.ready()


def test_restart_from_persisted_state_keeps_committed_entries() -> None:
    cl = lossless()
    lead = elect(cl)
    for i in range(3):
        lead.propose(b"%d" % i)
    cl.process("n1")
    cl.stabilize()
    for i in cl.ids:
        cl.crash(i)
    for i in cl.ids:
        cl.restart(i)
        assert cl.core(i).last_index == 4
    new = elect(cl, "n2")
    assert new.commit_index == 5 and cl.nodes["n2"].sm_index == 5


def test_single_node_cluster_commits_immediately() -> None:
    c = core(voters=("n1",))
    c.campaign()
    assert c.role is Role.LEADER
    idx = c.propose(b"x")
    rd = c.ready()
    assert [e.index for e in rd.committed_entries] == [1, idx] and rd.must_sync
    assert "committed: 1/1 NOOP, 1/2 NORMAL 1B" in describe_ready(rd)
    c.advance(rd)
    c.read_index(b"r")
    assert [(r.index, r.context) for r in c.ready().read_states] == [(2, b"r")]


def test_status_reports_progress_on_leader() -> None:
    cl = lossless()
    lead = elect(cl)
    st = lead.status()
    assert st["role"] == "leader" and st["commit"] == 1 and set(st["progress"]) == set(cl.ids)
