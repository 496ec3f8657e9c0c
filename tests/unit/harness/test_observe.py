"""Observation (harness/observe.py): placing node events on the run's time axis; client outcome changes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.observe import ClientOutcomes, Observer, place, primary_events
from nemesis.coverage import label


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


def test_primary_events_name_each_change_and_the_count() -> None:
    got = primary_events(frozenset({"m1"}), frozenset({"m2", "m3"}), recv_ns=9, role="member")
    assert [(e["kind"], e["node"], e.get("change"), e.get("count")) for e in got] == [
        ("primary-change", "m1", "lost", None), ("primary-change", "m2", "gained", None),
        ("primary-change", "m3", "gained", None), ("primaries", None, None, "several")]
    assert {e["time"] for e in got} == {9} and {e["role"] for e in got} == {"member"}
    assert [label(e) for e in got] == ["primary-change:lost", "primary-change:gained", "primary-change:gained",
                                       "primaries:several"]
    assert primary_events(frozenset({"m1"}), frozenset({"m1"}), recv_ns=1, role="member") == []
    assert [label(e) for e in primary_events(frozenset({"m1"}), frozenset({"m2"}), recv_ns=1, role="member")] == [
        "primary-change:lost", "primary-change:gained"]  # one leader to another: the count did not change


_NODES = st.frozensets(st.sampled_from(["m1", "m2", "m3", "m4", "m5"]))


@given(st.lists(_NODES, min_size=1, max_size=8))
def test_primary_events_replayed_give_back_the_primaries(seq: list[frozenset[str]]) -> None:
    """Folding the events of a sequence of observations over the empty set yields the last observation, and the
    last ``primaries`` event (if any) states its count."""
    was: frozenset[str] = frozenset()
    held: set[str] = set()
    counts = []
    for now in seq:
        for e in primary_events(was, now, recv_ns=0, role="member"):
            if e["kind"] == "primary-change":
                assert (e["node"] in held) == (e["change"] == "lost")
                (held.discard if e["change"] == "lost" else held.add)(e["node"])
            else:
                counts.append(e["count"])
        was = now
    assert held == set(seq[-1])
    expected = "none" if not seq[-1] else "one" if len(seq[-1]) == 1 else "several"
    assert counts[-1] == expected if counts else expected == "none"


class _Leaders:
    """A system that only says who leads (no admin events): the answers it gives, one per poll."""

    def __init__(self, answers: list[list[str]]) -> None:
        self.answers = answers

    async def primaries(self, test: dict[str, Any]) -> list[str]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_observer_watches_the_primaries_of_a_system_without_event_reports(tmp_path: Any) -> None:
    import asyncio

    async def go() -> list[dict[str, Any]]:
        clock = iter(range(10, 10_000, 10))
        obs = Observer({}, _Leaders([[], ["m1"], ["m1"], ["m2", "m1"]]), ["m1", "m2"], now_ns=lambda: next(clock),
                       run_dir=tmp_path, interval_s=0.0)
        assert not obs.admin and obs.watch_primaries
        obs._fh = open(obs.path, "a", encoding="utf-8")  # noqa: SIM115 -- as start() does, without its loops
        for _ in range(4):
            await obs.poll_once()
        obs._fh.close()
        return obs.events

    events = asyncio.run(go())
    assert [label(e) for e in events] == ["primary-change:gained", "primaries:one", "primary-change:gained",
                                          "primaries:several"]
    assert [e["node"] for e in events if e["kind"] == "primary-change"] == ["m1", "m2"]
    assert (tmp_path / "events.jsonl").read_text().count("\n") == 4
