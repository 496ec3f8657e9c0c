"""The node event log (system_under_test/node_events.py) and the controller's applied-event records
(system_under_test/controller/observed.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test import node_events
from system_under_test.controller.events import AlterSyncStateSet, ElectMaster
from system_under_test.controller.observed import applied_event


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    node_events.reset()
    yield
    node_events.reset()


def test_read_after_sequence_number() -> None:
    for i in range(5):
        node_events.record("become-master", master_epoch=i)
    got = node_events.read(2)
    assert [e["seq"] for e in got["events"]] == [3, 4, 5] and got["next"] == 5 and not got["dropped"]
    assert got["boot"] == node_events.BOOT_ID and got["now_ns"] >= got["events"][-1]["mono_ns"]
    assert node_events.read(5)["events"] == [] and node_events.read(5)["next"] == 5
    assert [e["seq"] for e in node_events.read(0, limit=2)["events"]] == [1, 2]


@given(st.integers(0, 3 * node_events.CAPACITY))
def test_dropped_when_the_log_wrapped(n: int) -> None:
    node_events.reset()
    for _ in range(n):
        node_events.record("fenced")
    got = node_events.read(0, limit=10**6)
    assert got["dropped"] == (n > node_events.CAPACITY)
    assert len(got["events"]) == min(n, node_events.CAPACITY)


SET = {"master_id": 1, "master_epoch": 2, "sync_state_set": [1, 2, 3]}


@pytest.mark.parametrize(("event", "after", "change"), [
    (AlterSyncStateSet("c", "b", 1, 2, (1,), 4), {**SET, "sync_state_set": [1]}, "shrink"),
    (AlterSyncStateSet("c", "b", 1, 2, (1, 2, 3), 4), SET, "same"),
    (ElectMaster("c", "b", True, 2, 2, 4), {**SET, "master_id": 2, "master_epoch": 3}, "elect"),
    (ElectMaster("c", "b", False, None, 2, 4), {**SET, "master_id": None, "master_epoch": 3}, "no-master"),
    (ElectMaster("c", "b", True, 4, 2, 4), {**SET, "master_id": 4, "master_epoch": 3}, "elect-unclean"),
], ids=["shrink", "same", "elect", "no-master", "unclean"])
def test_applied_event(event: object, after: dict[str, object], change: str) -> None:
    out = applied_event(event, SET, after, True)
    assert out is not None and out["change"] == change and out["master_epoch"] == after["master_epoch"]
    assert applied_event(event, SET, after, False) is None


def test_expand() -> None:
    before = {**SET, "sync_state_set": [1]}
    out = applied_event(AlterSyncStateSet("c", "b", 1, 2, (1, 2), 4), before, {**SET, "sync_state_set": [1, 2]}, True)
    assert out is not None and out["change"] == "expand" and out["sync_state_set"] == [1, 2]
