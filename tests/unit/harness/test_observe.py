"""Observation (harness/observe.py): placing node events on the run's time axis; client outcome changes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.observe import ClientOutcomes, place


def test_place_uses_the_node_clock_age() -> None:
    e = place({"seq": 3, "mono_ns": 1_000, "kind": "fenced"}, node="b1", role="broker", recv_ns=50_000,
              node_now_ns=11_000)
    assert e == {"seq": 3, "kind": "fenced", "time": 40_000, "node": "b1", "role": "broker"}


@given(st.integers(0, 10**12), st.integers(0, 10**12), st.integers(0, 10**12))
def test_place_never_after_receipt_nor_before_zero(mono: int, now: int, recv: int) -> None:
    t = place({"mono_ns": mono, "kind": "k"}, node="n", role="r", recv_ns=recv, node_now_ns=now)["time"]
    assert 0 <= t <= recv


def test_client_outcome_changes() -> None:
    c = ClientOutcomes()
    recs = [{"process": 0, "type": "invoke", "f": "send", "time": 1},
            {"process": 0, "type": "ok", "f": "send", "time": 2},
            {"process": 1, "type": "ok", "f": "send", "time": 3},
            {"process": "nemesis", "type": "info", "f": "kill", "time": 4},
            {"process": 1, "type": "info", "f": "send", "time": 5},
            {"process": 2, "type": "ok", "f": "poll", "time": 6}]
    got = [(e["f"], e["was"], e["outcome"], e["time"]) for e in c.feed(recs)]
    assert got == [("send", None, "ok", 2), ("send", "ok", "info", 5), ("poll", None, "ok", 6)]
    assert c.feed([{"process": 1, "type": "info", "f": "send", "time": 7}]) == []


def test_history_tap_is_drained_in_order_and_only_once(tmp_path: Any) -> None:
    """With the history writer's tap, the observer reads the records it was handed (not the file), each once."""
    from harness.history_writer import HistoryWriter
    from harness.observe import Observer

    writer = HistoryWriter(tmp_path / "history.jsonl", client_threads=2, keep=False)
    tap: list[dict[str, Any]] = []
    writer.tap = tap
    obs = Observer({}, object(), [], now_ns=writer.now_ns, run_dir=tmp_path, history_tap=tap)
    writer.append({"type": "invoke", "process": 0, "f": "send", "value": 1})
    writer.append({"type": "ok", "process": 0, "f": "send", "value": 1})
    first = obs._tail_history()
    writer.append({"type": "invoke", "process": 1, "f": "poll", "value": None})
    assert [(r["index"], r["type"]) for r in first] == [(0, "invoke"), (1, "ok")]
    assert [r["index"] for r in obs._tail_history()] == [2]
    assert obs._tail_history() == [] and tap == []
    writer.close()
