"""The ``membership`` workload: brokers join, leave (controlled shutdown), bounce and get fenced (KIP-631/380).

In a nutshell.  The workload runs ``brokers`` extra broker processes (the DB's ``extra_brokers``, our cluster's
``systems.splitbrain.extra_brokers``) of one broker set ``mem-0`` on the spec's broker nodes, one fixed port per
slot, and drives their membership one lifecycle op at a time (other threads read the controller's table meanwhile):

* ``bounce`` ``{"slot"}``: SIGKILL and restart at once (faster than the lease).  Value adds ``before`` /
  ``after`` (broker id and broker epoch).  Anomalies ``bounce-kept-epoch`` (the new incarnation did not get a
  higher broker epoch) and ``bounce-changed-id``.
* ``leave`` ``{"slot"}``: SIGTERM (controlled shutdown), wait for the exit, read the controller's master, then
  start the broker again.  Value adds ``broker_id`` (the id the leaving process reported as registered, None
  if it reported none: not registered yet, or not answering), ``master_before`` (the controller's master id
  before the SIGTERM), ``was_master`` (``broker_id`` is an id and the controller named it master),
  ``exited``, ``master_after`` (master id right after the exit), ``others`` (live members left); built by the
  pure :func:`~system_under_test.client.workload_requests.leave_record` (the simulated client builds it too).
  Anomaly ``shutdown-kept-mastership``: a master that shut down in a controlled
  way while others were alive was still the master when its process had exited -- judged only when the
  leaving broker's id is known (a process with no id cannot have been master, and "no master" afterwards is
  what the rule asks for).
* ``stale-heartbeat`` ``{"slot"}`` (after every bounce/leave, for that slot): a BROKER_HEARTBEAT carrying the
  broker epoch of the slot's previous incarnation.  Value adds ``stale_epoch``, ``refused``.  Anomaly
  ``stale-epoch-accepted``.
* ``pause-write`` ``{}``: SIGSTOP the current master for longer than the lease, SIGCONT it, read the
  controller's view and at once send it one write directly.  Value adds ``acked``, ``controller`` (master id and
  epoch the controller reported just before the send), ``paused`` (the broker id).  Anomaly
  ``fenced-broker-acked``: the paused broker acknowledged although the controller had made another broker
  master in a newer epoch before the send.
* ``read-members`` ``{}``: GetReplicaInfo of ``mem-0`` (observations for the invariant checker).

Checkers: ``membership`` (the anomalies above), ``invariants`` (``checker.invariants`` over the ids, broker
epochs and master epochs seen), ``stats``.  Every ``read-members`` is one observation of the observer
``controller-table`` spanning its op (invoke to completion): reads of several threads overlap, and only a read
that completed before another was invoked bounds what that one may return.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from checker.compose import Anomaly, result_from_anomalies
from checker.invariants import check_invariants
from harness import generator as g
from harness.errors import SpecError
from harness.protocols import ExtraBrokerSlots
from system_under_test.client.workload_requests import (
    PAUSE_WRITE_FRACTION,
    leave_record,
    lifecycle_op,
    read_value,
    replica_info_call,
    stale_heartbeat_call,
    stale_heartbeat_value,
)
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS
from workloads.common import (
    BrokerSpawningClient,
    InvariantOps,
    StatsChecker,
    cluster_name,
    completion_for,
    invocation,
    invoke_times,
    op_dicts,
    option,
    parse_options,
)
from workloads.registry import Workload, WorkloadContext, register

__all__ = ["LIFECYCLE_FS", "MEMBERSHIP_FS", "MembershipChecker", "MembershipClient", "MembershipGen",
           "MembershipOptions", "build_membership", "leave_record", "membership_anomalies"]

SET = "mem-0"
LIFECYCLE_FS = frozenset({"bounce", "leave", "stale-heartbeat", "pause-write"})
MEMBERSHIP_FS = LIFECYCLE_FS | {"read-members"}


@dataclass(frozen=True)
class MembershipOptions:
    brokers: int = option(3, 2, 6, allowed="an integer in [2, 6]")
    base_port: int = option(10980, 1024, 60000, allowed="a port in [1024, 60000]")
    lease_ms: int = option(DEFAULT_LEASE_TIMEOUT_MS, 100, 600_000,
                           allowed="the cluster's lease_timeout_ms (milliseconds)")
    spawn_timeout_s: float = option(8.0, 0.5, 120.0, allowed="seconds in [0.5, 120]")
    pause_write_fraction: float = option(PAUSE_WRITE_FRACTION, 0.0, 1.0, allowed="a number in [0, 1]")



# ---------------------------------------------------------------------------------------------
# Generator (pure)


@dataclass(frozen=True, slots=True)
class MembershipGen:
    """One lifecycle op in flight at a time (``busy``); reads of the table on the other free threads."""

    slots: tuple[str, ...]
    options: MembershipOptions
    busy: bool = False
    stale_next: str | None = None  # the slot just bounced: the next lifecycle op replays its old epoch
    bounced: bool = False  # the first lifecycle op is a bounce, so even a short run has one (stats needs it)

    def op(self, ctx: g.Context) -> Any:
        if ctx.free_thread() is None:
            return (g.PENDING, self)
        if self.busy:
            return (invocation(ctx, "read-members", {}), self)
        f, value = lifecycle_op(ctx.rng, self.slots, self.stale_next, self.bounced,
                                pause_write_fraction=self.options.pause_write_fraction)
        stale_next = value["slot"] if f in ("bounce", "leave") else None
        return (invocation(ctx, f, value), replace(self, busy=True, stale_next=stale_next,
                                                   bounced=self.bounced or f == "bounce"))

    def update(self, ctx: g.Context, event: dict[str, Any]) -> MembershipGen:
        if event.get("type") in ("ok", "fail", "info") and event.get("f") in LIFECYCLE_FS:
            return replace(self, busy=False)
        return self


# ---------------------------------------------------------------------------------------------
# Client (shell)


class MembershipClient(BrokerSpawningClient):
    """Drives the extra brokers of ``mem-0``; ``epochs`` remembers every broker epoch per slot (shared)."""

    def __init__(self, db: object, options: MembershipOptions, slots: Sequence[tuple[str, str]], *,
                 extra: ExtraBrokerSlots | None = None, controller: Any = None,
                 epochs: dict[str, list[tuple[int, int]]] | None = None) -> None:
        self._db = db
        self._workload = "membership"
        self.options = options
        self.slots = {slot: node for node, slot in slots}
        self.extra_root = "membership"
        self._extra = extra
        self.controller = controller
        self.epochs: dict[str, list[tuple[int, int]]] = epochs if epochs is not None else {}

    @property
    def cluster_name(self) -> str:
        return cluster_name(self._db)

    def port(self, slot: str) -> int:
        return self.options.base_port + sorted(self.slots).index(slot)

    async def open(self, test: dict[str, Any], node: str) -> MembershipClient:
        return MembershipClient(self._db, self.options, [(n, s) for s, n in self.slots.items()], extra=self.extra,
                                controller=self.db.client(test, timeout_s=1.5), epochs=self.epochs)

    async def _start(self, test: dict[str, Any], slot: str) -> dict[str, Any]:
        res = await self.extra.start_slot(test, self.slots[slot], slot, SET, self.port(slot),
                                          timeout_s=self.options.spawn_timeout_s)
        if isinstance(res.get("broker_id"), int) and isinstance(res.get("broker_epoch"), int):
            self.epochs.setdefault(slot, []).append((res["broker_id"], res["broker_epoch"]))
        return res

    async def setup(self, test: dict[str, Any]) -> None:
        """Start every slot (bounded) and wait for a master of ``mem-0``.

        Raises:
            RuntimeError: a slot did not come up, or no master within 20 s (names them).
        """
        for slot in sorted(self.slots):
            res = await self._start(test, slot)
            if "broker_id" not in res:
                raise RuntimeError(f"membership: broker {slot} on {self.slots[slot]} did not start: {res}")
        client = self.db.client(test, timeout_s=1.0)
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                with contextlib.suppress(Exception):
                    if (await client.get_replica_info(SET)).get("master_id"):
                        return
                await asyncio.sleep(0.2)
        finally:
            await client.close()
        raise RuntimeError(f"membership: {SET} has no master 20 s after its brokers started")

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f, v = op["f"], dict(op.get("value") or {})
        try:
            if f == "read-members":
                resp = await self.controller.call(*replica_info_call(SET))
                return {**op, "type": "ok", "value": read_value(f, v, 0, resp.header, resp.body)}
            if f == "bounce":
                return {**op, "type": "ok", "value": {**v, **await self._bounce(test, v["slot"])}}
            if f == "leave":
                return {**op, "type": "ok", "value": {**v, **await self._leave(test, v["slot"])}}
            if f == "stale-heartbeat":
                return await self._stale(test, op, v)
            if f == "pause-write":
                return {**op, "type": "ok", "value": {**v, **await self._pause_write(test)}}
        except Exception as exc:
            return completion_for(op, exc, read_only=f == "read-members")
        return {**op, "type": "fail", "error": f"membership: unknown f {f!r}; expected {sorted(MEMBERSHIP_FS)}"}

    async def _info(self, test: dict[str, Any], slot: str) -> dict[str, Any]:
        try:
            return await self.extra.runtime_info(test, self.slots[slot], self.port(slot))
        except Exception:
            return {}

    async def _bounce(self, test: dict[str, Any], slot: str) -> dict[str, Any]:
        before = await self._info(test, slot)
        await self.extra.kill(test, self.slots[slot], slot)
        after = await self._start(test, slot)
        return {"before": {"broker_id": before.get("broker_id"), "broker_epoch": before.get("broker_epoch")},
                "after": {k: after.get(k) for k in ("broker_id", "broker_epoch", "refused", "timeout")}}

    async def _leave(self, test: dict[str, Any], slot: str) -> dict[str, Any]:
        node = self.slots[slot]
        mine = await self._info(test, slot)
        info = await self.controller.get_replica_info(SET)
        others = 0
        for s in self.slots:
            if s != slot and (await self._info(test, s)).get("broker_id"):
                others += 1
        await self.extra.terminate(test, node, slot)
        deadline = time.monotonic() + 10
        while await self.extra.alive(test, node, slot) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        exited = not await self.extra.alive(test, node, slot)
        after = await self.controller.get_replica_info(SET)
        await self._start(test, slot)
        return leave_record(mine, info, after, exited=exited, others=others)

    async def _stale(self, test: dict[str, Any], op: dict[str, Any], v: dict[str, Any]) -> dict[str, Any]:
        from system_under_test.protocol.errors import RpcError

        slot = v["slot"]
        seen = self.epochs.get(slot, [])
        if len(seen) < 2:
            return {**op, "type": "fail", "error": f"no earlier incarnation of {slot} known yet"}
        (bid, stale), (_, current) = seen[-2], seen[-1]
        code, header = stale_heartbeat_call(self.cluster_name, SET, bid,
                                            self.extra.addr(test, self.slots[slot], self.port(slot)), stale,
                                            self.options.lease_ms)
        try:
            await self.controller.call(code, header)
            reply = 0
        except RpcError as exc:
            reply = int(exc.code)
            if stale_heartbeat_value(v, bid, stale, current, reply) is None:
                raise
        return {**op, "type": "ok", "value": stale_heartbeat_value(v, bid, stale, current, reply)}

    async def _pause_write(self, test: dict[str, Any]) -> dict[str, Any]:
        from system_under_test.protocol import RequestCode, connect

        info = await self.controller.get_replica_info(SET)
        slot = next((s for s in self.slots
                     if info.get("master_addr") == self.extra.addr(test, self.slots[s], self.port(s))), None)
        if slot is None:
            return {"skipped": f"no extra broker is master ({info.get('master_addr')})"}
        node = self.slots[slot]
        pid = self.extra.pids.get((node, slot))
        if pid is None:
            return {"skipped": f"{slot} is not running"}
        await test["remote"].signal(node, pid, 19)
        try:
            await asyncio.sleep(self.options.lease_ms / 1000 + 1.5)
        finally:
            await test["remote"].signal(node, pid, 18)
        view = await self.controller.get_replica_info(SET)
        out: dict[str, Any] = {"slot": slot, "paused": info.get("master_id"), "paused_epoch": info.get("master_epoch"),
                               "controller": {"master_id": view.get("master_id"),
                                              "master_epoch": view.get("master_epoch")}}
        conn = await connect(self.extra.addr(test, node, self.port(slot)), timeout_s=1.0)
        try:
            resp = await conn.request(RequestCode.SEND_MESSAGE, {"topic": "mem", "queue_id": 0},
                                      [[b"fenced?", "", {}]], timeout_s=3.0)
            out.update({"acked": True, "ack_master_epoch": resp.header.get("master_epoch")})
        except Exception as exc:
            out.update({"acked": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
        finally:
            conn.close()
        return out



# ---------------------------------------------------------------------------------------------
# Checkers (pure)


def membership_anomalies(history: Sequence[Any]) -> dict[str, list[Anomaly]]:
    """The workload's own anomalies (see the module docstring) from ok lifecycle ops (pure)."""
    out: dict[str, list[Anomaly]] = {}

    def add(type_: str, d: Mapping[str, Any], expected: Any, observed: Any, why: str) -> None:
        out.setdefault(type_, []).append(Anomaly(type_, SET, (int(d.get("index", -1)),), expected, observed, why))

    for d in op_dicts(history):
        v = d.get("value")
        if d.get("type") != "ok" or not isinstance(v, Mapping) or d.get("process") == "nemesis":
            continue
        f = d.get("f")
        if f == "bounce":
            b, a = v.get("before") or {}, v.get("after") or {}
            epochs = (b.get("broker_epoch"), a.get("broker_epoch"))
            if isinstance(epochs[0], int) and isinstance(epochs[1], int) and epochs[1] <= epochs[0]:
                add("bounce-kept-epoch", d, f"broker epoch > {b['broker_epoch']}", a["broker_epoch"],
                        f"{v.get('slot')} was bounced but its new incarnation has broker epoch {a['broker_epoch']}")
            if isinstance(b.get("broker_id"), int) and isinstance(a.get("broker_id"), int) and a["broker_id"] != \
                    b["broker_id"]:
                add("bounce-changed-id", d, b["broker_id"], a["broker_id"], f"{v.get('slot')} changed its id")
        elif f == "leave":
            # An unknown id (None) matched the "no master" read afterwards in records built before leave_record.
            known = isinstance(v.get("broker_id"), int) and not isinstance(v.get("broker_id"), bool)
            if known and v.get("was_master") and v.get("exited") and v.get("others") and \
                    v.get("master_after") == v.get("broker_id"):
                add("shutdown-kept-mastership", d, "another master (or none) when the process has exited",
                    {"master_id": v.get("master_after")},
                    f"broker {v.get('broker_id')} shut down in a controlled way while master and was still master "
                    f"when its process had exited")
        elif f == "stale-heartbeat" and v.get("refused") is False:
            add("stale-epoch-accepted", d, "STALE_BROKER_EPOCH", "accepted",
                f"a heartbeat of broker {v.get('broker_id')} with broker epoch {v.get('stale_epoch')} (current "
                f"{v.get('current_epoch')}) was accepted")
        elif f == "pause-write" and v.get("acked"):
            c = v.get("controller") or {}
            newer = isinstance(c.get("master_epoch"), int) and isinstance(v.get("paused_epoch"), int) and \
                c["master_epoch"] > v["paused_epoch"] and c.get("master_id") != v.get("paused")
            if newer:
                add("fenced-broker-acked", d, "no ack from a superseded master", v,
                    f"broker {v.get('paused')} (master epoch {v.get('paused_epoch')}) acknowledged a write after "
                    f"the controller had made broker {c.get('master_id')} master in epoch {c.get('master_epoch')}")
    return out


