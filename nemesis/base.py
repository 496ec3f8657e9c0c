"""What every nemesis shares: the Nemesis protocol's plumbing, target resolution, and honest completions.

A nemesis acts only through the test's ``remote`` (exec, signal, spawn) and the cluster's DB (kill, start,
pause, primaries, admin addresses), so it works the same on network namespaces, docker and SSH hosts.  Each
completion records what was actually done (resolved targets, the grudge, the netem arguments, the clock
offsets).  A fault that cannot be applied completes as ``info`` with the reason in ``error`` and the test goes
on (:func:`guard`).

The nemeses built on :class:`NemesisBase`, one module each: :mod:`nemesis.partition`, :mod:`nemesis.process`,
:mod:`nemesis.clock`, :mod:`nemesis.packet`, :mod:`nemesis.failpoint` and :mod:`nemesis.disk`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from harness.protocols import Kill, Specified
from nemesis.accounting import STEP
from nemesis.targets import RoleUnavailable, resolve, roles_of, topology_of

__all__ = ["ROLE_WAIT_S", "NemesisBase", "guard", "restart_and_wait"]

log = logging.getLogger("splitbrain.nemesis")

ROLE_WAIT_S = 10.0
"""How long a role selector waits for its role to exist (a few election timeouts) by default."""


def _done(op: Mapping[str, Any], value: Any, *, error: str | None = None) -> dict[str, Any]:
    out = {**op, "type": "info", "value": value}
    if error:
        out["error"] = error
    return out


async def guard(op: Mapping[str, Any], action: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """Run ``action``; its result is the completion's value, and a failure becomes an ``info`` completion
    carrying the reason (a fault that could not be applied never stops the test)."""
    try:
        return _done(op, await action())
    except Exception as exc:
        log.warning("nemesis %s failed: %s", op.get("f"), exc)
        return _done(op, op.get("value"), error=f"{exc.__class__.__name__}: {exc}")


class NemesisBase:
    """Shared plumbing: topology, RNG, target resolution, exec on many nodes.  A subclass sets ``FS`` (the
    fs it handles) and implements ``invoke``; ``setup`` and ``teardown`` do nothing unless overridden."""

    FS: frozenset[str] = frozenset()

    def __init__(self, db: Specified, rng: random.Random) -> None:
        self.db = db
        self._rng = rng
        spec = db.spec
        self.topo = topology_of(spec.nodes)  # its roles and the pools its adapter adds (harness.spec.NodesSpec)
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


async def restart_and_wait(db: Kill, test: dict[str, Any], node: str, timeout_s: float) -> dict[str, str]:
    """Start ``node`` again and wait until it serves: ``{"restarted": "ready"}``, or ``"refused"`` (a broker
    whose store refused to open) / ``"not ready"`` with ``log``: the refusal line, else the error's tail.
    Used after a fault that crashed the node on purpose (``crash-at``, the disk faults)."""
    await db.start(test, node)
    try:
        await db.wait_ready(test, node, timeout_s=timeout_s)
        return {"restarted": "ready"}
    except TimeoutError as exc:
        refusal = [line for line in str(exc).splitlines() if "store refused" in line]
        return {"restarted": "refused" if refusal else "not ready", "log": refusal[-1] if refusal else str(exc)[-600:]}
