"""The process nemesis: kill, terminate, pause, resume, start and rolling restart of cluster processes.

It acts only through the cluster's DB (``kill``, ``terminate``, ``pause``, ``resume``, ``start``, ``alive``,
``wait_ready``) and remembers which nodes it took down or paused, so ``start`` and ``resume`` without a
selector undo exactly what it did.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from harness.protocols import Kill, Pause, Specified
from nemesis.base import NemesisBase, guard

__all__ = ["ProcessDB", "ProcessNemesis"]


class ProcessDB(Kill, Pause, Specified, Protocol):
    """All the process nemesis calls of a DB: :class:`~harness.protocols.Kill` and
    :class:`~harness.protocols.Pause` (the capabilities ``kill`` and ``pause``), and the spec's topology
    (:class:`~harness.protocols.Specified`: its selectors).  A system offering only one of
    them still gets this nemesis: validation refuses every op of the other (the fault table's ``needs``), so it
    is never called."""

Action = Callable[[dict[str, Any], str], Awaitable[Any]]
"""A DB method that acts on one node (``db.kill``, ``db.pause`` ...)."""


class ProcessNemesis(NemesisBase):
    """Process faults through the DB: ``kill`` (SIGKILL), ``terminate`` (SIGTERM: controlled
    shutdown), ``pause``/``resume`` (SIGSTOP/SIGCONT), ``start`` (respawn what is down),
    ``restart`` (rolling: one node at a time, waiting until each is ready).  Value: a selector."""

    FS = frozenset({"kill", "start", "pause", "resume", "terminate", "restart"})
    db: ProcessDB

    def __init__(self, db: ProcessDB, rng: random.Random) -> None:
        super().__init__(db, rng)
        self.down: set[str] = set()
        self.paused: set[str] = set()

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f = op["f"]
        handlers = {"kill": self._kill, "terminate": self._terminate, "pause": self._pause, "resume": self._resume,
                    "start": self._start, "restart": self._restart}
        return await guard(op, lambda: handlers[f](test, op.get("value")))

    async def _kill(self, test: dict[str, Any], selector: Any) -> list[str]:
        nodes = await self.targets(test, str(selector or "one"))
        return await self._each(test, nodes, self.db.kill, down=True, paused=False)

    async def _terminate(self, test: dict[str, Any], selector: Any) -> list[str]:
        return await self._each(test, await self.targets(test, str(selector or "one")), self.db.terminate, down=True)

    async def _pause(self, test: dict[str, Any], selector: Any) -> list[str]:
        nodes = [n for n in await self.targets(test, str(selector or "one")) if n not in self.down]
        return await self._each(test, nodes, self.db.pause, paused=True)

    async def _resume(self, test: dict[str, Any], selector: Any) -> list[str]:
        nodes = sorted(self.paused) if selector in (None, "paused") else await self.targets(test, str(selector))
        return await self._each(test, nodes, self.db.resume, paused=False)

    async def _each(self, test: dict[str, Any], nodes: list[str], action: Action, *, down: bool | None = None,
                    paused: bool | None = None) -> list[str]:
        """``action`` on each node in turn, then note what it left the node: in (True) or out of (False) the
        ``down`` and ``paused`` sets that ``start`` and ``resume`` without a selector undo; None leaves a set."""
        for n in nodes:
            await action(test, n)
            for flag, nodes_set in ((down, self.down), (paused, self.paused)):
                if flag is not None:
                    (nodes_set.add if flag else nodes_set.discard)(n)
        return nodes

    async def _start(self, test: dict[str, Any], selector: Any) -> list[str]:
        """Start the nodes ``selector`` names.  Without one, the nodes this nemesis stopped (the undo of its
        ``kill``); with ``dead`` (the final heal), every node that is down, also one whose process is gone for
        another reason -- a failpoint armed by a request that was read only after it timed out, a crash of the
        system itself -- so the heal leaves no node dead.  (Mid-run, a node another nemesis is about to restart
        -- ``crash-at`` -- must not be started twice, hence not for a bare ``start``.)"""
        if selector is None:
            candidates = sorted(self.down)
        elif selector == "dead":
            gone = [n for n in self.topo.all if n not in self.down and not await self.db.alive(test, n)]
            candidates = sorted({*self.down, *gone})
        else:
            candidates = await self.targets(test, str(selector))
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
