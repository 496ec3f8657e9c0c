"""``role-reapplied``: a broker becomes master of a master epoch at most once per incarnation (pure checker)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from checker.invariants import check_invariants


def became(node: str, epoch: int, t: int) -> dict[str, Any]:
    return {"node": node, "event": "became-master", "broker_name": "bs", "master_epoch": epoch, "broker_id": 1,
            "time": t}


def registered(node: str, t: int, broker_epoch: int) -> dict[str, Any]:
    return {"node": node, "event": "broker-epoch", "broker_name": "bs", "broker_id": 1, "broker_epoch": broker_epoch,
            "time": t}


# A broker's life: incarnations, each a registration and then rising master epochs it became master of.
lives = st.lists(st.lists(st.integers(1, 50), unique=True, max_size=5).map(sorted), min_size=1, max_size=4)


def events_of(life: list[list[int]]) -> list[dict[str, Any]]:
    out, t = [], 0
    for i, epochs in enumerate(life):
        t += 10
        out.append(registered("b1", t, i + 1))
        for e in epochs:
            t += 10
            out.append(became("b1", e, t))
    return out


@given(lives)
def test_distinct_epochs_per_incarnation_are_valid(life: list[list[int]]) -> None:
    """Restarts may re-learn an epoch: the same epoch in two incarnations is not a violation."""
    r = check_invariants([], events_of(life))
    assert "role-reapplied" not in r.counts


@given(lives.filter(lambda life: any(life)), st.data())
def test_an_epoch_taken_twice_in_one_incarnation_is_reported_once(life: list[list[int]], data: st.DataObject) -> None:
    events = events_of(life)
    masters = [i for i, e in enumerate(events) if e["event"] == "became-master"]
    i = data.draw(st.sampled_from(masters))
    again = {**events[i], "time": events[i]["time"] + 1}
    events.insert(i + 1, again)
    events.insert(i + 2, {**again, "time": again["time"] + 1})  # a third time: still one report
    r = check_invariants([], events)
    assert r.counts.get("role-reapplied") == 1


def observed(kind: str, node: str, t: int, **fields: Any) -> dict[str, Any]:
    """An event as a real run's observer writes it to events.jsonl (harness.observe)."""
    return {"kind": kind, "node": node, "role": "broker", "time": t, **fields}


def test_a_real_runs_observed_events_show_a_reapplied_role() -> None:
    """The shapes of a real run's events.jsonl: a registration names the broker set of later role events."""
    from checker.invariants import check_cluster_events

    events = [
        observed("registered", "b1-1", 10, broker_name="broker-0", broker_id=1, broker_epoch=4, fenced=True),
        observed("become-master", "b1-1", 20, master_epoch=1, was="NONE", via="elect"),
        observed("become-slave", "b1-2", 25, master_epoch=1, master_id=1, was="NONE", via="notify"),
        observed("become-master", "b1-1", 1020, master_epoch=1, was="MASTER", via="poll"),
        {"kind": "client-outcome", "node": None, "role": "client", "time": 1030, "f": "send", "outcome": "ok"},
    ]
    r = check_cluster_events(events)
    assert r.valid is False and r.counts == {"role-reapplied": 1}
    restarted = [*events[:2], observed("node-restart", "b1-1", 500),
                 observed("registered", "b1-1", 510, broker_name="broker-0", broker_id=1, broker_epoch=9),
                 events[3]]
    assert check_cluster_events(restarted).valid is True
    assert check_cluster_events(events[1:]).valid is True  # no registration seen: the broker set is unknown
