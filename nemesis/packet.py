"""The packet nemesis: ``start-packet`` / ``stop-packet`` faults on a node's outgoing traffic.

The behaviour map and its defaults are :mod:`nemesis.packet_behavior` (pure).  This shell picks the
mechanism at setup -- the kernel's ``tc netem`` when it has ``sch_netem``, else the userspace NFQUEUE shaper
:mod:`nemesis.netqueue` -- and applies the behaviour through the control backend.
"""

from __future__ import annotations

import asyncio
import logging
import random
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from harness.protocols import NodeHelpers, Specified
from nemesis.base import NemesisBase, guard
from nemesis.netqueue import MARK
from nemesis.packet_behavior import DEFAULT_BEHAVIOR, netem_args, rate_of, shaper_args, tc_tree

__all__ = ["PacketDB", "PacketNemesis"]


class PacketDB(NodeHelpers, Specified, Protocol):
    """What the packet nemesis calls of a DB: the nodes' ``python`` (:class:`~harness.protocols.NodeHelpers`), which
    runs the NFQUEUE shaper where the kernel lacks ``sch_netem``, and the spec's topology (its selectors)."""

log = logging.getLogger("splitbrain.nemesis")


class PacketNemesis(NemesisBase):
    """Packet faults on a node's outgoing traffic: ``start-packet`` {"targets", "behavior": {...},
    "to": optional selector -- only packets to those nodes (faults between pairs)}; ``stop-packet``.

    Behaviours (combinable; :mod:`nemesis.packet_behavior`): ``delay`` {"time_ms", "jitter_ms"}, ``loss``
    {"percent"}, ``duplicate`` {"percent"}, ``reorder`` {"percent", "correlation"}, ``corrupt`` {"percent"},
    ``rate`` {"rate": "1mbit"}.

    Mechanism: ``tc netem`` on eth0 when the kernel has ``sch_netem``; otherwise (detected at setup)
    the userspace NFQUEUE shaper :mod:`nemesis.netqueue` for delay/jitter/reorder/loss/duplicate.
    ``rate`` is an htb class (:func:`nemesis.packet_behavior.tc_tree`).  ``corrupt`` needs netem.  The
    completion records the mechanism.
    """

    FS = frozenset({"start-packet", "stop-packet"})
    db: PacketDB
    QUEUE = 7
    OUT_CHAIN = "splitbrain-out"

    def __init__(self, db: PacketDB, rng: random.Random) -> None:
        super().__init__(db, rng)
        self.mechanism = "netem"
        self._shapers: dict[str, int] = {}

    async def setup(self, test: dict[str, Any]) -> PacketNemesis:
        remote = test["remote"]
        probe = await remote.exec(self.topo.all[0], ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                                                     "0ms"])
        if probe.exit_code == 0:
            await remote.exec(self.topo.all[0], ["tc", "qdisc", "del", "dev", "lo", "root"])
        else:
            self.mechanism = "nfqueue"
            log.info("kernel lacks sch_netem (%s); packet faults use the NFQUEUE shaper", probe.stderr.strip())
        return self

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        if op["f"] == "stop-packet":
            return await guard(op, lambda: self._stop(test))
        return await guard(op, lambda: self._start(test, op.get("value") or {}))

    async def _start(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        behavior = value.get("behavior") or DEFAULT_BEHAVIOR
        nodes = await self.targets(test, str(value.get("targets", "one")))
        remote = test["remote"]
        to = await self.targets(test, str(value["to"])) if value.get("to") else []
        rate = rate_of(behavior)
        shaping = {k: v for k, v in behavior.items() if k != "rate"}
        netem = self.mechanism == "netem"
        args = (netem_args(shaping) if netem else shaper_args(shaping)) if shaping else []
        await self._stop(test)
        for n in nodes:
            dsts = [remote.address(d) for d in to if d != n]
            if to and not dsts:  # only itself as the peer: nothing to shape (never all traffic)
                continue
            if not netem and shaping:
                await self._start_shaper(test, n, args, dsts)
            if netem or rate:
                for cmd in tc_tree(args if netem else None, rate, dsts):
                    await remote.exec(n, ["tc", *cmd], check=True)
        return {"nodes": nodes, **({"to": to} if to else {}), "mechanism": self.mechanism,
                ("netem" if netem else "shaper"): " ".join(args), **({"rate": rate} if rate else {})}

    async def _start_shaper(self, test: dict[str, Any], node: str, args: list[str], dsts: Sequence[str]) -> None:
        remote = test["remote"]
        log_path = str(Path(remote.node_dir(node)) / "netqueue.log")
        argv = [self.db.python, "-m", "nemesis.netqueue", "--queue", str(self.QUEUE),
                "--seed", str(self.rng.randrange(2**31)), *args]
        self._shapers[node] = await remote.spawn(node, argv, log_path=log_path)
        for _ in range(100):
            text = (await remote.exec(node, ["cat", log_path])).stdout
            if "READY" in text:
                break
            if not await remote.is_alive(node, self._shapers[node]):
                raise RuntimeError(f"packet shaper on {node} exited: {text[-400:]}")
            await asyncio.sleep(0.05)
        await remote.exec(node, ["iptables", "-w", "-N", self.OUT_CHAIN])  # may already exist
        if (await remote.exec(node, ["iptables", "-w", "-C", "OUTPUT", "-j", self.OUT_CHAIN])).exit_code != 0:
            await remote.exec(node, ["iptables", "-w", "-I", "OUTPUT", "1", "-j", self.OUT_CHAIN], check=True)
        for match in [["-d", f"{dst}/32"] for dst in dsts] or [[]]:
            await remote.exec(node, ["iptables", "-w", "-A", self.OUT_CHAIN, "-o", "eth0", *match, "-m", "mark", "!",
                                     "--mark", hex(MARK), "-j", "NFQUEUE", "--queue-num", str(self.QUEUE),
                                     "--queue-bypass"], check=True)

    async def _stop(self, test: dict[str, Any]) -> str:
        remote = test["remote"]
        if self.mechanism == "nfqueue":
            await self.exec_all(test, self.topo.all, ["iptables", "-w", "-F", self.OUT_CHAIN], check=False)
            for node, pid in list(self._shapers.items()):
                await remote.signal(node, pid, signal.SIGTERM)
            self._shapers.clear()
        await self.exec_all(test, self.topo.all, ["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)
        return "healed"

    async def teardown(self, test: dict[str, Any]) -> None:
        await self._stop(test)
