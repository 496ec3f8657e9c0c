"""The partition nemesis: ``start-partition`` / ``stop-partition`` as iptables DROP rules.

Each node gets a ``splitbrain`` chain hooked first into its INPUT path; a partition is a grudge
(:mod:`nemesis.grudge`: node -> the nodes whose packets it drops) written as one DROP rule per source
address, and healing flushes the chain.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from nemesis import grudge as gr
from nemesis.base import NemesisBase, guard
from nemesis.schedule import partition_aims

__all__ = ["CHAIN", "PartitionNemesis"]

CHAIN = "splitbrain"
"""The iptables chain holding the partition's DROP rules on every node."""


class PartitionNemesis(NemesisBase):
    """Network partitions with iptables.

    ``start-partition`` value: ``{"kind": K, ...}`` with K one of ``random-halves``, ``isolate``
    (``targets`` selector), ``majorities-ring``, ``bridge``, ``one-way`` (``from`` and ``to`` selectors),
    ``grudge`` (an explicit map), or a kind the system's adapter adds (:class:`nemesis.targets.Cut`: our
    cluster's ``isolate-master``...), which resolves the cut's target and groups its nodes as the cut says.
    Packets are dropped in the receiving node's INPUT path, from the sender's address.
    """

    FS = frozenset({"start-partition", "stop-partition"})

    async def setup(self, test: dict[str, Any]) -> PartitionNemesis:
        for node in self.topo.all:
            await test["remote"].exec(node, ["iptables", "-w", "-N", CHAIN])  # may already exist
            rc = await test["remote"].exec(node, ["iptables", "-w", "-C", "INPUT", "-j", CHAIN])
            if rc.exit_code != 0:
                await test["remote"].exec(node, ["iptables", "-w", "-I", "INPUT", "1", "-j", CHAIN], check=True)
        return self

    async def grudge_for(self, test: dict[str, Any], value: Mapping[str, Any]) -> gr.Grudge:
        kind = value.get("kind", "random-halves")
        nodes = list(self.topo.all)
        if kind == "random-halves":
            return gr.random_halves(nodes, self.rng)
        if kind == "isolate":
            return gr.isolate(await self.targets(test, str(value.get("targets", "one"))), nodes)
        if kind == "majorities-ring":
            return gr.majorities_ring(nodes, self.rng)
        if kind == "bridge":
            return gr.bridge(nodes, self.rng)
        if kind == "one-way":
            src = await self.targets(test, str(value.get("from", "one")))
            dst = await self.targets(test, str(value.get("to", "all")))
            return gr.one_way(src, dst)
        if kind == "grudge":
            raw = value.get("grudge") or {}
            return {str(k): frozenset(map(str, v)) for k, v in raw.items()}
        cut = next((c for c in self.topo.selectors.cuts if c.name == kind), None)
        if cut is not None:
            return dict(cut.cut(self.topo, await self.targets(test, cut.target), self.rng))
        raise ValueError(f"start-partition: unknown kind {kind!r}; kinds: {tuple(partition_aims(self.topo))}")

    async def apply(self, test: dict[str, Any], grudge: Mapping[str, frozenset[str]]) -> None:
        remote = test["remote"]
        await self.heal(test)

        async def one(node: str, drops: frozenset[str]) -> None:
            for src in sorted(drops):
                await remote.exec(node, ["iptables", "-w", "-A", CHAIN, "-s", remote.address(src), "-j", "DROP"],
                                  check=True)

        await asyncio.gather(*(one(n, d) for n, d in grudge.items()))

    async def heal(self, test: dict[str, Any]) -> None:
        await self.exec_all(test, self.topo.all, ["iptables", "-w", "-F", CHAIN])

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        if op["f"] == "stop-partition":
            return await guard(op, lambda: self._stop(test))
        return await guard(op, lambda: self._start(test, op.get("value") or {}))

    async def _start(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        grudge = await self.grudge_for(test, value)
        await self.apply(test, grudge)
        return {"kind": value.get("kind", "random-halves"), "grudge": gr.describe(grudge)}

    async def _stop(self, test: dict[str, Any]) -> str:
        await self.heal(test)
        return "healed"

    async def teardown(self, test: dict[str, Any]) -> None:
        for node in self.topo.all:
            remote = test["remote"]
            await remote.exec(node, ["iptables", "-w", "-F", CHAIN])
            await remote.exec(node, ["iptables", "-w", "-D", "INPUT", "-j", CHAIN])
            await remote.exec(node, ["iptables", "-w", "-X", CHAIN])
