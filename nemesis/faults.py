"""The nemeses: real faults injected through the control backend, one class per fault kind.

Every nemesis follows the harness's Nemesis protocol (setup / invoke / teardown / fs) and acts
only through the test's ``remote`` (exec, signal) and the cluster's DB (kill, start, pause,
primaries, admin addresses), so it works the same on network namespaces, docker and SSH hosts.

Each completion records what was actually done: resolved target nodes, the grudge, the netem
arguments, the clock offsets.  A fault that cannot be applied completes as ``info`` with the
reason in ``error`` and the test goes on (``_guard``).

* PartitionNemesis -- start-partition, stop-partition: iptables DROP rules in a ``splitbrain`` chain.
* ProcessNemesis -- kill, start, pause, resume, terminate, restart: SIGKILL, respawn, SIGSTOP,
  SIGCONT, SIGTERM (controlled shutdown), rolling restart.
* ClockNemesis -- bump/strobe/skew/reset-clock, check-clock-offsets: the node process's injectable
  clock (ADMIN_CLOCK_SET); the host clock never changes.
* PacketNemesis -- start-packet, stop-packet: tc netem on the node's eth0 (or the NFQUEUE shaper
  :mod:`nemesis.netqueue` on kernels without sch_netem).
* FailpointNemesis -- arm-failpoint, disarm-failpoint: ADMIN_FAILPOINT_ARM/DISARM.
"""

from __future__ import annotations

import asyncio
import logging
import random
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nemesis import grudge as gr
from nemesis.accounting import STEP
from nemesis.targets import RoleUnavailable, Topology, resolve, roles_of
from system_under_test.protocol import RequestCode, connect

log = logging.getLogger("splitbrain.nemesis")

CHAIN = "splitbrain"
ROLE_WAIT_S = 10.0
"""How long a role selector waits for its role to exist (a few election timeouts) by default."""


def _done(op: Mapping[str, Any], value: Any, *, error: str | None = None) -> dict[str, Any]:
    out = {**op, "type": "info", "value": value}
    if error:
        out["error"] = error
    return out


