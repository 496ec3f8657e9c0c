"""The ``registration-crash`` nemesis: crash brokers at every registration step.

It walks :data:`FAILPOINTS` in order, one per op, on extra broker processes (:mod:`harness.extra_brokers`,
broker set ``rcrash-0``, rotating over the spec's broker nodes): for the first-registration points
(GetNextBrokerId .. meta rename) it crashes a *fresh* broker; for ``broker.register.*`` it first starts the
broker once (so it has a meta file), stops it, then crashes its restart.  After the crash it restarts the
broker on a *changed* port and records the id it came back with, then stops it.  Completion value::

    {"failpoint": FP, "node": N, "slot": S, "broker_name": BS, "identity": "N/S",
     "first": {...start_slot result...} (register.* only),
     "crash": {"hit": bool, "files": {name: {"broker_id": I} | {"corrupt": msg}}},
     "restart": {"broker_id": I, "broker_epoch": E, "addr": A} | {"refused": True, "log": tail}}

``workloads.broker_ids`` turns these into ``broker-id`` observations (ids stable per identity) and flags a
refused restart.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from harness.extra_brokers import ExtraBrokers, crash_at, start_slot
from system_under_test.broker.registration import FAILPOINTS

__all__ = ["FAILPOINTS", "FIRST_REGISTRATION_POINTS", "RegistrationCrashNemesis"]

log = logging.getLogger("splitbrain.nemesis.registration")

FIRST_REGISTRATION_POINTS: tuple[str, ...] = tuple(fp for fp in FAILPOINTS if not fp.startswith("broker.register."))
"""Points only a broker without ``.broker.meta`` passes (it must be fresh to reach them)."""


class RegistrationCrashNemesis:
    """The ``registration-crash`` nemesis (see the module docstring).  Value: None (next point in the walk) or
    ``{"failpoint": FP}``; brokers rotate over the spec's broker nodes, broker set ``broker_name``."""

    FS = frozenset({"registration-crash"})

    def __init__(self, db: Any, rng: random.Random, *, broker_name: str = "rcrash-0", base_port: int = 10960,
                 timeout_s: float = 10.0) -> None:
        self.db = db
        self.rng = rng
        self.broker_name = broker_name
        self.base_port = base_port
        self.timeout_s = timeout_s
        self.extra = ExtraBrokers(db, root="rcrash")
        self.count = 0
        self.nodes = tuple(n for s in db.spec.nodes.broker_sets for n in s)

    def fs(self) -> frozenset[str]:
        return self.FS

    async def setup(self, test: dict[str, Any]) -> RegistrationCrashNemesis:
        return self

    async def teardown(self, test: dict[str, Any]) -> None:
        await self.extra.kill_all(test)

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        raw = op.get("value")
        value: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        n = self.count
        self.count += 1
        fp = str(value.get("failpoint") or FAILPOINTS[n % len(FAILPOINTS)])
        if not self.nodes:
            return {**op, "type": "info", "error": "registration-crash: the spec has no broker nodes"}
        node, slot = self.nodes[n % len(self.nodes)], f"rc{n}"
        port = self.base_port + 2 * (n % 20)
        out: dict[str, Any] = {"failpoint": fp, "node": node, "slot": slot, "broker_name": self.broker_name,
                               "identity": f"{node}/{slot}"}
        try:
            if fp not in FIRST_REGISTRATION_POINTS:
                out["first"] = await start_slot(self.extra, test, node, slot, self.broker_name, port,
                                                timeout_s=self.timeout_s)
                await self.extra.kill(test, node, slot)
            out["crash"] = await crash_at(self.extra, test, node, slot, self.broker_name, port, fp,
                                          timeout_s=self.timeout_s)
            out["restart"] = await start_slot(self.extra, test, node, slot, self.broker_name, port + 1,
                                              timeout_s=self.timeout_s)
        except Exception as exc:
            log.warning("registration-crash at %s failed: %r", fp, exc)
            return {**op, "type": "info", "value": out, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            await self.extra.kill(test, node, slot)
        return {**op, "type": "info", "value": out}
