"""``broker-id-leaked``: a broker whose claim the controller applied must hold that id from then on (pure)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from checker.invariants import check_invariants


def _ev(node: str, event: str, bid: int, t: int, **kw: Any) -> dict[str, Any]:
    return {"node": node, "event": event, "broker_name": "rc", "broker_id": bid, "time": t, **kw}


def test_an_applied_claim_then_another_id_is_a_leak() -> None:
    res = check_invariants([], [_ev("x1/disk1", "own-id-applied", 4, 10, register_code="a"),
                                _ev("x1/disk1", "broker-id", 5, 20)])
    assert res.valid is False and list(res.anomalies) == ["broker-id-leaked"]
    a = res.anomalies["broker-id-leaked"][0]
    assert a.expected == {"broker_id": 4} and a.observed == {"broker_id": 5}


def test_a_new_disk_is_another_broker() -> None:
    assert check_invariants([], [_ev("x1/disk1", "own-id-applied", 4, 10), _ev("x1/disk2", "broker-id", 5, 20),
                                 _ev("x1/disk3", "own-id-applied", 7, 10), _ev("x1/disk3", "broker-id", 7, 30)]).valid


@given(st.lists(st.integers(1, 3), min_size=1, max_size=6))
def test_the_applied_id_held_at_every_restart_is_valid_and_any_other_is_not(later: list[int]) -> None:
    events = [_ev("n", "own-id-applied", 1, 0)] + [_ev("n", "broker-id", b, i + 1) for i, b in enumerate(later)]
    res = check_invariants([], events)
    assert (res.valid is True) == all(b == 1 for b in later)
    if res.valid is False:
        assert {x.observed["broker_id"] for x in res.anomalies["broker-id-leaked"]} == set(later) - {1}
