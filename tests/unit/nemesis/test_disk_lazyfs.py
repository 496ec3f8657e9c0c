"""``lose-unfsynced`` under ``cluster.store_fs: lazyfs`` (nemesis shell with a fake DB: only the order of its
steps and what it records are under test; tests/integration/nemesis/test_lazyfs_cluster_real.py runs it for real)."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

from nemesis.disk import DiskNemesis
from systems.splitbrain.selectors import SELECTORS


class FakeDB:
    def __init__(self, dropped: dict[str, int], down: frozenset[str] = frozenset()) -> None:
        nodes = SimpleNamespace(controllers=("c1",), broker_sets=(("b1", "b2", "b3"),), selectors=SELECTORS)
        self.spec = SimpleNamespace(nodes=nodes)
        self.lazy_store = True
        self.dropped, self.down = dropped, set(down)
        self.steps: list[tuple[str, str]] = []

    async def primaries(self, test: dict[str, Any]) -> list[str]:
        return ["c1", "b1"]

    async def alive(self, test: dict[str, Any], node: str) -> bool:
        return node not in self.down

    async def kill(self, test: dict[str, Any], node: str) -> None:
        self.steps.append(("kill", node))
        self.down.add(node)

    async def lazyfs_crash(self, test: dict[str, Any], node: str) -> dict[str, Any]:
        self.steps.append(("crash", node))
        n = self.dropped.get(node, 0)
        return {"dropped": n, "files": {"commitlog/00000000000000000000": n} if n else {}}

    async def start(self, test: dict[str, Any], node: str) -> None:
        self.steps.append(("start", node))
        self.down.discard(node)

    async def wait_ready(self, test: dict[str, Any], node: str, timeout_s: float) -> None:
        return None

    def store_dir(self, test: dict[str, Any], node: str) -> str:  # pragma: no cover - must not be used
        raise AssertionError("lazyfs mode never cuts at the store's published offset")


def lose(db: FakeDB, targets: str) -> dict[str, Any]:
    op = {"type": "invoke", "process": "nemesis", "f": "lose-unfsynced", "value": {"targets": targets}}
    return asyncio.run(DiskNemesis(db, random.Random(1)).invoke({}, op))


def test_several_targets_are_one_power_cut_and_the_real_bytes_are_recorded() -> None:
    db = FakeDB({"b1": 500, "b2": 0}, down=frozenset({"b3"}))
    done = lose(db, "brokers")
    assert "error" not in done, done
    assert db.steps == [("kill", "b1"), ("kill", "b2"), ("crash", "b1"), ("crash", "b2"), ("crash", "b3"),
                        ("start", "b1"), ("start", "b2")]  # b3 was down already: crashed, left for its owner
    nodes = done["value"]["nodes"]
    assert done["value"]["store_fs"] == "lazyfs"
    assert nodes["b1"]["dropped"] == 500 and nodes["b1"]["restarted"] == "ready" and "note" not in nodes["b1"]
    assert nodes["b2"]["dropped"] == 0 and "dropped 0 bytes" in nodes["b2"]["note"]
    assert nodes["b3"]["was_alive"] is False and "restarted" not in nodes["b3"]
