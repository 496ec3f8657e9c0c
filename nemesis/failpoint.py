"""The failpoint nemesis: arm and disarm a system's named failpoints, and crash a process at one step.

A failpoint is a named step in a process (our cluster: ``splitbrain admin failpoint list``) that the system can be
told to make crash, fail, delay or pause; the DB says how (:class:`harness.protocols.Failpoints`; our cluster's DB
sends its admin RPC).  :func:`admin_failpoints` arms or disarms one on many nodes and says, per node, what is known
of the outcome (the disk nemesis arms its faults through it too); ``crash-at`` arms ``1*crash``, makes the step
happen, waits for the process to die there and restarts it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from harness.protocols import FailpointRefused, Failpoints, FailpointUnreachable, Kill, Specified
from nemesis.base import NemesisBase, guard, restart_and_wait

__all__ = ["UNKNOWN", "FailpointDB", "FailpointNemesis", "KnowsPaused", "admin_failpoints", "trigger_for"]


class FailpointDB(Failpoints, Kill, Specified, Protocol):
    """What the failpoint nemesis calls: :class:`~harness.protocols.Failpoints`, and for ``crash-at`` also
    :class:`~harness.protocols.Kill` to start the process that died at the step (the fault table's ``crash-at`` row
    needs both capabilities, so validation refuses it on a system without ``kill``); and the spec's topology
    (:class:`~harness.protocols.Specified`: its selectors)."""


log = logging.getLogger("splitbrain.nemesis")


class FailpointNemesis(NemesisBase):
    """Arm/disarm the cluster's named failpoints at run time:
    ``arm-failpoint`` {"targets", "name", "action"}; ``disarm-failpoint`` {"targets", "name"} (name '*' = all);
    ``crash-at`` {"targets", "name", "timeout_s", "trigger"}: arm ``1*crash``, make the step happen (``trigger``:
    ``auto`` issues harmless controller writes for controller and Raft points, see :func:`trigger_for`), wait
    until the process dies at that step, restart it and wait until it serves.  Per node: ``crashed`` (the step
    was reached, with the seconds it took) and ``restarted`` ("ready", or why not); a step not reached in time
    is disarmed and reported."""

    FS = frozenset({"arm-failpoint", "disarm-failpoint", "crash-at"})
    db: FailpointDB

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        if op["f"] == "crash-at":
            return await guard(op, lambda: self._crash_at(test, op.get("value") or {}))
        return await guard(op, lambda: self._go(test, op["f"], op.get("value") or {}))

    async def _crash_at(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        name = str(value.get("name") or "")
        if not name or name == "*":
            raise ValueError("crash-at: 'name' must name one failpoint (see `splitbrain admin failpoint list`)")
        timeout_s = float(value.get("timeout_s", 30.0))
        nodes = [n for n in await self.targets(test, str(value.get("targets", "one"))) if await self.db.alive(test, n)]
        armed = await admin_failpoints(self.db, test, nodes, "arm-failpoint", name, "1*crash")
        report: dict[str, Any] = {n: {"armed": r} for n, r in armed.items()}
        loop = asyncio.get_running_loop()
        # An arm that got no answer may still be applied (a paused node reads it when it resumes), so such a node
        # is watched like an armed one: if it dies at the step, it is restarted and reported as crashed.
        t0, pending = loop.time(), {n for n, r in armed.items() if r == "ok" or r.startswith(UNKNOWN)}
        trigger = trigger_for(name, str(value.get("trigger", "auto")))
        writes: dict[str, int] = {"ok": 0, "failed": 0}
        next_write = t0
        while pending and loop.time() - t0 < timeout_s:
            if trigger == "controller-write" and loop.time() >= next_write:
                next_write = loop.time() + 0.5
                writes["ok" if await self.db.probe_write(test) else "failed"] += 1
            await asyncio.sleep(0.1)
            for n in sorted(pending):
                if not await self.db.alive(test, n):
                    pending.discard(n)
                    report[n]["crashed"] = round(loop.time() - t0, 2)
        for n in sorted(pending):  # never reached: take the trap away again
            report[n]["crashed"] = False
            report[n]["disarm"] = (await admin_failpoints(self.db, test, [n], "disarm-failpoint", name))[n]
            if not await self.db.alive(test, n):  # it died at the step while being disarmed
                report[n]["crashed"] = round(loop.time() - t0, 2)
        for n, r in report.items():
            if r.get("crashed"):
                r.update(await restart_and_wait(self.db, test, n, float(value.get("ready_timeout_s", 30.0))))
        out: dict[str, Any] = {"name": name, "nodes": report, "trigger": trigger}
        if trigger == "controller-write":
            out["writes"] = writes
        return out

    async def _go(self, test: dict[str, Any], f: str, value: Mapping[str, Any]) -> dict[str, Any]:
        nodes = await self.targets(test, str(value.get("targets", "all")))
        results = await admin_failpoints(self.db, test, nodes, f, str(value.get("name", "*")),
                                         str(value.get("action", "1*crash")))
        return {**dict(value), "results": results}


def trigger_for(name: str, trigger: str) -> str:
    """What makes failpoint ``name`` fire (pure): ``auto`` picks ``controller-write`` for controller and
    Raft points (a steady controller writes nothing, so without one such a point is never reached) and
    ``none`` for the rest (the workload drives them)."""
    if trigger != "auto":
        return trigger
    return "controller-write" if name.startswith(("controller.", "raft.")) else "none"


@runtime_checkable
class KnowsPaused(Protocol):
    """A DB that remembers which nodes it has SIGSTOPped (``systems.splitbrain.db.SplitbrainDB``)."""

    def is_paused(self, node: str) -> bool: ...


UNKNOWN = "unknown: "
"""The prefix of an admin result whose request was sent but never answered (:func:`admin_failpoints`)."""


async def admin_failpoints(db: Failpoints, test: dict[str, Any], nodes: Sequence[str], f: str, name: str,
                           action: str = "1*crash") -> dict[str, str]:
    """``arm-failpoint`` / ``disarm-failpoint`` ``name`` on each node through the DB; per node
    "ok", "unreachable: ..." (no connection: nothing was sent), "error: ..." (the node refused) or
    "unknown: ..." (sent, no answer: a node that was slow, or stopped by something other than this DB, applies it
    when it gets to it, seconds later -- so such an arm must be treated as possibly in effect, never as one that did
    not happen), or "skipped: paused" for a node the DB has SIGSTOPped (``db.is_paused``): a failpoint armed there
    would fire after the resume, long after the step that armed it ended.  A dead node is not a failure of the
    nemesis."""
    results: dict[str, str] = {}
    for n in nodes:
        if isinstance(db, KnowsPaused) and db.is_paused(n):
            results[n] = "skipped: paused (it would read the request only when resumed, and act on it then)"
            continue
        try:
            await db.set_failpoint(test, n, name, action if f == "arm-failpoint" else None)
            results[n] = "ok"
        except FailpointUnreachable as exc:
            results[n] = f"unreachable: {exc}"
        except FailpointRefused as exc:
            results[n] = f"error: {exc}"
        except Exception as exc:  # timeout, connection lost: the request may still be read and applied
            results[n] = f"{UNKNOWN}{exc}"
    return results
