"""The truncation algorithm on real stores: random elections, writes, partial replication and lost
unflushed tails across three MessageStores; every slave session truncates to the consistent point
(store.truncate: commit log + consume queues + epoch suffix) and the slave's bytes then equal a prefix
of the master's.  After a final full sync every slave's log equals the master's."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.store import (
    FlushPolicy,
    MessageStore,
    Record,
    StoreConfig,
    cut_files_offline,
    decode_many,
    find_consistent_point,
)

CFG = StoreConfig(segment_bytes=4096, max_message_bytes=2048, flush_policy=FlushPolicy.SYNC, background_flush=False)


def everything(store: MessageStore) -> bytes:
    return store.read_raw(store.min_phys_offset, 10**8)


def sync(slave: MessageStore, master: MessageStore, count: int) -> int:
    if slave.epochs.entries:
        p = find_consistent_point(
            slave.epochs.entries, slave.max_phys_offset, master.epochs.entries, master.max_phys_offset
        )
    else:
        p = slave.min_phys_offset
    if p < 0:
        return p
    slave.truncate(p)
    assert everything(slave) == everything(master)[: p - master.min_phys_offset]
    pos = p
    for _ in range(count):
        chunk = master.read_raw(pos, 1)  # exactly one whole record
        if not chunk:
            break
        rng = master.epochs.find_entry_by_offset(pos)
        assert rng is not None
        if slave.epochs.last_epoch < rng.epoch:
            slave.epochs.append(rng.epoch, rng.start_offset)
        pos = slave.append_raw(pos, chunk)
    slave.set_confirm_offset(min(master.confirm_offset, slave.max_phys_offset))
    return p


steps_st = st.lists(
    st.one_of(
        st.tuples(st.just("elect"), st.integers(0, 2)),
        st.tuples(st.just("write"), st.integers(1, 4)),
        st.tuples(st.just("replicate"), st.integers(0, 2), st.integers(0, 6)),
        st.tuples(st.just("lose"), st.integers(0, 2), st.integers(1, 3)),
    ),
    max_size=25,
)


@settings(max_examples=25, deadline=None)
@given(steps_st)
def test_real_stores_converge_to_the_master(steps: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [f"{tmp}/n{i}" for i in range(3)]
        nodes = [MessageStore.open(d, CFG, "c1") for d in dirs]
        master: int | None = None
        epoch, serial = 0, 0
        try:
            for step in steps:
                if step[0] == "elect":
                    epoch += 1
                    n = nodes[step[1]]
                    n.epochs.start_epoch(epoch, n.max_phys_offset)
                    master = step[1]
                elif step[0] == "write" and master is not None:
                    m = nodes[master]
                    batch = [
                        Record("t", (serial + i) % 2, b"v" * 50, key=f"e{epoch}-{serial + i}") for i in range(step[1])
                    ]
                    serial += step[1]
                    m.put(batch)
                    m.set_confirm_offset(m.max_phys_offset)
                elif step[0] == "replicate" and master is not None and step[1] != master:
                    sync(nodes[step[1]], nodes[master], step[2])
                elif step[0] == "lose":
                    i = step[1]
                    frames = decode_many(everything(nodes[i]), nodes[i].min_phys_offset).records
                    keep = frames[-step[2]].offset if len(frames) >= step[2] else nodes[i].min_phys_offset
                    nodes[i].close(clean=False)
                    cut_files_offline(dirs[i], keep)
                    nodes[i] = MessageStore.open(dirs[i], CFG, "c1")
                    assert nodes[i].max_phys_offset == keep
                    if master == i:
                        master = None
            if master is None:
                return
            m = nodes[master]
            for i, n in enumerate(nodes):
                if i != master and sync(n, m, 10**6) >= 0:
                    assert everything(n) == everything(m)
                    for q in (0, 1):
                        assert n.next_queue_offset("t", q) == m.next_queue_offset("t", q)
                        got = [d.record for d in n.get("t", q, 0, 1000).records]
                        assert got == [d.record for d in m.get("t", q, 0, 1000).records]
        finally:
            for n in nodes:
                n.close()
