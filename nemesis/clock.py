"""The clock nemesis: per-process clock faults, through whichever clock control the system offers.

Containers and namespaces share the host's kernel clock, so the faults act on the process.  The nemesis calls one
protocol, :class:`harness.protocols.Clocks` (``set_clock`` / ``read_clock``), which a system offers in one of two
ways (the fault table's clock rows need either: :class:`nemesis.faults.AnyOf`):

* ``clock-admin`` (our cluster): every cluster process reads time only through ``system_under_test/clock.py``,
  whose offset and rate the cluster's DB sets over the admin RPC ADMIN_CLOCK_SET.
* ``clock-faketime`` (e.g. the counter self-test): its processes run under libfaketime, and the DB rewrites a
  node's control file (:mod:`harness.node_processes`).  Only the wall clock moves, and only in programs that read
  it through the C library.

Honest faults: a node whose change did not take effect (not running, not answering, refused, not under
libfaketime, file not written) is left out of ``nodes`` and named with the reason under ``not_taken``; if no node
took it, the op completes with an ``error``, so fault accounting counts it as not effective.

The host clock never changes.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from harness.protocols import Clocks, Specified
from nemesis.base import NemesisBase, guard

__all__ = ["ClockDB", "ClockNemesis"]

log = logging.getLogger("splitbrain.nemesis")


class ClockDB(Clocks, Specified, Protocol):
    """What the clock nemesis calls of a DB: :class:`~harness.protocols.Clocks`, and the spec's topology (its
    selectors)."""


class ClockNemesis(NemesisBase):
    """Per-process clock faults through the DB's :class:`~harness.protocols.Clocks` (the host clock is untouched).

    ``bump-clock`` {"targets", "delta_ms"}: jump by delta (forward or back).
    ``strobe-clock`` {"targets", "delta_ms", "period_ms", "duration_s"}: oscillate between +delta and 0.
    ``skew-clock`` {"targets", "rate"}: run the clock at ``rate`` times real speed.
    ``reset-clock``: offset 0 and rate 1 everywhere.  ``check-clock-offsets``: read every node's offset.
    """

    FS = frozenset({"bump-clock", "strobe-clock", "skew-clock", "reset-clock", "check-clock-offsets"})
    db: ClockDB

    def __init__(self, db: ClockDB, rng: random.Random) -> None:
        super().__init__(db, rng)
        self._strobes: list[asyncio.Task[None]] = []

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        value = op.get("value") or {}
        f = op["f"]
        if f == "reset-clock":
            return await guard(op, lambda: self._reset(test))
        if f == "check-clock-offsets":
            return await guard(op, lambda: self._offsets(test, self.topo.all))
        return await guard(op, lambda: self._fault(test, f, value))

    async def _fault(self, test: dict[str, Any], f: str, value: Mapping[str, Any]) -> dict[str, Any]:
        """Apply ``f`` to each target's clock.

        Raises:
            RuntimeError: it took effect on no target (the reason of each), so the op completes with an error.
        """
        nodes = await self.targets(test, str(value.get("targets", "one")))
        done: list[str] = []
        not_taken: dict[str, str] = {}
        for n in nodes:
            try:
                if f == "bump-clock":
                    current = float((await self.db.read_clock(test, n))["offset_ms"])
                    await self.db.set_clock(test, n, offset_ms=current + float(value.get("delta_ms", 60_000)))
                elif f == "skew-clock":
                    await self.db.set_clock(test, n, rate=float(value.get("rate", 2.0)))
                else:  # strobe: check now that the node can take it; the task flips its offset
                    await self.db.read_clock(test, n)
                done.append(n)
            except Exception as exc:
                not_taken[n] = str(exc) or type(exc).__name__
        if not done:
            reasons = "; ".join(f"{n}: {why}" for n, why in not_taken.items()) or "no target"
            raise RuntimeError(f"{f} took effect on no node ({reasons})")
        if f == "strobe-clock":
            self._strobes.append(asyncio.get_running_loop().create_task(self._strobe(
                test, done, float(value.get("delta_ms", 200)), float(value.get("period_ms", 100)) / 1000,
                float(value.get("duration_s", 5)))))
        out = {**dict(value), "nodes": done, "offsets": await self._offsets(test, done)}
        if not_taken:
            out["not_taken"] = not_taken
        return out

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
                    await self.db.set_clock(test, n, offset_ms=delta if high else 0.0)
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
                await self.db.set_clock(test, n, offset_ms=0.0)
            except Exception as exc:
                log.info("strobe reset on %s: %s", n, exc)

    async def _offsets(self, test: dict[str, Any], nodes: Sequence[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for n in nodes:
            try:
                c = await self.db.read_clock(test, n)
                out[n] = {k: c[k] for k in ("offset_ms", "rate", "skew_ms", "line") if k in c}
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
                await self.db.set_clock(test, n, reset=True)
            except Exception as exc:  # a dead node has no clock to reset; its restart starts at true time
                failed[n] = str(exc)
        return {"reset": [n for n in self.topo.all if n not in failed], "unreachable": failed}

    async def teardown(self, test: dict[str, Any]) -> None:
        for t in self._strobes:
            t.cancel()