def _invariant_ops(history: Sequence[Any]) -> list[dict[str, Any]]:
    out = InvariantOps("mem", invoke_times(history))
    for d in op_dicts(history):
        v = d.get("value")
        if d.get("type") != "ok" or not isinstance(v, Mapping):
            continue
        if d.get("f") == "bounce":
            for key in ("before", "after"):
                out.broker_started(d, SET, str(v.get("slot")), v.get(key) or {})
        elif d.get("f") == "read-members":
            out.table_read(d, SET, v)
    return out.ops


@dataclass(frozen=True)
class MembershipChecker:
    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Any:
        counts: dict[str, int] = {}
        for d in op_dicts(history):
            if d.get("type") == "ok" and d.get("f") in LIFECYCLE_FS:
                counts[str(d["f"])] = counts.get(str(d["f"]), 0) + 1
        return result_from_anomalies(membership_anomalies(history), stats={"ok_by_f": counts})


@dataclass(frozen=True)
class MembershipInvariants:
    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Any:
        return check_invariants(_invariant_ops(history))


@register("membership", needs=("splitbrain-protocol",), roles=("controllers", "broker_sets"))
def build_membership(ctx: WorkloadContext) -> Workload:
    """The membership workload (see the module docstring).

    Raises:
        SpecError: a bad option or a spec without broker nodes.
    """
    o = parse_options(ctx, MembershipOptions)
    nodes = tuple(n for s in ctx.spec.nodes.broker_sets for n in s)
    if not nodes:
        raise SpecError(getattr(ctx.spec, "source", "<spec>"), "nodes.broker_sets", [],
                        "at least one broker node (the membership workload runs extra brokers on them)")
    slots = [(nodes[i % len(nodes)], f"m{i}") for i in range(o.brokers)]
    return Workload(
        name="membership",
        client=MembershipClient(ctx.db, o, slots),
        generator=MembershipGen(tuple(s for _, s in slots), o),
        checkers={"membership": MembershipChecker(), "invariants": MembershipInvariants(),
                  "stats": StatsChecker(("bounce",), MEMBERSHIP_FS)},
        fs=MEMBERSHIP_FS,
        # leave = controlled shutdown + respawn; bounce = kill + respawn; pause-write outlasts the lease
        op_timeouts=dict.fromkeys(LIFECYCLE_FS, 2 * o.spawn_timeout_s + o.lease_ms / 1000 + 10.0),
        extra={"broker_set": SET, "slots": [s for _, s in slots]},
    )
