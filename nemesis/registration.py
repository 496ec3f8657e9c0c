"""The ``registration-crash`` nemesis: crash brokers at every registration step.

It walks the system's registration failpoints (:class:`harness.protocols.Registration`: our cluster's broker
offers them) in order, one per op, on extra broker processes (the DB's ``extra_brokers``, broker set
``rcrash-0``, rotating over the spec's broker nodes): for the first-registration points (our broker:
GetNextBrokerId .. meta rename) it crashes a *fresh* broker; for the others (``broker.register.*``) it first starts
the broker once (so it has a meta file), stops it, then crashes its restart.  After the crash it restarts the
broker on a *changed* port and records the id it came back with, then stops it.  Completion value::

    {"failpoint": FP, "node": N, "slot": S, "broker_name": BS, "identity": "N/S",
     "first": {...start_slot result...} (register.* only),
     "crash": {"hit": bool, "files": {name: {"broker_id": I} | {"corrupt": msg}}},
     "restart": {"broker_id": I, "broker_epoch": E, "addr": A} | {"refused": True, "log": tail}}

``workloads.broker_ids`` turns these into ``broker-id`` observations (ids stable per identity) and flags a
refused restart.

:data:`REGISTRATION_POINTS` is the walk a schedule is planned from before any DB exists (the package's kinds,
:mod:`nemesis.packages`): our broker's failpoint names, written here because the nemesis layer imports nothing of
the system under test; a unit test holds it equal to the broker's own table
(``system_under_test.broker.registration.FAILPOINTS``), as :data:`nemesis.packages.PROTOCOL_POINTS` names the
controller and replication steps.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from harness.protocols import ExtraBrokerSlots, Registration

__all__ = ["REGISTRATION_POINTS", "RegistrationCrashNemesis"]

log = logging.getLogger("splitbrain.nemesis.registration")

REGISTRATION_POINTS: tuple[str, ...] = (
    "broker.get_next_broker_id.before", "broker.get_next_broker_id.after_reply",
    "broker.meta_temp.before_write", "broker.meta_temp.after_write",
    "broker.apply_broker_id.before", "broker.apply_broker_id.after_reply",
    "broker.meta.before_rename", "broker.meta.after_rename",
    "broker.register.before", "broker.register.after_reply",
)
"""Our broker's registration failpoints in the order a first start passes them (see the module docstring)."""


class RegistrationCrashNemesis:
    """The ``registration-crash`` nemesis (see the module docstring).  Value: None (next point in the walk) or
    ``{"failpoint": FP}``; brokers rotate over the DB's broker nodes, broker set ``broker_name``.  It asks the DB
    for nothing until its first op (packages are built, and their schedules planned, before a run has a DB that
    can start brokers)."""

    FS = frozenset({"registration-crash"})

    def __init__(self, db: Registration, rng: random.Random, *, broker_name: str = "rcrash-0",
                 base_port: int = 10960, timeout_s: float = 10.0) -> None:
        self.db = db
        self.rng = rng
        self.broker_name = broker_name
        self.base_port = base_port
        self.timeout_s = timeout_s
        self.extra: ExtraBrokerSlots | None = None
        self.count = 0

    def fs(self) -> frozenset[str]:
        return self.FS

    async def setup(self, test: dict[str, Any]) -> RegistrationCrashNemesis:
        return self

    async def teardown(self, test: dict[str, Any]) -> None:
        if self.extra is not None:
            await self.extra.kill_all(test)

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        raw = op.get("value")
        value: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        n = self.count
        self.count += 1
        points, nodes = self.db.registration_failpoints, self.db.broker_nodes
        fp = str(value.get("failpoint") or points[n % len(points)])
        if not nodes:
            return {**op, "type": "info", "error": "registration-crash: the spec has no broker nodes"}
        if self.extra is None:
            self.extra = self.db.extra_brokers("rcrash")
        extra = self.extra
        node, slot = nodes[n % len(nodes)], f"rc{n}"
        port = self.base_port + 2 * (n % 20)
        out: dict[str, Any] = {"failpoint": fp, "node": node, "slot": slot, "broker_name": self.broker_name,
                               "identity": f"{node}/{slot}"}
        try:
            if fp not in self.db.first_registration_failpoints:
                out["first"] = await extra.start_slot(test, node, slot, self.broker_name, port,
                                                      timeout_s=self.timeout_s)
                await extra.kill(test, node, slot)
            out["crash"] = await extra.crash_at(test, node, slot, self.broker_name, port, fp,
                                                timeout_s=self.timeout_s)
            out["restart"] = await extra.start_slot(test, node, slot, self.broker_name, port + 1,
                                                    timeout_s=self.timeout_s)
        except Exception as exc:
            log.warning("registration-crash at %s failed: %r", fp, exc)
            return {**op, "type": "info", "value": out, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            await extra.kill(test, node, slot)
        return {**op, "type": "info", "value": out}
