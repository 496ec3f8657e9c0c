"""The simulated ``fsync`` fault (``start-disk`` ``slow-fsync`` / ``eio-fsync``): an append's fsync takes simulated
time, during which its bytes lie above the stable offset, and a failed fsync rolls the append back through the
commit log's own rule (``broker/store/durability.py``) and answers the send STORE_ERROR -- recorded ``info``, as the
real client records a non-definite code -- and the run stays valid."""

from __future__ import annotations

import pytest

from checker.compose import compose
from system_under_test.sim import FAULT_KINDS, SimConfig, run
from system_under_test.sim.playback import plan
from system_under_test.sim.store import SimStore
from systems.splitbrain.sim.check import check_run, replay_command

NAMES = ("c1", "c2", "c3", "b1-1", "b1-2", "b1-3")


def test_an_append_whose_fsync_fails_is_rolled_back_and_was_never_stable() -> None:
    s = SimStore(sync=True)
    s.put("t", 0, ["a"], 0)
    end = s.max_offset
    assert (s.synced, s.durable, s.stable_offset) == (end, end, end)
    items = s.write_put("t", 0, ["b", "c"], 1)
    plan_ = s.sync_plan()
    assert plan_ is not None and plan_.fsync and plan_.target == s.max_offset
    assert s.stable_offset == end, "written but not fsynced: above the stable offset, so never replicated"
    s.finish_sync(plan_, ok=False)
    assert (s.synced, s.durable) == (end, end), "a failed fsync publishes nothing new"
    s.rollback(items[0].phys)
    assert s.max_offset == end and [it.value for it in s.items] == ["a"]
    assert s.write_put("t", 0, ["d"], 2)[0].queue_offset == 1, "the undone records' queue offsets are given again"


def test_a_crash_keeps_what_an_fsync_covered_not_what_was_published() -> None:
    s = SimStore(sync=True)
    s.put("t", 0, ["a", "b"], 0)
    s.write_put("t", 0, ["c"], 1)
    before = s.max_offset
    s.crash(0)
    assert s.max_offset == s.durable < before
    s.open()
    assert s.durable_loss is None, "the store published only what its fsync covered"


@pytest.mark.parametrize(("seed", "fault"), [(0, "eio-fsync"), (1, "slow-fsync"), (2, "eio-fsync")])
def test_a_failing_or_slow_fsync_keeps_the_run_valid(seed: int, fault: str) -> None:
    steps = [{"at_s": 3.0, "f": "start-disk", "value": {"targets": "b1-1,b1-2,b1-3", "fault": fault, "delay_ms": 50}},
             {"at_s": 8.0, "f": "stop-disk"}]
    r = run(SimConfig(seed=seed, seconds=15, faults=()), plan(steps, NAMES, 15))
    merged = compose(check_run(r))
    assert merged.valid is True, f"{dict(merged.counts)}; replay: {replay_command(r)}"
    assert [s["f"] for s in r.schedule][:2] == ["start-disk", "stop-disk"]
    errors = [op for op in r.history if op["f"] == "send" and op.get("error") == "STORE_ERROR"]
    if fault == "eio-fsync":
        assert errors and all(op["type"] == "info" for op in errors), "a failed fsync answers STORE_ERROR, not definite"
    else:
        assert not errors
    acked = [op for op in r.history if op["f"] == "send" and op["type"] == "ok"]
    assert acked, "the cluster still takes writes once the disk is healed"


def test_a_flush_waits_for_the_append_whose_fsync_is_in_flight() -> None:
    """Seed 2200 (every kind, 60 s) found this in the model, not the cluster: a background flush that ran while an
    append's failing fsync was in flight fsynced and published that append's bytes, the master streamed them to a
    slave, the fsync then failed and the append was rolled back, and after a failover the slave served the undone
    record where an acknowledged one had been written (``inconsistent-offsets``).  The real flusher waits for the
    store's writer lock, which the put holds across its fsync and rollback; so does the simulated one now."""
    r = run(SimConfig(seed=2200, seconds=60, faults=FAULT_KINDS, threads=4))
    assert any(s["f"] == "start-disk" and s["value"]["fault"] == "eio-fsync" for s in r.schedule)
    merged = compose(check_run(r))
    assert merged.valid is True, f"{dict(merged.counts)}; replay: {replay_command(r)}"
