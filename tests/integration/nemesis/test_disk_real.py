"""Disk faults proven real on the local backend (a controller and a broker in namespaces):
slow fsync shows in the store's measured fsync latency, ENOSPC gives producers DISK_FULL and leaves
no damaged file, EIO on read fails consumers, lose-unfsynced leaves exactly the synced length, and
a damaged segment is cut as a torn tail (tail) or refused with file and offset (middle)."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.control.local import LocalRemote
from harness.spec import spec_from_dict
from nemesis.disk import DiskNemesis
from system_under_test.broker.store import StoreConfig
from system_under_test.broker.store.commitlog import CommitLog
from system_under_test.client.consumer import Consumer
from system_under_test.client.producer import Producer, SendError
from system_under_test.protocol import RequestCode, ResponseCode, connect
from systems.splitbrain.db import SplitbrainDB
from systems.splitbrain.options import cluster_options

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

TOPIC = "disk"
SET = "broker-0"


def with_broker(body: Callable[[dict[str, Any], SplitbrainDB], Coroutine[Any, Any, None]], tmp: Path,
                cluster: Mapping[str, Any]) -> None:
    nodes = {"controllers": ["c1"], "broker_sets": [["b1"]]}
    spec = spec_from_dict({"name": "disk", "backend": "local", "nodes": nodes, "workloads": ["queue"], "seed": 9},
                          file="<test>")

    async def main() -> None:
        remote = await LocalRemote.create(list(spec.nodes.all), state_dir=tmp / "state")
        db = SplitbrainDB(spec, cluster_options(dict(cluster)))
        test = {"remote": remote, "run_dir": str(tmp)}
        try:
            await db.setup(test, "c1")
            await db.setup(test, "b1")
            await body(test, db)
        finally:
            for n in ("b1", "c1"):
                await db.teardown(test, n)
            await remote.close()

    asyncio.run(main())


def op(f: str, value: Any = None) -> dict[str, Any]:
    return {"type": "invoke", "process": "nemesis", "f": f, "value": value}


async def status(test: dict[str, Any], db: SplitbrainDB, node: str = "b1") -> dict[str, Any]:
    conn = await connect(db.admin_addr(test, node), timeout_s=2)
    try:
        return dict((await conn.request(RequestCode.ADMIN_STATUS, timeout_s=5)).header)
    finally:
        conn.close()


async def send_n(p: Producer, n: int, tag: str) -> list[bytes]:
    bodies = [f"{tag}-{i:04d}".encode() for i in range(n)]
    for b in bodies:
        await p.send(SET, TOPIC, 0, b, timeout_s=10)
    return bodies


def offline_records(store_dir: str) -> tuple[int, int]:
    """(records, torn bytes cut) of a closed store's commit log, verified from the start."""
    log = CommitLog.open(store_dir, StoreConfig())
    try:
        report = log.recover(0)
        return report.records_verified, report.truncated_bytes
    finally:
        log.close(sync=False)