async def _guard(op: Mapping[str, Any], action: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """Run ``action``; a failure becomes an ``info`` completion carrying the reason."""
    try:
        return _done(op, await action())
    except Exception as exc:
        log.warning("nemesis %s failed: %s", op.get("f"), exc)
        return _done(op, op.get("value"), error=f"{exc.__class__.__name__}: {exc}")


class _Base:
    """Shared plumbing: topology, RNG, target resolution, exec on many nodes."""

    FS: frozenset[str] = frozenset()

    def __init__(self, db: Any, rng: random.Random) -> None:
        self.db = db
        self._rng = rng
        spec = db.spec
        self.topo = Topology(tuple(spec.nodes.controllers), tuple(tuple(s) for s in spec.nodes.broker_sets))
        self.role_wait_s = float(getattr(getattr(spec, "nemesis", None), "role_wait_s", ROLE_WAIT_S))

    @property
    def rng(self) -> random.Random:
        """The current step's RNG when run under :class:`nemesis.accounting.Accounted` (so a replay of
        the same steps draws the same random choices), else the nemesis's own."""
        step = STEP.get()
        return step.rng if step is not None else self._rng

    def fs(self) -> frozenset[str]:
        return self.FS

    async def setup(self, test: dict[str, Any]) -> Any:
        return self

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def _primaries(self, test: dict[str, Any]) -> list[str]:
        primaries = getattr(self.db, "primaries", None)
        if primaries is None:
            return []
        found: list[str] = await primaries(test)
        return found

    async def targets(self, test: dict[str, Any], selector: str) -> list[str]:
        """Resolve ``selector`` now.  A role that has no node yet (no controller leader mid-election)
        is asked for again until ``role_wait_s`` has passed; the resolution -- selector, nodes, and
        the role each node had -- is recorded on the step (``targets`` in the completion)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.role_wait_s
        rng_state = self.rng.getstate()
        while True:
            primaries = await self._primaries(test)
            try:
                nodes = resolve(selector, self.topo, primaries, self.rng)
                break
            except RoleUnavailable:
                if loop.time() >= deadline:
                    raise
                self.rng.setstate(rng_state)  # a retry draws what the first try would have drawn
                await asyncio.sleep(0.2)
        step = STEP.get()
        if step is not None:
            step.resolutions.append({"selector": selector, "nodes": nodes,
                                     "roles": roles_of(nodes, self.topo, primaries)})
        return nodes

    async def exec_all(self, test: dict[str, Any], nodes: Sequence[str], argv: Sequence[str],
                       *, check: bool = True) -> None:
        remote = test["remote"]
        await asyncio.gather(*(remote.exec(n, list(argv), timeout_s=20, check=check) for n in nodes))


class PartitionNemesis(_Base):
    """Network partitions with iptables.

    ``start-partition`` value: ``{"kind": K, ...}`` with K one of ``random-halves``, ``isolate``
    (``targets`` selector), ``isolate-controller-leader``, ``isolate-master`` (from everyone),
    ``isolate-master-from-slaves``, ``isolate-master-from-controllers``, ``majorities-ring``,
    ``bridge``, ``one-way`` (``from`` and ``to`` selectors), or ``grudge`` (an explicit map).
    Packets are dropped in the receiving node's INPUT path, from the sender's address.
    """

    FS = frozenset({"start-partition", "stop-partition"})
    KINDS = ("random-halves", "isolate", "isolate-controller-leader", "isolate-master", "isolate-master-from-slaves",
             "isolate-master-from-controllers", "majorities-ring", "bridge", "one-way", "grudge")

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
        if kind == "isolate-controller-leader":
            return gr.isolate(await self.targets(test, "controller-leader"), nodes)
        if kind.startswith("isolate-master"):
            masters = await self.targets(test, "masters")
            master = self.rng.choice(masters)
            slaves = next(s for s in self.topo.broker_sets if master in s)
            if kind == "isolate-master":
                return gr.isolate([master], nodes)
            others = slaves if kind == "isolate-master-from-slaves" else self.topo.controllers
            return gr.isolate_from(master, others)
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
        raise ValueError(f"start-partition: unknown kind {kind!r}; kinds: {self.KINDS}")

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
            return await _guard(op, lambda: self._stop(test))
        return await _guard(op, lambda: self._start(test, op.get("value") or {}))

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


class ProcessNemesis(_Base):
    """Process faults through the DB: ``kill`` (SIGKILL), ``terminate`` (SIGTERM: controlled
    shutdown), ``pause``/``resume`` (SIGSTOP/SIGCONT), ``start`` (respawn what is down),
    ``restart`` (rolling: one node at a time, waiting until each is ready).  Value: a selector."""

    FS = frozenset({"kill", "start", "pause", "resume", "terminate", "restart"})

    def __init__(self, db: Any, rng: random.Random) -> None:
        super().__init__(db, rng)
        self.down: set[str] = set()
        self.paused: set[str] = set()

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f = op["f"]
        handlers = {"kill": self._kill, "terminate": self._terminate, "pause": self._pause, "resume": self._resume,
                    "start": self._start, "restart": self._restart}
        return await _guard(op, lambda: handlers[f](test, op.get("value")))

    async def _kill(self, test: dict[str, Any], selector: Any) -> list[str]:
        nodes = await self.targets(test, str(selector or "one"))
        for n in nodes:
            await self.db.kill(test, n)
            self.down.add(n)
            self.paused.discard(n)
        return nodes

    async def _terminate(self, test: dict[str, Any], selector: Any) -> list[str]:
        nodes = await self.targets(test, str(selector or "one"))
        for n in nodes:
            await self.db.terminate(test, n)
            self.down.add(n)
        return nodes

    async def _pause(self, test: dict[str, Any], selector: Any) -> list[str]:
        nodes = [n for n in await self.targets(test, str(selector or "one")) if n not in self.down]
        for n in nodes:
            await self.db.pause(test, n)
            self.paused.add(n)
        return nodes

    async def _resume(self, test: dict[str, Any], selector: Any) -> list[str]:
        nodes = sorted(self.paused) if selector in (None, "paused") else await self.targets(test, str(selector))
        for n in nodes:
            await self.db.resume(test, n)
            self.paused.discard(n)
        return nodes

    async def _start(self, test: dict[str, Any], selector: Any) -> list[str]:
        candidates = sorted(self.down) if selector in (None, "dead") else await self.targets(test, str(selector))
        started = []
        for n in candidates:
            if await self.db.alive(test, n):
                if n in self.down:  # SIGTERM'd node still shutting down: wait for it (bounded)
                    for _ in range(100):
                        await asyncio.sleep(0.1)
                        if not await self.db.alive(test, n):
                            break
                    else:
                        await self.db.kill(test, n)
                else:
                    continue
            await self.db.start(test, n)
            self.down.discard(n)
            started.append(n)
        return started

    async def _restart(self, test: dict[str, Any], selector: Any) -> list[str]:
        nodes = await self.targets(test, str(selector or "controllers:all"))
        for n in nodes:
            await self.db.kill(test, n)
            await self.db.start(test, n)
            await self.db.wait_ready(test, n)
        return nodes


class ClockNemesis(_Base):
    """Per-process clock faults through each node's injectable clock (the host clock is untouched).

    ``bump-clock`` {"targets", "delta_ms"}: jump by delta (forward or back).
    ``strobe-clock`` {"targets", "delta_ms", "period_ms", "duration_s"}: oscillate between +delta and 0.
    ``skew-clock`` {"targets", "rate"}: run the clock at ``rate`` times real speed.
    ``reset-clock``: offset 0 and rate 1 everywhere.  ``check-clock-offsets``: read every node's offset.
    """

    FS = frozenset({"bump-clock", "strobe-clock", "skew-clock", "reset-clock", "check-clock-offsets"})

    def __init__(self, db: Any, rng: random.Random) -> None:
        super().__init__(db, rng)
        self._strobes: list[asyncio.Task[None]] = []

    async def _rpc(self, test: dict[str, Any], node: str, code: int, header: dict[str, Any]) -> dict[str, Any]:
        conn = await connect(self.db.admin_addr(test, node), timeout_s=2.0)
        try:
            token = {"token": self.db.token} if code == RequestCode.ADMIN_CLOCK_SET else {}
            return (await conn.request(code, {**header, **token}, timeout_s=5.0)).header
        finally:
            conn.close()

    async def set_clock(self, test: dict[str, Any], node: str, **change: float) -> dict[str, Any]:
        return await self._rpc(test, node, RequestCode.ADMIN_CLOCK_SET, change)

    async def read_clock(self, test: dict[str, Any], node: str) -> dict[str, Any]:
        return await self._rpc(test, node, RequestCode.ADMIN_CLOCK_GET, {})

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        value = op.get("value") or {}
        f = op["f"]
        if f == "reset-clock":
            return await _guard(op, lambda: self._reset(test))
        if f == "check-clock-offsets":
            return await _guard(op, lambda: self._offsets(test, self.topo.all))
        return await _guard(op, lambda: self._fault(test, f, value))

    async def _fault(self, test: dict[str, Any], f: str, value: Mapping[str, Any]) -> dict[str, Any]:
        nodes = await self.targets(test, str(value.get("targets", "one")))
        if f == "bump-clock":
            delta = float(value.get("delta_ms", 60_000))
            for n in nodes:
                current = float((await self.read_clock(test, n)).get("offset_ms", 0.0))
                await self.set_clock(test, n, offset_ms=current + delta)
        elif f == "skew-clock":
            rate = float(value.get("rate", 2.0))
            for n in nodes:
                await self.set_clock(test, n, rate=rate)
        else:  # strobe
            delta = float(value.get("delta_ms", 200))
            period = float(value.get("period_ms", 100)) / 1000
            duration = float(value.get("duration_s", 5))
            self._strobes.append(asyncio.get_running_loop().create_task(
                self._strobe(test, nodes, delta, period, duration)))
        return {**dict(value), "nodes": nodes, "offsets": await self._offsets(test, nodes)}

    async def _strobe(self, test: dict[str, Any], nodes: list[str], delta: float, period: float,
                      duration: float) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + duration
        high = False
        unreachable: set[str] = set()  # logged once when a node goes away and once when it is back
        while loop.time() < end:
            high = not high
            for n in nodes:
                try:
                    await self.set_clock(test, n, offset_ms=delta if high else 0.0)
                    if n in unreachable:
                        unreachable.discard(n)
                        log.info("strobe on %s: reachable again", n)
                except Exception as exc:
                    if n not in unreachable:
                        unreachable.add(n)
                        log.info("strobe on %s: %s (retrying quietly)", n, exc)
            await asyncio.sleep(period)
        for n in nodes:
            try:
                await self.set_clock(test, n, offset_ms=0.0)
            except Exception as exc:
                log.info("strobe reset on %s: %s", n, exc)

    async def _offsets(self, test: dict[str, Any], nodes: Sequence[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for n in nodes:
            try:
                c = await self.read_clock(test, n)
                out[n] = {"offset_ms": c.get("offset_ms"), "rate": c.get("rate"),
                          "skew_ms": (int(c["wall_ns"]) - int(c["host_wall_ns"])) / 1e6}
            except Exception as exc:
                out[n] = {"error": str(exc)}
        return out

    async def _reset(self, test: dict[str, Any]) -> dict[str, Any]:
        for t in self._strobes:
            t.cancel()
        self._strobes.clear()
        failed: dict[str, str] = {}
        for n in self.topo.all:
            try:
                await self.set_clock(test, n, offset_ms=0.0, rate=1.0)
            except Exception as exc:  # a dead node has no clock to reset; its restart starts at true time
                failed[n] = str(exc)
        return {"reset": [n for n in self.topo.all if n not in failed], "unreachable": failed}

    async def teardown(self, test: dict[str, Any]) -> None:
        for t in self._strobes:
            t.cancel()


class PacketNemesis(_Base):
    """Packet faults on a node's outgoing traffic: ``start-packet`` {"targets", "behavior": {...},
    "to": optional selector -- only packets to those nodes (faults between pairs)}; ``stop-packet``.

    Behaviours (combinable): ``delay`` {"time_ms", "jitter_ms"}, ``loss`` {"percent"},
    ``duplicate`` {"percent"}, ``reorder`` {"percent", "correlation"}, ``corrupt`` {"percent"},
    ``rate`` {"rate": "1mbit"}.

    Mechanism: ``tc netem`` on eth0 when the kernel has ``sch_netem``; otherwise (detected at setup)
    the userspace NFQUEUE shaper :mod:`nemesis.netqueue` for delay/jitter/reorder/loss/duplicate.
    ``rate`` is an htb class (:meth:`tc_tree`).  ``corrupt`` needs netem.  The completion records
    the mechanism.
    """

    FS = frozenset({"start-packet", "stop-packet"})
    DEFAULT = {"delay": {"time_ms": 50, "jitter_ms": 10}}
    QUEUE = 7
    OUT_CHAIN = "splitbrain-out"

    def __init__(self, db: Any, rng: random.Random) -> None:
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

    @staticmethod
    def netem_args(behavior: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Pure: the netem argument list for a behaviour map (raises ValueError on unknown keys)."""
        args: list[str] = []
        known = {"delay", "loss", "duplicate", "reorder", "corrupt", "rate"}
        unknown = set(behavior) - known
        if unknown:
            raise ValueError(f"start-packet: unknown behaviour(s) {sorted(unknown)}; known: {sorted(known)}")
        if "delay" in behavior or "reorder" in behavior:
            d = behavior.get("delay", {"time_ms": 10})
            args += ["delay", f"{int(d.get('time_ms', 50))}ms", f"{int(d.get('jitter_ms', 0))}ms"]
            if d.get("jitter_ms"):
                args += ["distribution", "normal"]
        for name in ("loss", "duplicate", "corrupt"):
            if name in behavior:
                args += [name, f"{float(behavior[name].get('percent', 10)):g}%"]
        if "reorder" in behavior:
            r = behavior["reorder"]
            args += ["reorder", f"{float(r.get('percent', 20)):g}%", f"{float(r.get('correlation', 75)):g}%"]
        if "rate" in behavior:
            args += ["rate", str(behavior["rate"].get("rate", "1mbit"))]
        return args

    @staticmethod
    def shaper_args(behavior: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Pure: arguments of :mod:`nemesis.netqueue` for a behaviour map (ValueError if it cannot do it)."""
        PacketNemesis.netem_args(behavior)  # same validation of names
        if "corrupt" in behavior:
            raise ValueError("start-packet: corrupt needs the kernel's sch_netem, which this kernel lacks")
        d = behavior.get("delay", {})
        delay = float(d.get("time_ms", 10 if "reorder" in behavior else 0))
        jitter = float(d.get("jitter_ms", 0)) or (delay / 2 if "reorder" in behavior else 0.0)
        return ["--delay-ms", f"{delay:g}", "--jitter-ms", f"{jitter:g}",
                "--loss", f"{float(behavior.get('loss', {}).get('percent', 0)) / 100:g}",
                "--duplicate", f"{float(behavior.get('duplicate', {}).get('percent', 0)) / 100:g}"]

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        if op["f"] == "stop-packet":
            return await _guard(op, lambda: self._stop(test))
        return await _guard(op, lambda: self._start(test, op.get("value") or {}))

    @staticmethod
    def tc_tree(netem: Sequence[str] | None, rate: str | None, dst_ips: Sequence[str]) -> list[list[str]]:
        """Pure: the ``tc`` commands (argv after ``tc``) that shape eth0's outgoing traffic -- all of it,
        or with ``dst_ips`` only packets to those addresses (pairs).  An htb root with an unlimited
        class 1:1 and the shaped class 1:2 (``rate`` or unlimited), ``netem`` as 1:2's leaf, and u32
        filters sending the chosen destinations to 1:2 (without destinations 1:2 is the default)."""
        cmds = [["qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1" if dst_ips else "2"],
                ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit"],
                ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:2", "htb", "rate", rate or "10gbit"]]
        if netem:
            cmds.append(["qdisc", "add", "dev", "eth0", "parent", "1:2", "handle", "20:", "netem", *netem])
        for ip in dst_ips:
            cmds.append(["filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                         "match", "ip", "dst", f"{ip}/32", "flowid", "1:2"])
        return cmds

    async def _start(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        behavior = value.get("behavior") or self.DEFAULT
        nodes = await self.targets(test, str(value.get("targets", "one")))
        remote = test["remote"]
        to = await self.targets(test, str(value["to"])) if value.get("to") else []
        pairs = {"to": to} if to else {}
        rate = str(behavior["rate"].get("rate", "1mbit")) if "rate" in behavior else None
        shaping = {k: v for k, v in behavior.items() if k != "rate"}
        await self._stop(test)
        if self.mechanism == "netem":
            args = self.netem_args(shaping) if shaping else []
            for n in nodes:
                dsts = [remote.address(d) for d in to if d != n]
                if to and not dsts:  # only itself as the peer: nothing to shape (never all traffic)
                    continue
                for cmd in self.tc_tree(args, rate, dsts):
                    await remote.exec(n, ["tc", *cmd], check=True)
            return {"nodes": nodes, **pairs, "mechanism": "netem", "netem": " ".join(args),
                    **({"rate": rate} if rate else {})}
        args = self.shaper_args(shaping) if shaping else []
        for n in nodes:
            dsts = [remote.address(d) for d in to if d != n]
            if to and not dsts:
                continue
            if shaping:
                await self._start_shaper(test, n, args, dsts)
            if rate:
                for cmd in self.tc_tree(None, rate, dsts):
                    await remote.exec(n, ["tc", *cmd], check=True)
        return {"nodes": nodes, **pairs, "mechanism": "nfqueue", "shaper": " ".join(args),
                **({"rate": rate} if rate else {})}

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
        for cmd in (["iptables", "-w", "-N", self.OUT_CHAIN],):
            await remote.exec(node, cmd)
        if (await remote.exec(node, ["iptables", "-w", "-C", "OUTPUT", "-j", self.OUT_CHAIN])).exit_code != 0:
            await remote.exec(node, ["iptables", "-w", "-I", "OUTPUT", "1", "-j", self.OUT_CHAIN], check=True)
        for match in [["-d", f"{dst}/32"] for dst in dsts] or [[]]:
            await remote.exec(node, ["iptables", "-w", "-A", self.OUT_CHAIN, "-o", "eth0", *match, "-m", "mark", "!",
                                     "--mark", "0x5b", "-j", "NFQUEUE", "--queue-num", str(self.QUEUE),
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


class FailpointNemesis(_Base):
    """Arm/disarm the cluster's named failpoints at run time:
    ``arm-failpoint`` {"targets", "name", "action"}; ``disarm-failpoint`` {"targets", "name"} (name '*' = all);
    ``crash-at`` {"targets", "name", "timeout_s", "trigger"}: arm ``1*crash``, make the step happen (``trigger``:
    ``auto`` issues harmless controller writes for controller and Raft points, see :func:`trigger_for`), wait
    until the process dies at that step, restart it and wait until it serves.  Per node: ``crashed`` (the step
    was reached, with the seconds it took) and ``restarted`` ("ready", or why not); a step not reached in time
    is disarmed and reported."""

    FS = frozenset({"arm-failpoint", "disarm-failpoint", "crash-at"})

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        if op["f"] == "crash-at":
            return await _guard(op, lambda: self._crash_at(test, op.get("value") or {}))
        return await _guard(op, lambda: self._go(test, op["f"], op.get("value") or {}))

    async def _crash_at(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        name = str(value.get("name") or "")
        if not name or name == "*":
            raise ValueError("crash-at: 'name' must name one failpoint (see `splitbrain admin failpoint list`)")
        timeout_s = float(value.get("timeout_s", 30.0))
        nodes = [n for n in await self.targets(test, str(value.get("targets", "one"))) if await self.db.alive(test, n)]
        armed = await admin_failpoints(self.db, test, nodes, "arm-failpoint", name, "1*crash")
        report: dict[str, Any] = {n: {"armed": r} for n, r in armed.items()}
        loop = asyncio.get_running_loop()
        t0, pending = loop.time(), {n for n, r in armed.items() if r == "ok"}
        trigger = trigger_for(name, str(value.get("trigger", "auto")))
        writes: dict[str, int] = {"ok": 0, "failed": 0}
        next_write = t0
        while pending and loop.time() - t0 < timeout_s:
            if trigger == "controller-write" and loop.time() >= next_write:
                next_write = loop.time() + 0.5
                writes["ok" if await self._controller_write(test) else "failed"] += 1
            await asyncio.sleep(0.1)
            for n in sorted(pending):
                if not await self.db.alive(test, n):
                    pending.discard(n)
                    report[n]["crashed"] = round(loop.time() - t0, 2)
        for n in sorted(pending):  # never reached: take the trap away again
            report[n]["crashed"] = False
            report[n]["disarm"] = (await admin_failpoints(self.db, test, [n], "disarm-failpoint", name))[n]
        for n, r in report.items():
            if r.get("crashed"):
                r.update(await restart_and_wait(self.db, test, n, float(value.get("ready_timeout_s", 30.0))))
        out: dict[str, Any] = {"name": name, "nodes": report, "trigger": trigger}
        if trigger == "controller-write":
            out["writes"] = writes
        return out

    async def _controller_write(self, test: dict[str, Any]) -> bool:
        """One harmless replicated controller write: ApplyBrokerId of a fresh id in the broker set
        :data:`PROBE_BROKER_SET`, which no broker ever joins.  It makes the controller leader decide,
        propose, persist, commit, apply and reply -- every step a controller or Raft failpoint sits on."""
        client = self.db.client(test, timeout_s=1.0)
        try:
            cluster = self.db.options.cluster_name
            broker_id = await client.get_next_broker_id(cluster, PROBE_BROKER_SET)
            code = f"probe{self.rng.randrange(10**9)}"
            await client.apply_broker_id(cluster, PROBE_BROKER_SET, broker_id, code, "127.0.0.1:1")
            return True
        except Exception as exc:  # the leader may be the process we are crashing
            log.debug("crash-at trigger write: %r", exc)
            return False
        finally:
            await client.close()

    async def _go(self, test: dict[str, Any], f: str, value: Mapping[str, Any]) -> dict[str, Any]:
        nodes = await self.targets(test, str(value.get("targets", "all")))
        results = await admin_failpoints(self.db, test, nodes, f, str(value.get("name", "*")),
                                         str(value.get("action", "1*crash")))
        return {**dict(value), "results": results}


PROBE_BROKER_SET = "nemesis-probe"
"""The broker set the crash-at trigger applies ids in: no broker of the test belongs to it."""


def trigger_for(name: str, trigger: str) -> str:
    """What makes failpoint ``name`` fire (pure): ``auto`` picks ``controller-write`` for controller and
    Raft points (a steady controller writes nothing, so without one such a point is never reached) and
    ``none`` for the rest (the workload drives them)."""
    if trigger != "auto":
        return trigger
    return "controller-write" if name.startswith(("controller.", "raft.")) else "none"


async def restart_and_wait(db: Any, test: dict[str, Any], node: str, timeout_s: float) -> dict[str, str]:
    """Start ``node`` again and wait until it serves: ``{"restarted": "ready"}``, or ``"refused"`` (a broker
    whose store refused to open) / ``"not ready"`` with ``log``: the refusal line, else the error's tail."""
    await db.start(test, node)
    try:
        await db.wait_ready(test, node, timeout_s=timeout_s)
        return {"restarted": "ready"}
    except TimeoutError as exc:
        refusal = [line for line in str(exc).splitlines() if "store refused" in line]
        return {"restarted": "refused" if refusal else "not ready", "log": refusal[-1] if refusal else str(exc)[-600:]}


async def admin_failpoints(db: Any, test: dict[str, Any], nodes: Sequence[str], f: str, name: str,
                           action: str = "1*crash") -> dict[str, str]:
    """``arm-failpoint`` / ``disarm-failpoint`` ``name`` on each node over its admin RPC; per node
    "ok", "unreachable: ..." or "error: ..." (a dead node is not a failure of the nemesis)."""
    results: dict[str, str] = {}
    for n in nodes:
        try:
            conn = await connect(db.admin_addr(test, n), timeout_s=2.0)
        except Exception as exc:
            results[n] = f"unreachable: {exc}"
            continue
        try:
            if f == "arm-failpoint":
                header = {"name": name, "action": action, "token": db.token}
                await conn.request(RequestCode.ADMIN_FAILPOINT_ARM, header, timeout_s=5.0)
            else:
                await conn.request(RequestCode.ADMIN_FAILPOINT_DISARM, {"name": name, "token": db.token},
                                   timeout_s=5.0)
            results[n] = "ok"
        except Exception as exc:
            results[n] = f"error: {exc}"
        finally:
            conn.close()
    return results
