"""``lease-outlives-controller``: a broker's own lease never counts from later than the controller leader's record
of the heartbeat that renewed it (pure checker; docs/anomalies.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checker.invariants import ObservationError, check_invariants

MS = 1_000_000


def granted(hb: str, t: int) -> dict[str, Any]:
    return {"node": "c1", "event": "lease-granted", "broker_name": "bs", "broker_id": 1, "heartbeat": hb, "time": t}


def renewed(node: str, hb: str, t: int, lease_from: int) -> dict[str, Any]:
    return {"node": node, "event": "lease-renewed", "broker_name": "bs", "broker_id": 1, "heartbeat": hb,
            "controller": "c1", "lease_from": lease_from, "time": t}


# One broker's acknowledged heartbeats: (gap since the previous send, send -> grant, grant -> reply read), in ms.
beats = st.lists(st.tuples(st.integers(1, 500), st.integers(0, 3000), st.integers(0, 3000)), min_size=1, max_size=30)


def life(node: str, plan: list[tuple[int, int, int]], *, at_reply: bool = False) -> list[dict[str, Any]]:
    """The events of ``node``'s heartbeats under ``plan``: the broker counts its lease from the send (the design),
    or, ``at_reply``, from when it read the reply (the mutant ``lease-renewed-at-reply``).  A renewal is logged
    only when the lease moved, as the simulator logs it."""
    out, sent, last = [], 0, -1
    for i, (gap, to_grant, to_reply) in enumerate(plan):
        sent += gap
        hb = f"{node}#{i}"
        grant = sent + to_grant
        read = grant + to_reply
        out.append(granted(hb, grant * MS))
        start = read if at_reply else sent
        if start > last:
            out.append(renewed(node, hb, read * MS, start * MS))
            last = start
    return out


@given(beats, beats, st.randoms(use_true_random=False))
def test_leases_counted_from_the_send_are_valid_in_any_order(a: list[tuple[int, int, int]],
                                                             b: list[tuple[int, int, int]], rnd: Any) -> None:
    events = life("b1", a) + life("b2", b)
    rnd.shuffle(events)  # the check pairs by heartbeat, not by position
    r = check_invariants([], events)
    assert r.valid is True, r.anomalies


@given(beats)
def test_a_lease_counted_from_a_late_reply_is_reported_once_per_node(plan: list[tuple[int, int, int]]) -> None:
    events = life("b1", plan, at_reply=True)
    late = [(e["lease_from"] - g["time"]) for e in events if e["event"] == "lease-renewed"
            for g in events if g["event"] == "lease-granted" and g["heartbeat"] == e["heartbeat"]
            and e["lease_from"] > g["time"]]
    r = check_invariants([], events)
    if not late:  # every reply was read the moment it was granted: nothing outlives anything
        assert r.valid is True
        return
    assert r.counts == {"lease-outlives-controller": 1}
    [a] = r.anomalies["lease-outlives-controller"]
    assert a.observed["renewals"] == len(late)
    assert a.observed["max_overlap_ms"] == max(late) / MS
    assert a.observed["overlap_ms"] == late[0] / MS
    assert a.observed["node"] == "b1"


def test_a_lease_counted_from_the_grant_itself_is_valid_and_one_ns_later_is_not() -> None:
    assert check_invariants([], [granted("b1#1", 100 * MS), renewed("b1", "b1#1", 105 * MS, 100 * MS)]).valid is True
    r = check_invariants([], [granted("b1#1", 100 * MS), renewed("b1", "b1#1", 105 * MS, 100 * MS + 1)])
    assert r.counts == {"lease-outlives-controller": 1}


def test_two_brokers_with_stretched_leases_are_two_anomalies() -> None:
    events = [granted("b1#1", 10 * MS), renewed("b1", "b1#1", 20 * MS, 20 * MS),
              granted("b2#1", 10 * MS), renewed("b2", "b2#1", 30 * MS, 30 * MS)]
    r = check_invariants([], events)
    assert sorted(a.observed["node"] for a in r.anomalies["lease-outlives-controller"]) == ["b1", "b2"]


def test_a_renewal_without_its_grant_is_not_judged() -> None:
    """The controller's log lost it (or another controller answered): no moment to compare with."""
    r = check_invariants([], [granted("b1#1", 10 * MS), renewed("b1", "b1#2", 50 * MS, 50 * MS)])
    assert r.valid is True


def test_a_mistyped_heartbeat_names_the_field() -> None:
    with pytest.raises(ObservationError, match="'heartbeat' must be a string"):
        check_invariants([], [{**granted("b1#1", 10), "heartbeat": 7}])
    with pytest.raises(ObservationError, match="'lease_from' must be an int"):
        check_invariants([], [{**renewed("b1", "b1#1", 10, 5), "lease_from": "soon"}])
