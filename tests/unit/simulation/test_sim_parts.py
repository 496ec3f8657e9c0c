"""The simulator's own parts: the store's crash semantics, the network's links, the config's validation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.sim import SimConfig
from system_under_test.sim.network import Network, Reply, SimNode
from system_under_test.sim.store import SimStore
from system_under_test.sim.world import World

OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("confirm"), st.integers(0, 100), st.just(0)),
    st.tuples(st.just("crash"), st.integers(0, 10_000), st.just(0)),
), max_size=40)


@settings(max_examples=150, deadline=None)
@given(OPS, st.booleans())
def test_store_keeps_synced_data_and_recovers_a_prefix(ops: list[tuple[str, int, int]], sync: bool) -> None:
    """Whatever happens: a crash keeps every fsynced byte, the recovered log is a prefix of the old one ending on
    a record boundary, and a queue shows exactly the records that end at or below the confirm offset."""
    s = SimStore(sync=sync)
    n = 0
    for op, a, b in ops:
        if op == "put":
            values = [f"v{n + i}" for i in range(b)]
            n += b
            s.put("t", a, values, 1000)
        elif op == "flush":
            s.flush()
        elif op == "confirm":
            s.set_confirm_offset(s.max_offset * a // 100 if s.max_offset else 0)
        else:
            before, synced = bytes(s.log), s.synced
            s.crash(a)
            s.open()
            assert bytes(s.log) == before[: len(s.log)] and len(s.log) >= min(synced, len(before)) - 0
            assert s.synced <= len(s.log)
            assert len(s.log) == 0 or s.items[-1].end == len(s.log)
        for qid in range(3):
            visible = [it.value for it in s.get("t", qid, 0, 10_000)]
            want = [it.value for it in s.items if it.queue_id == qid and it.end <= s.confirm]
            assert visible == want
            assert [it.queue_offset for it in s.get("t", qid, 0, 10_000)] == list(range(len(visible)))


def test_store_cuts_a_torn_tail_and_counts_it() -> None:
    s = SimStore(sync=False)
    s.put("t", 0, ["a", "b"], 1)
    s.flush()
    s.put("t", 0, ["c"], 2)
    s.crash(5)  # five bytes of the third frame: torn
    s.open()
    assert [it.value for it in s.items] == ["a", "b"] and s.torn_tails == 1
    assert s.next_qo[("t", 0)] == 2


@pytest.mark.parametrize("mode", ["truncate-tail", "bitflip-tail"])
def test_a_damaged_tail_below_the_confirm_offset_is_a_durable_loss_and_the_confirm_offset_follows_the_log(
        mode: str) -> None:
    s = SimStore(sync=True)
    s.epochs.start_epoch(1, 0)
    s.put("t", 0, ["a", "b"], 1)
    s.epochs.start_epoch(2, s.max_offset)
    last = s.put("t", 0, ["c"], 1)[0]
    s.set_confirm_offset(s.max_offset)
    s.flush()  # the checkpoint holds the confirm offset: the whole log
    s.crash(0)
    assert s.damage_tail(mode) == last.phys + last.size // 2
    s.open()
    assert s.max_offset == last.phys and s.torn_tails == 1
    assert s.confirm == last.phys, "the checkpoint's confirm offset is clamped to the recovered log"
    assert [it.value for it in s.get("t", 0, 0, 10)] == ["a", "b"]
    assert s.durable_loss is not None and s.durable_loss.durable_offset == last.end
    assert s.durable_loss.end == last.phys and s.durable_loss.epoch == 2
    s.open()  # a later restart keeps the claim until it is cleared
    assert s.durable_loss is not None and s.durable_loss.durable_offset == last.end
    s.clear_durable_loss()
    assert s.durable_loss is None


def test_an_ordinary_crash_loses_nothing_durable() -> None:
    s = SimStore(sync=False)
    s.put("t", 0, ["a", "b"], 1)
    s.flush()
    s.put("t", 0, ["c"], 2)
    s.crash(5)
    s.open()
    assert s.durable_loss is None and s.damage_tail("truncate-tail") is not None
    empty = SimStore(sync=True)
    assert empty.damage_tail("bitflip-tail") is None


def test_store_truncation_drops_every_part_at_a_boundary() -> None:
    s = SimStore(sync=True)
    s.epochs.start_epoch(1, 0)
    first = s.put("t", 0, ["a", "b"], 1)
    s.epochs.start_epoch(2, s.max_offset)
    s.put("t", 0, ["c"], 1)
    s.set_confirm_offset(s.max_offset)
    s.truncate(first[-1].end)
    assert [it.value for it in s.get("t", 0, 0, 10)] == ["a", "b"]
    assert [e.epoch for e in s.epochs.entries] == [1] and s.confirm == first[-1].end
    with pytest.raises(ValueError, match="record boundary"):
        s.truncate(3)


class _Echo(SimNode):
    def __init__(self, name: str, world: World, net: Network) -> None:
        super().__init__(name, world, net)
        self.got: list[object] = []

    def on_start(self) -> None: ...

    def on_crash(self) -> None: ...

    def on_message(self, src: str, msg: object) -> None:
        self.got.append(msg)


def _pair() -> tuple[World, Network, _Echo, _Echo]:
    w = World(1)
    net = Network(w)
    a, b = _Echo("a", w, net), _Echo("b", w, net)
    for n in (a, b):
        net.add(n)
        n.start()
    return w, net, a, b


def test_rpc_channel_keeps_order_and_a_cut_drops() -> None:
    w, net, a, b = _pair()
    for i in range(50):
        a.send("b", i)
    w.run_until(1000)
    assert b.got == list(range(50))
    net.cuts.add(frozenset(("a", "b")))
    a.send("b", "lost")
    w.run_until(2000)
    assert b.got[-1] == 49


def test_a_paused_node_gets_its_messages_on_resume_and_a_crash_forgets_calls() -> None:
    w, _net, a, b = _pair()
    b.pause()
    a.send("b", "x")
    w.run_until(100)
    assert b.got == []
    b.resume()
    assert b.got == ["x"]
    answers: list[Reply | None] = []
    a.call("b", 1, {}, answers.append, timeout_ms=50)
    a.crash()
    a.start()
    w.run_until(500)
    assert answers == []  # the reply and the timeout belonged to the dead incarnation


@pytest.mark.parametrize(("kw", "fragment"), [
    ({"bugs": frozenset({"no-such-bug"})}, "SimConfig.bugs"),
    ({"faults": ("earthquake",)}, "SimConfig.faults"),
    ({"seconds": 0}, "SimConfig.seconds"),
    ({"threads": 0}, "threads"),
    ({"workloads": ("queue", "bank")}, "SimConfig.workloads"),
    ({"workloads": ("membership",)}, "SimConfig.workloads"),
])
def test_config_refuses_bad_values(kw: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        SimConfig(**kw)  # type: ignore[arg-type]
