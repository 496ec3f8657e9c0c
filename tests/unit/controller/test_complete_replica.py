"""Electing past a SyncStateSet whose member lost durable records (docs/broker.md, Lost durable records).

A member whose store lost durable records reports, in its heartbeats, how far its log had been durable (``D``)
and the master epoch of that last durable record (``E``).  ``elect_complete_replica`` may then elect a replica
outside the SyncStateSet whose last epoch is ``E`` and whose log reaches ``D``: it holds everything acknowledged.
Anything less -- a shorter log, another epoch, a truncated log the ranked pair still remembers, a replica that
lost data itself, a claim without its epoch -- elects nobody, and the set stays without a master.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.controller import (
    BrokerHeartbeatManager,
    HeartbeatInfo,
    LiveInfo,
    candidate_rank,
    elect_complete_replica,
    holds_claim,
)
from system_under_test.protocol.codes import ResponseCode


def info(broker_id: int, master_epoch: int, max_offset: int, *, reported: tuple[int, int] | None = None,
         lost: tuple[int | None, int | None] = (None, None), prio: int = 5) -> LiveInfo:
    rep_epoch, rep_max = reported if reported is not None else (master_epoch, max_offset)
    return LiveInfo("bs", broker_id, "", 1, master_epoch, max_offset, max_offset, prio, 1000, 0,
                    reported_master_epoch=rep_epoch, reported_max_offset=rep_max,
                    lost_durable_offset=lost[0], lost_durable_epoch=lost[1])


DAMAGED = info(1, 3, 5152, lost=(5211, 3))  # the run's master after corrupt-file: durable to 5211 in epoch 3


@pytest.mark.parametrize(("case", "infos", "alive", "expected"), [
    ("caught_up_replica", {1: DAMAGED, 2: info(2, 3, 5211)}, {2}, 2),
    ("beyond_the_claim", {1: DAMAGED, 2: info(2, 3, 6000)}, {2}, 2),
    # the unmutated control's run (20261127T214240.663Z): the slaves had 4444 and 4385 of 5211
    ("run_slaves_behind", {1: DAMAGED, 2: info(2, 3, 4444), 3: info(3, 3, 4385)}, {2, 3}, None),
    ("one_byte_short", {1: DAMAGED, 2: info(2, 3, 5210)}, {2}, None),
    ("older_epoch", {1: DAMAGED, 2: info(2, 2, 9000)}, {2}, None),
    ("newer_epoch", {1: DAMAGED, 2: info(2, 4, 9000)}, {2}, None),
    ("truncated_since", {1: DAMAGED, 2: info(2, 3, 6000, reported=(3, 4000))}, {2}, None),
    ("reported_other_epoch", {1: DAMAGED, 2: info(2, 3, 6000, reported=(4, 6000))}, {2}, None),
    ("not_electable", {1: DAMAGED, 2: info(2, 3, 6000)}, set(), None),
    ("lost_data_itself", {1: DAMAGED, 2: info(2, 3, 6000, lost=(7000, 3))}, {2}, None),
    ("claim_without_epoch", {1: info(1, 3, 5152, lost=(5211, None)), 2: info(2, 3, 6000)}, {2}, None),
    ("no_claim", {1: info(1, 3, 5152), 2: info(2, 3, 6000)}, {2}, None),
    ("no_live_info", {1: DAMAGED}, {2}, None),
    ("best_ranked", {1: DAMAGED, 2: info(2, 3, 5300), 3: info(3, 3, 5400)}, {2, 3}, 3),
    ("priority_then_id", {1: DAMAGED, 2: info(2, 3, 5300, prio=1), 3: info(3, 3, 5300, prio=1)}, {2, 3}, 2),
    ("every_claim_must_hold", {1: DAMAGED, 4: info(4, 3, 5000, lost=(5500, 3)), 2: info(2, 3, 5300)}, {2}, None),
    ("claims_in_two_epochs", {1: DAMAGED, 4: info(4, 2, 100, lost=(200, 2)), 2: info(2, 3, 9000)}, {2}, None),
], ids=lambda v: v if isinstance(v, str) else "")
def test_elect_complete_replica(case: str, infos: dict[int, LiveInfo], alive: set[int], expected: int | None) -> None:
    sss = [i for i in infos if infos[i].lost_durable_offset is not None or i == 1]
    got = elect_complete_replica(sss, [1, 2, 3, 4], lambda i: i in alive, infos.get)
    assert got == expected, case


def test_claims_come_from_sync_state_set_members_only() -> None:
    """A replica outside the SyncStateSet that lost data bounds nothing: its claim is no evidence."""
    infos = {1: info(1, 3, 5000), 2: info(2, 3, 6000), 3: info(3, 3, 100, lost=(200, 3))}
    assert elect_complete_replica([1], [1, 2, 3], lambda i: i == 2, infos.get) is None


def claim_infos() -> Any:
    entry = st.tuples(st.integers(0, 3), st.integers(0, 50), st.integers(0, 3), st.integers(0, 50),
                      st.one_of(st.none(), st.tuples(st.integers(0, 50), st.one_of(st.none(), st.integers(0, 3)))),
                      st.integers(0, 2))
    return st.dictionaries(st.integers(1, 6), entry, min_size=1, max_size=6)


@given(claim_infos(), st.data())
def test_elected_replica_holds_every_claim_and_is_the_best_that_does(raw: dict[int, Any], data: st.DataObject) -> None:
    """Differential: against the naive definition (alive, no claim of its own, every SyncStateSet member's claim
    met by both its ranked and its last reported pair; the best candidate_rank among those)."""
    infos = {i: info(i, e, m, reported=(re, rm), lost=lost or (None, None), prio=p)
             for i, (e, m, re, rm, lost, p) in raw.items()}
    ids = sorted(infos)
    sss = data.draw(st.sets(st.sampled_from(ids), min_size=1))
    alive = data.draw(st.sets(st.sampled_from(ids)))
    got = elect_complete_replica(sss, ids, lambda i: i in alive, infos.get)
    claims = [(infos[m].lost_durable_offset, infos[m].lost_durable_epoch) for m in sss
              if infos[m].lost_durable_offset is not None and infos[m].lost_durable_epoch is not None]

    def ok(i: int) -> bool:
        r = infos[i]
        return bool(claims) and i in alive and r.lost_durable_offset is None and all(
            r.master_epoch == e and r.reported_master_epoch == e and r.max_offset >= d and r.reported_max_offset >= d
            for d, e in claims)

    fit = [i for i in ids if ok(i)]
    assert (got is None) == (not fit)
    if got is not None:
        assert ok(got) and all(holds_claim(infos[got], d, e) for d, e in claims)
        assert all(candidate_rank(got, infos[got]) <= candidate_rank(i, infos[i]) for i in fit)


def test_heartbeat_record_keeps_the_last_report_and_the_claim() -> None:
    hb = BrokerHeartbeatManager()
    key = ("bs", 2)
    hb.on_heartbeat(key, HeartbeatInfo("a", 7, 3, 6000, 6000), 0)
    rec = hb.on_heartbeat(key, HeartbeatInfo("a", 7, 3, 4000, 4000), 10)  # truncated by a handshake
    assert (rec.master_epoch, rec.max_offset) == (3, 6000), "the ranked pair never goes down"
    assert (rec.reported_master_epoch, rec.reported_max_offset) == (3, 4000)
    assert not holds_claim(rec, 5000, 3)
    rec = hb.on_heartbeat(key, HeartbeatInfo("a", 7, 3, 4000, 4000, lost_durable_offset=5000, lost_durable_epoch=3),
                          20)
    assert (rec.lost_durable_offset, rec.lost_durable_epoch) == (5000, 3) and "LOST-DURABLE-TO=5000" in rec.describe()
    rec = hb.touch(key, 1500, 30)
    assert (rec.lost_durable_offset, rec.reported_max_offset, rec.lease_timeout_ms) == (5000, 4000, 1500)
    rec = hb.on_heartbeat(key, HeartbeatInfo("a", 7, 3, 5000, 5000), 40)  # refilled: the claim is gone
    assert rec.lost_durable_offset is None and rec.lost_durable_epoch is None


# ---- the leader's scan, through the requests brokers send ----------------------------------------
def _shrunk_set_with_dead_master(sim: Any, slave_max: int) -> None:
    """Brokers 1-3; 1 master of epoch 1, the SyncStateSet shrunk to {1}; 1 dies; the slaves' logs end in epoch 1
    at ``slave_max``; the scan fences 1 and clears the master (nobody in the set is electable)."""
    for _ in range(3):
        sim.join("bs")
    sim.elect("bs", 1)
    sim.alter("bs", 1, [1, 2, 3])
    sim.alter("bs", 1, [1])
    sim.advance(2_500)
    for i in (2, 3):
        sim.heartbeat("bs", i, master_epoch=1, max_offset=slave_max, confirm_offset=slave_max)
    sim.scan()
    bs = sim.set_of()
    assert (bs.master_id, bs.master_epoch, bs.sync_state_set) == (None, 2, (1,))


def _damaged_master_returns(sim: Any, durable_offset: int, end: int) -> None:
    code, header, _ = sim.register("bs", 1, "inc-bs-1-again")
    assert code == ResponseCode.SUCCESS, header
    code, header, _ = sim.heartbeat("bs", 1, master_epoch=1, max_offset=end, confirm_offset=end, want_fence=True,
                                    lost_durable_offset=durable_offset, lost_durable_epoch=1)
    assert code == ResponseCode.SUCCESS and header["fenced"] is True, header


def test_scan_elects_a_replica_that_holds_what_the_damaged_member_had(sim: Any) -> None:
    _shrunk_set_with_dead_master(sim, slave_max=5211)
    assert sim.scan() == [], "no claim yet: the damaged member has not come back"
    _damaged_master_returns(sim, durable_offset=5211, end=5152)
    sim.scan()
    bs = sim.set_of()
    assert (bs.master_id, bs.master_epoch, bs.sync_state_set) == (2, 3, (2,))
    assert sim.scan() == []


def test_scan_keeps_the_set_without_master_when_nobody_holds_it(sim: Any) -> None:
    """The unmutated control's run: the only member lost its last durable record and the slaves are behind;
    electing any replica would drop acknowledged sends, so nobody is elected."""
    _shrunk_set_with_dead_master(sim, slave_max=4444)
    _damaged_master_returns(sim, durable_offset=5211, end=5152)
    assert sim.scan() == []
    assert sim.set_of().master_id is None
    code, _, _ = sim.elect("bs", 2, broker_epoch=sim.state.broker_epoch("bs", 2))
    assert code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
