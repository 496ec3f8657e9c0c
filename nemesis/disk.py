"""Disk faults: slow fsync, full disk, I/O errors, lost unsynced writes, corrupted files.

Two halves, like the rest of the nemeses:

* the **node side** is the system's own tool, which knows its store's format (the DB's ``store_tool``: the
  ``store-files`` capability, :class:`StoreDB`; our cluster's is :mod:`systems.splitbrain.store_tool`).  It is run
  on the node through the control backend on a *dead* broker's store and prints one JSON object saying exactly what
  it changed;
* :class:`DiskNemesis` (harness side) arms the store's failpoints through the DB (:class:`harness.protocols.
  Failpoints`) for the live faults, and for the crash faults kills the broker, runs the node side, restarts it and
  records whether it came back, repaired the damage, or refused to start (and its log line).

Faults (``start-disk`` value ``{"fault": F, "targets": SEL, "delay_ms": N}``):

* ``slow-fsync`` -- every fsync takes ``delay_ms`` longer (brokers: ``store.before_fsync``;
  controllers: ``raft.before_persist``); shows in the broker's ``disk.fsync_*_ms`` status;
* ``enospc`` -- commit-log writes fail with "no space left" (DISK_FULL to producers, nothing
  appended);
* ``eio-write`` / ``eio-fsync`` / ``eio-read`` -- commit-log writes / fsyncs / reads fail with EIO.

``stop-disk`` disarms them all.  ``lose-unfsynced`` kills a broker and cuts its commit log at the
synced offset the store last published -- or, when the DB keeps its stores on a lazy file system
(``cluster.store_fs: lazyfs``, :mod:`nemesis.lazyfs`), tells it to drop every write the broker never fsynced, which
does not trust the store's own account of its fsyncs.  ``corrupt-file`` kills a broker and damages one commit-log
segment (:data:`CORRUPT_MODES`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from harness.protocols import Failpoints, Kill, Specified, StoreFiles
from nemesis.base import NemesisBase, guard, restart_and_wait
from nemesis.disk_kinds import CORRUPT_MODES, DISK_FAILPOINTS, FAULTS, REPAIRABLE_MODES
from nemesis.failpoint import admin_failpoints

__all__ = ["CORRUPT_MODES", "FAULTS", "REPAIRABLE_MODES", "DiskNemesis", "StoreDB"]


class StoreDB(StoreFiles, Failpoints, Kill, Specified, Protocol):
    """What the disk nemesis calls of a DB: its store tool (:class:`~harness.protocols.StoreFiles`: the crash
    faults), its failpoints (the live faults), kill/start (it kills the broker around the surgery) and the spec's
    topology (:class:`~harness.protocols.Specified`: its selectors)."""


class DiskNemesis(NemesisBase):
    """Disk faults (module docstring): start-disk, stop-disk, lose-unfsynced, corrupt-file."""

    FS = frozenset({"start-disk", "stop-disk", "lose-unfsynced", "corrupt-file"})
    db: StoreDB

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        value = op.get("value") or {}
        handlers = {"start-disk": self._start, "stop-disk": self._stop, "lose-unfsynced": self._lose,
                    "corrupt-file": self._corrupt}
        return await guard(op, lambda: handlers[op["f"]](test, value))

    async def _start(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        fault = str(value.get("fault", "slow-fsync"))
        if fault not in FAULTS:
            raise ValueError(f"start-disk: unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        broker_point, controller_point, template = FAULTS[fault]
        action = template.format(delay_ms=int(value.get("delay_ms", 100)))
        nodes = await self.targets(test, str(value.get("targets", "brokers:one")))
        results: dict[str, str] = {}
        for n in nodes:
            point = broker_point if n in self.topo.brokers else controller_point
            if point is None:
                results[n] = f"skipped: {fault} applies to brokers only"
                continue
            results.update(await admin_failpoints(self.db, test, [n], "arm-failpoint", point, action))
        return {"fault": fault, "action": action, "nodes": nodes, "results": results}

    async def _stop(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        results: dict[str, str] = {}
        for point in DISK_FAILPOINTS:
            for n, r in (await admin_failpoints(self.db, test, self.topo.brokers, "disarm-failpoint", point)).items():
                if results.get(n, "ok") == "ok":  # keep the first failure per node
                    results[n] = r
        controller = await admin_failpoints(self.db, test, self.topo.controllers, "disarm-failpoint",
                                            "raft.before_persist")
        return {"results": {**results, **controller}}

    async def _brokers(self, test: dict[str, Any], value: Mapping[str, Any]) -> list[str]:
        nodes = await self.targets(test, str(value.get("targets", "brokers:one")))
        brokers = [n for n in nodes if n in self.topo.brokers]
        if not brokers:
            raise ValueError(f"targets {value.get('targets')!r} resolved to {nodes}: no brokers (disk faults that "
                             f"touch files apply to brokers only)")
        return brokers

    async def _node_tool(self, test: dict[str, Any], node: str, args: Sequence[str]) -> dict[str, Any]:
        res = await test["remote"].exec(node, [*self.db.store_tool(test, node), *args], timeout_s=60)
        if res.exit_code != 0:
            raise RuntimeError(f"store tool {args[0]} on {node} exited {res.exit_code}: {res.stderr.strip()[-400:]}")
        out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
        return out

    async def _crash_and(self, test: dict[str, Any], value: Mapping[str, Any], args: Sequence[str],
                         seeded: bool) -> dict[str, Any]:
        """Kill each target broker, run the node tool on its store, restart it, report per node."""
        report: dict[str, Any] = {}
        for n in await self._brokers(test, value):
            was_alive = await self.db.alive(test, n)
            if was_alive:
                await self.db.kill(test, n)
            extra = ["--seed", str(self.rng.randrange(2**31))] if seeded else []
            entry = await self._node_tool(test, n, [*args, *extra])
            entry["was_alive"] = was_alive
            if was_alive:  # a node another nemesis killed stays down for that nemesis to restart
                entry.update(await restart_and_wait(self.db, test, n, float(value.get("ready_timeout_s", 20))))
            report[n] = entry
        return report

    async def _lose(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        if self.db.lazy_store:
            return {"store_fs": "lazyfs", "nodes": await self._lose_lazyfs(test, value)}
        return {"nodes": await self._crash_and(test, value, ["lose-unfsynced"], seeded=False)}

    async def _lose_lazyfs(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        """``lose-unfsynced`` over lazyfs: kill the target brokers, let each store's file system drop every write
        that was never fsynced (whatever the store claims it fsynced), restart them.  One power cut for all the
        targets: every one is down and crashed before any restarts, so none refills another's log in between.
        Records the bytes really dropped per file; 0 when nothing was pending, said in ``note``."""
        nodes = await self._brokers(test, value)
        report: dict[str, Any] = {}
        for n in nodes:
            was_alive = await self.db.alive(test, n)
            if was_alive:
                await self.db.kill(test, n)
            report[n] = {"was_alive": was_alive}
        for n in nodes:
            crash = await self.db.lazyfs_crash(test, n)
            entry = report[n]
            entry.update({"dropped": int(crash.get("dropped", 0)), "files": crash.get("files", {})})
            if not entry["dropped"]:
                entry["note"] = "nothing was pending: every write had been fsynced, the crash dropped 0 bytes"
        for n in nodes:
            if report[n]["was_alive"]:  # a node another nemesis killed stays down for that nemesis to restart
                report[n].update(await restart_and_wait(self.db, test, n, float(value.get("ready_timeout_s", 20))))
        return report

    async def _corrupt(self, test: dict[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
        mode = str(value.get("mode", "bitflip-tail"))
        if mode not in CORRUPT_MODES:
            raise ValueError(f"corrupt-file: unknown mode {mode!r}; known: {', '.join(CORRUPT_MODES)}")
        return {"mode": mode, "nodes": await self._crash_and(test, value, ["corrupt", "--mode", mode], seeded=True)}

    async def teardown(self, test: dict[str, Any]) -> None:
        await self._stop(test, {})