def test_live_disk_faults_slow_fsync_enospc_and_eio(tmp_path: Path) -> None:
    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = DiskNemesis(db, random.Random(1))
        p = Producer(db.controller_addrs(test), db.token, timeout_s=10)
        try:
            sent = await send_n(p, 5, "before")
            before = (await status(test, db))["disk"]
            assert before["fsyncs"] >= 5  # flush=sync: one fsync per acknowledged send

            done = await nem.invoke(test, op("start-disk", {"fault": "slow-fsync", "targets": "b1", "delay_ms": 250}))
            assert done["value"]["results"] == {"b1": "ok"}, done
            sent += await send_n(p, 2, "slow")
            slow = (await status(test, db))["disk"]
            assert slow["fsyncs"] >= before["fsyncs"] + 2
            assert slow["fsync_last_ms"] >= 250 and slow["fsync_max_ms"] >= 250, slow
            assert slow["fsync_mean_ms"] > before["fsync_mean_ms"]
            await nem.invoke(test, op("stop-disk"))

            done = await nem.invoke(test, op("start-disk", {"fault": "enospc", "targets": "brokers:one"}))
            assert done["value"]["nodes"] == ["b1"] and done["value"]["action"] == "error"
            end_before = (await status(test, db))["max_offset"]
            with pytest.raises(SendError) as full:
                await p.send(SET, TOPIC, 0, b"never-stored", timeout_s=2)
            assert full.value.code == ResponseCode.DISK_FULL and full.value.definite, full.value
            assert "no space left" in str(full.value)
            assert (await status(test, db))["max_offset"] == end_before  # nothing appended
            await nem.invoke(test, op("stop-disk"))
            sent += await send_n(p, 2, "after")

            await nem.invoke(test, op("start-disk", {"fault": "eio-read", "targets": "b1"}))
            consumer = Consumer(db.controller_addrs(test), db.token)
            try:
                with pytest.raises(Exception) as eio:
                    await consumer.pull(SET, TOPIC, 0, 0, 100)
                assert "Input/output error" in str(eio.value) or "STORE_ERROR" in str(eio.value), eio.value
                await nem.invoke(test, op("stop-disk"))
                got = await consumer.pull(SET, TOPIC, 0, 0, 100)
                assert [m.body for m in got.messages] == sent
            finally:
                await consumer.close()
        finally:
            await p.close()
        await db.kill(test, "b1")
        records, torn = offline_records(db.store_dir(test, "b1"))
        assert (records, torn) == (len(sent), 0)  # the refused write left no partial record behind

    with_broker(body, tmp_path, {"flush": "sync"})


def test_lose_unfsynced_leaves_exactly_the_synced_length(tmp_path: Path) -> None:
    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = DiskNemesis(db, random.Random(2))
        async with Producer(db.controller_addrs(test), db.token, timeout_s=10) as p:
            await send_n(p, 40, "m")
            st = await status(test, db)
        assert st["synced_offset"] < st["max_offset"], st  # async flush, long interval: a tail not yet durable
        done = await nem.invoke(test, op("lose-unfsynced", {"targets": "b1"}))
        report = done["value"]["nodes"]["b1"]
        assert "error" not in done, done
        assert report["synced_offset"] >= st["synced_offset"] and report["restarted"] == "ready", report
        assert report["max_offset"] == st["max_offset"]
        assert report["dropped"] == st["max_offset"] - report["synced_offset"]
        after = await status(test, db)
        assert after["max_offset"] <= report["synced_offset"]  # the store may cut a torn partial record
        assert after["max_offset"] >= report["synced_offset"] - 64

    with_broker(body, tmp_path, {"flush": "async", "extra_broker_args": ["--flush-interval-ms", "60000"]})


def test_tail_damage_is_cut_middle_damage_is_refused(tmp_path: Path) -> None:
    async def body(test: dict[str, Any], db: SplitbrainDB) -> None:
        nem = DiskNemesis(db, random.Random(3))
        async with Producer(db.controller_addrs(test), db.token, timeout_s=10) as p:
            await send_n(p, 100, "r")
        end = (await status(test, db))["max_offset"]
        done = await nem.invoke(test, op("corrupt-file", {"targets": "b1", "mode": "bitflip-tail"}))
        rep = done["value"]["nodes"]["b1"]
        assert rep["changed"] and rep["file"].startswith("commitlog/") and rep["offset"] >= end - 48, rep
        assert rep["restarted"] == "ready", rep
        assert (await status(test, db))["max_offset"] < end  # the damaged last record was cut
        log_text = Path(next(iter(db.log_files(test, "b1")))).read_text()
        assert "torn tail" in log_text

        record = end // 100  # all records have the same size
        done = await nem.invoke(test, op("corrupt-file", {"targets": "b1", "mode": "bitflip"}))
        rep = done["value"]["nodes"]["b1"]
        in_last_record = rep["offset"] >= end - 2 * record
        if in_last_record:  # the seeded plan hit the tail after all: repaired like above
            assert rep["restarted"] == "ready", rep
        else:
            assert rep["restarted"] == "refused", rep
            assert "corrupt in the middle" in rep["log"] and rep["file"] in rep["log"], rep
            print(rep["log"])
            assert not await db.alive(test, "b1")

    with_broker(body, tmp_path, {"flush": "sync"})
