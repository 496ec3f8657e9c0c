"""The composite client routes ops by f; checkers are namespaced; the same seed gives the same schedule."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import generator as g
from harness.commands._parts import CompositeClient, build_parts, namespaced_checkers, prepare
from workloads.registry import Workload


class Recorder:
    """A client that answers ok and remembers what it saw (one shared log across opened copies)."""

    def __init__(self, tag: str, log: list[tuple[str, str]], node: str = "") -> None:
        self.tag, self.log, self.node = tag, log, node

    async def open(self, test: dict[str, Any], node: str) -> Recorder:
        self.log.append((self.tag, f"open {node}"))
        return Recorder(self.tag, self.log, node)

    async def setup(self, test: dict[str, Any]) -> None:
        self.log.append((self.tag, "setup"))

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        self.log.append((self.tag, f"{op['f']}@{self.node}"))
        return {**op, "type": "ok"}

    async def teardown(self, test: dict[str, Any]) -> None:
        self.log.append((self.tag, "teardown"))

    async def close(self, test: dict[str, Any]) -> None:
        self.log.append((self.tag, "close"))


def test_routing_by_f_and_unknown_f_fails_definitely() -> None:
    log: list[tuple[str, str]] = []
    proto = CompositeClient([(frozenset({"send", "poll"}), Recorder("queue", log)),
                             (frozenset({"register"}), Recorder("reg", log))])

    async def main() -> list[dict[str, Any]]:
        await proto.setup({})
        c = await proto.open({}, "c1")
        out = [await c.invoke({}, {"type": "invoke", "process": 0, "f": f, "value": None})
               for f in ("send", "register", "poll", "explode")]
        await c.close({})
        return out

    results = asyncio.run(main())
    assert [r["type"] for r in results] == ["ok", "ok", "ok", "fail"]
    assert "explode" in results[3]["error"] and "register" in results[3]["error"]
    assert log == [("queue", "setup"), ("reg", "setup"), ("queue", "open c1"), ("reg", "open c1"),
                   ("queue", "send@c1"), ("reg", "register@c1"), ("queue", "poll@c1"), ("queue", "close"),
                   ("reg", "close")]


def test_checkers_are_namespaced_per_workload() -> None:
    a = Workload("queue", None, None, {"queue": "A", "perf": "B"}, frozenset({"send"}))
    b = Workload("registry", None, None, {"queue": "C"}, frozenset({"reg"}))
    assert namespaced_checkers([a, b]) == {"queue/queue": "A", "queue/perf": "B", "registry/queue": "C"}


def _schedule(spec_path: Path, seed: int) -> list[tuple[Any, ...]]:
    prepared = prepare(str(spec_path), {"seed": seed})
    parts, _ = build_parts(prepared.spec, prepared.options)
    ops = g.simulate(g.time_limit(20, parts.generator), seed=seed, client_threads=3, latency_ns=1_000_000,
                     max_ops=400)
    return [(o["type"], o["process"], o["f"], repr(o.get("value")), o["time"]) for o in ops]


def test_same_seed_same_client_and_fault_schedule(write_spec: Callable[..., Path]) -> None:
    path = write_spec(rate=20)
    first, again, other = _schedule(path, 5), _schedule(path, 5), _schedule(path, 6)
    assert first == again
    assert first != other
    fs = {op[2] for op in first}
    assert "read-meta" in fs and fs & {"start-partition", "kill"}, fs


def test_parts_carry_db_nemesis_heal_and_final(write_spec: Callable[..., Path]) -> None:
    prepared = prepare(str(write_spec()), {})
    parts, db = build_parts(prepared.spec, prepared.options)
    assert parts.db is db and parts.nemesis is not None
    assert {op["f"] for op in parts.heal_generator} == {"stop-partition", "start"}
    assert set(parts.checkers) == {"cli-probe/leader"}
    assert parts.final_generator is not None
