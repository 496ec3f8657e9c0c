"""Feedback abstraction (nemesis/coverage.py): labels, windows per fault and role, ordered sets, coverage curve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis.coverage import DEPTH, coverage_of, label, next_coverage, points, summary

DATA = Path(__file__).resolve().parents[1] / "testdata" / "observed"


def ev(t: int, kind: str, role: str = "broker", **fields: object) -> dict[str, object]:
    return {"time": t, "kind": kind, "role": role, **fields}


def fault(t: int, f: str, value: object = None) -> dict[str, object]:
    return {"time": t, "process": "nemesis", "type": "invoke", "f": f, "value": value}


@pytest.mark.parametrize(("event", "expected"), [
    (ev(0, "apply", event="ElectMaster", change="elect"), "apply:ElectMaster:elect"),
    (ev(0, "apply", event="RegisterBroker"), "apply:RegisterBroker"),
    (ev(0, "sync-state-set", change="shrink", members=[1, 2]), "sync-state-set:shrink"),
    (ev(0, "sync-state-set", change="shrink", members=[1]), "sync-state-set:shrink:master-only"),
    (ev(0, "apply", event="AlterSyncStateSet", change="shrink", sync_state_set=[2]),
     "apply:AlterSyncStateSet:shrink:master-only"),
    (ev(0, "client-outcome", role="client", f="send", outcome="info"), "client-outcome:send:info"),
    (ev(0, "failpoint-fired", name="raft.before_apply"), "failpoint-fired:raft.before_apply"),
    (ev(0, "become-master", master_epoch=3), "become-master"),
], ids=["elect", "register", "shrink", "shrink-to-master", "apply-shrink-to-master", "client", "failpoint", "role"])
def test_label(event: dict[str, object], expected: str) -> None:
    assert label(event) == expected


def test_windows_are_per_fault_and_role_and_ordered() -> None:
    events = [ev(5, "sync-state-set", change="shrink"), ev(6, "become-master"),
              ev(7, "sync-state-set", change="shrink"),
              ev(8, "apply", role="controller", event="ElectMaster", change="elect"),
              ev(15, "become-master")]
    faults = [fault(1, "start-partition", {"kind": "isolate-master-from-slaves"}), fault(10, "kill", "masters")]
    got = [p for _, p in points(events, faults)]
    assert got == [
        ("start-partition:isolate-master-from-slaves", "broker", ("sync-state-set:shrink",)),
        ("start-partition:isolate-master-from-slaves", "broker", ("sync-state-set:shrink", "become-master")),
        ("start-partition:isolate-master-from-slaves", "controller", ("apply:ElectMaster:elect",)),
        ("kill", "broker", ("become-master",)),
    ]


def test_undo_steps_do_not_open_windows() -> None:
    events = [ev(5, "become-master"), ev(12, "become-slave")]
    faults = [fault(1, "kill", "masters"), fault(10, "start")]
    assert [p for _, p in points(events, faults)][-1] == ("kill", "broker", ("become-master", "become-slave"))


def test_order_matters() -> None:
    a = coverage_of([ev(1, "become-master"), ev(2, "fenced")], [])
    b = coverage_of([ev(1, "fenced"), ev(2, "become-master")], [])
    assert a.reached != b.reached and a.count == b.count == 2


def test_recorded_stream() -> None:
    """A real guided run's stream (unsafe settings, partition + kill): coverage grows and is reproducible."""
    events = [json.loads(line) for line in (DATA / "unclean-guided-events.jsonl").read_text().splitlines()]
    ops = [json.loads(line) for line in (DATA / "unclean-guided-nemesis.jsonl").read_text().splitlines()]
    cov = coverage_of(events, ops)
    assert cov.count > 50
    assert [n for _, n in cov.curve] == list(range(1, cov.count + 1))
    kinds = {p[0] for p in cov.reached}
    assert {"start", "kill"} <= kinds and any(k.startswith("start-partition:") for k in kinds)
    assert coverage_of(list(reversed(events)), ops) == cov  # order of arrival does not matter, times do
    assert summary(cov, start_ns=0, events=len(events))["points"] == cov.count


_events = st.lists(st.builds(ev, st.integers(0, 100), st.sampled_from(["become-master", "fenced", "truncate",
                                                                       "become-slave", "registered", "unfenced",
                                                                       "raft-leader"]),
                             st.sampled_from(["broker", "controller", "client"])), max_size=40)
_faults = st.lists(st.builds(fault, st.integers(0, 100), st.sampled_from(["kill", "start", "start-partition"])),
                   max_size=8)


@settings(max_examples=200, deadline=None)
@given(_events, _events, _faults)
def test_properties(a: list[dict[str, object]], b: list[dict[str, object]], faults: list[dict[str, object]]) -> None:
    whole = coverage_of(a + b, faults)
    # idempotent: feeding the same points again adds nothing
    assert next_coverage(whole, points(a + b, faults)) == whole
    # accumulating (what the guided policy does as events arrive) keeps what was reached and reaches the whole
    grown = next_coverage(coverage_of(a, faults), points(a + b, faults))
    assert grown.reached >= whole.reached | coverage_of(a, faults).reached
    # monotone in time: events that arrive after all of ``a`` never reach fewer points.  (Not for events in the
    # middle: a point is the chain of event kinds after a fault, and an event slipped into a chain replaces it --
    # hypothesis found a=[truncate@0, become-master@0, become-master@2], b=[truncate@1]: 3 points, then 2.)
    later = [{**e, "time": int(e["time"]) + 1 + max((int(x["time"]) for x in a), default=0)} for e in b]
    assert coverage_of(a, faults).count <= coverage_of(a + later, faults).count
    # bounded depth, increasing curve, distinct labels per point
    assert all(len(p[2]) <= DEPTH for p in whole.reached)
    assert [n for _, n in whole.curve] == list(range(1, whole.count + 1))
    assert all(len(set(p[2])) == len(p[2]) for p in whole.reached)
