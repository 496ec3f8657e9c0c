"""The ``controller-register`` workload: a linearizability test of the controller's broker-set metadata.

In a nutshell.  The workload owns ``broker_sets`` *virtual* broker sets (``vreg-0``, ``vreg-1``, ...) of
``replicas`` brokers each.  It registers them over the wire exactly as brokers do (GetNextBrokerId ->
ApplyBrokerId -> RegisterBroker), keeps their leases alive by heartbeating every controller from the harness
(which the partition nemesis never cuts off), and makes broker 1 the first master.  Because nobody else
touches these sets and their leases never lapse, every change of their metadata is one of the workload's own
ops, so the history can be checked against :class:`workloads.models.ControllerMetadata` (partitioned per set):

* ``read``  -- GetReplicaInfo, sent either to the leader (``via: null``) or to one named controller (``via:
  "c2"``) so a follower that answers from stale memory (``--bug stale-read``) shows up;
* ``elect`` -- admin ElectMaster designating a replica (mostly a non-master member of the last observed
  sync-state set, so elections often succeed; otherwise any replica, which a correct controller may refuse);
* ``alter`` -- AlterSyncStateSet on behalf of the master: *fresh* (read the master and epochs inside the op)
  or *pinned* to epochs the generator observed earlier and knows are stale -- a correct controller must
  refuse those with CONTROLLER_FENCED_MASTER_EPOCH / ..._SYNC_STATE_SET_EPOCH (``--bug no-epoch-fencing``
  lets them through, and the checker reports the history as not linearizable).

Works on any cluster (a controller-only cluster is enough): the virtual sets never collide with real
``broker-i`` sets.  Options: ``broker_sets`` (1..8, default 2), ``replicas`` (2..5, default 3),
``read_fraction`` / ``elect_fraction`` (the rest are alters), ``stale_alter_fraction`` (share of alters pinned
to stale epochs), ``follower_read_fraction`` (share of reads sent to a named controller),
``check_time_limit_s`` (linearizability search budget; exhausted = "unknown").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from checker.compose import Result
from checker.history import Op
from checker.linearizable import check as check_linearizable
from harness import generator as g
from harness.errors import SpecError
from harness.protocols import WireClients
from system_under_test.client import register_requests as rr
from system_under_test.client.register_requests import REGISTER_FS, set_names
from system_under_test.client.workload_requests import heartbeat_call, replica_info_call
from workloads.common import (
    StatsChecker,
    cluster_name,
    cluster_options,
    completion_for,
    invocation,
    linearizability_result,
    option,
    parse_options,
    wire_db,
)
from workloads.models import INITIAL_STATE, ControllerMetadata, MetaState, describe_meta, meta_from_reply
from workloads.registry import Workload, WorkloadContext, register

__all__ = [
    "REGISTER_FS", "LinearizableChecker", "RegisterClient", "RegisterGen", "RegisterOptions", "build_register",
    "register_options", "set_names",
]

log = logging.getLogger("splitbrain.workloads.controller_register")

_HEARTBEAT_INTERVAL_S = rr.HEARTBEAT_INTERVAL_MS / 1000


@dataclass(frozen=True)
class RegisterOptions:
    """Options of the controller-register workload (see the module docstring)."""

    broker_sets: int = option(rr.BROKER_SETS, 1, 8, allowed="an integer in [1, 8]")
    replicas: int = option(rr.REPLICAS, 2, 5, allowed="an integer in [2, 5]")
    read_fraction: float = option(rr.READ_FRACTION, 0.0, 1.0, allowed="a number in [0, 1]")
    elect_fraction: float = option(rr.ELECT_FRACTION, 0.0, 1.0, allowed="a number in [0, 1]")
    stale_alter_fraction: float = option(rr.STALE_ALTER_FRACTION, 0.0, 1.0, allowed="a number in [0, 1]")
    follower_read_fraction: float = option(rr.FOLLOWER_READ_FRACTION, 0.0, 1.0, allowed="a number in [0, 1]")
    lease_ms: int = option(30_000, 1000, 600_000, allowed="milliseconds in [1000, 600000] (virtual brokers' lease)")
    check_time_limit_s: float = option(60.0, 1.0, 3600.0, allowed="seconds in [1, 3600]")



def register_options(ctx: WorkloadContext) -> RegisterOptions:
    """Validated options (SpecError names ``workloads[i].options.<key>``)."""
    o = parse_options(ctx, RegisterOptions)
    if o.read_fraction + o.elect_fraction > 1.0:
        raise SpecError(getattr(ctx.spec, "source", "<spec>"), f"workloads[{ctx.index}].options.elect_fraction",
                        o.elect_fraction, f"at most 1 - read_fraction = {1.0 - o.read_fraction:.2f}")
    return o


# ---------------------------------------------------------------------------------------------
# Generator


@dataclass(frozen=True, slots=True)
class RegisterGen:
    """Main-phase generator.  ``seen`` holds, per set, the last distinct states ok ops observed (oldest first);
    a stale alter pins the epochs of an older one with the same master (so only the epochs are stale)."""

    sets: tuple[str, ...]
    controllers: tuple[str, ...]
    options: RegisterOptions
    seen: Mapping[str, tuple[MetaState, ...]] = field(default_factory=dict)

    def op(self, ctx: g.Context) -> Any:
        if ctx.free_thread() is None:
            return (g.PENDING, self)
        o = self.options
        f, value = rr.register_op(ctx.rng, self.sets, self.controllers, self.seen, replicas=o.replicas,
                                  read_fraction=o.read_fraction, elect_fraction=o.elect_fraction,
                                  stale_alter_fraction=o.stale_alter_fraction,
                                  follower_read_fraction=o.follower_read_fraction)
        return (invocation(ctx, f, value), self)

    def _stale_state(self, name: str) -> MetaState | None:
        return rr.stale_state(self.seen.get(name, ()))

    def update(self, ctx: g.Context, event: dict[str, Any]) -> RegisterGen:
        if event.get("type") != "ok" or event.get("f") not in REGISTER_FS:
            return self
        seen = rr.register_seen(self.seen, event["f"], event.get("value"))
        return self if seen is None else replace(self, seen=seen)


# ---------------------------------------------------------------------------------------------
# Client


@dataclass
class _Virtual:
    broker_name: str
    broker_id: int
    addr: str
    broker_epoch: int


class RegisterClient:
    """Prototype + per-worker client.  ``setup`` (on the prototype) registers the virtual brokers, starts the
    heartbeat task and makes broker 1 master of every set; ``teardown`` stops the heartbeats."""

    def __init__(self, db: object, options: RegisterOptions, *, controller: Any = None,
                 addrs: Mapping[str, str] | None = None) -> None:
        self._db = db  # the DB the workload was built with; narrowed where it is called (:attr:`db`)
        self.options = options
        self.controller = controller
        self.addrs = dict(addrs or {})
        self.brokers: list[_Virtual] = []
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._admin: Any = None

    @property
    def db(self) -> WireClients:
        """The DB as what this client calls of it (:class:`harness.protocols.WireClients`)."""
        return wire_db(self._db, "controller-register")

    @property
    def cluster_name(self) -> str:
        return cluster_name(self._db)

    async def open(self, test: dict[str, Any], node: str) -> RegisterClient:
        db = self.db
        addrs = db.controller_addrs(test)
        return RegisterClient(self._db, self.options, controller=db.client(test, timeout_s=1.5),
                              addrs=dict(zip(db.controllers, addrs, strict=True)))

    async def setup(self, test: dict[str, Any], timeout_s: float = 30.0) -> None:
        """Register, heartbeat and first-elect the virtual sets; verify each starts in ``INITIAL_STATE``.

        Raises:
            RuntimeError: a set could not be set up in ``timeout_s`` or starts in another state (names both).
        """
        self._admin = self.db.client(test, timeout_s=2.0)
        cluster, deadline = self.cluster_name, time.monotonic() + timeout_s
        for s, name in enumerate(set_names(self.options.broker_sets)):
            for r in range(self.options.replicas):
                addr = rr.virtual_addr(s, r)
                broker_id = await self._admin.get_next_broker_id(cluster, name)
                code = f"{addr};{int(time.time() * 1000)};{secrets.token_hex(4)}"
                await self._admin.apply_broker_id(cluster, name, broker_id, code, addr)
                reply = await self._admin.register_broker(cluster, name, broker_id, addr, secrets.token_hex(8), None)
                self.brokers.append(_Virtual(name, broker_id, addr, int(reply["broker_epoch"])))
        await self._heartbeat_round()
        self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop(), name="vreg-heartbeat")
        for name in set_names(self.options.broker_sets):
            last: Any = None
            while True:
                try:
                    await self._admin.elect_master(name, 1, cluster_name=cluster)
                except Exception as exc:
                    last = exc
                with contextlib.suppress(Exception):
                    state = meta_from_reply(await self._admin.get_replica_info(name))
                    if state == INITIAL_STATE:
                        break
                    if state[0] is not None:
                        raise RuntimeError(f"controller-register: {name} starts in {describe_meta(state)}, expected "
                                           f"{describe_meta(INITIAL_STATE)} (is the cluster fresh?)")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"controller-register: could not make broker 1 master of {name} within "
                                       f"{timeout_s}s (last error: {last!r})")
                await asyncio.sleep(0.2)

    async def _heartbeat_round(self) -> None:
        await asyncio.gather(*(self._admin.call_all(*heartbeat_call(
            self.cluster_name, b.broker_name, b.broker_id, b.addr, b.broker_epoch, self.options.lease_ms),
            timeout_s=0.5) for b in self.brokers))

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                await self._heartbeat_round()
            except Exception as exc:  # keep beating: a failed round only costs one interval
                log.debug("virtual heartbeat round failed: %r", exc)
            await asyncio.sleep(_HEARTBEAT_INTERVAL_S)

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f, v = op["f"], op["value"]
        name = v["broker_set"]
        try:
            if f == "read":
                if v.get("via"):
                    frame = await self.controller.call_one(self.addrs[v["via"]], *replica_info_call(name))
                    reply = frame.header
                else:
                    reply = await self.controller.get_replica_info(name)
                return {**op, "type": "ok", "value": rr.meta_read_value(v, reply)}
            if f == "elect":
                reply = await self.controller.elect_master(name, int(v["broker_id"]), designate=True,
                                                           cluster_name=self.cluster_name)
                return {**op, "type": "ok", "value": rr.elect_value(v, reply)}
            if f == "alter":
                return await self._alter(op, name, v)
        except Exception as exc:
            return completion_for(op, exc, read_only=f == "read")
        return {**op, "type": "fail", "error": f"controller-register: unknown f {f!r}; expected {sorted(REGISTER_FS)}"}

    async def _alter(self, op: dict[str, Any], name: str, v: Mapping[str, Any]) -> dict[str, Any]:
        info: Mapping[str, Any] | None = None
        if "master_epoch" not in v:
            try:
                info = await self.controller.get_replica_info(name)
            except Exception as exc:  # nothing was sent yet
                return {**op, "type": "fail", "error": f"reading the master before altering: {exc!r}"}
        sent = rr.alter_sent(v, info)
        if sent is None:
            return {**op, "type": "fail", "error": f"{name} has no master to alter on behalf of"}
        resp = await self.controller.call(*rr.alter_call(self.cluster_name, name, sent))
        return {**op, "type": "ok", "value": rr.alter_value(v, sent, resp.header)}

    async def teardown(self, test: dict[str, Any]) -> None:
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._heartbeat_task
            self._heartbeat_task = None
        if self._admin is not None:
            await self._admin.close()
            self._admin = None

    async def close(self, test: dict[str, Any]) -> None:
        if self.controller is not None:
            with contextlib.suppress(Exception):
                await self.controller.close()


# ---------------------------------------------------------------------------------------------
# Checker


@dataclass(frozen=True)
class LinearizableChecker:
    """Runs ``checker.linearizable.check`` with :class:`ControllerMetadata` over the workload's ops."""

    model: ControllerMetadata
    fs: frozenset[str] = REGISTER_FS
    time_limit_s: float = 60.0

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Result:
        ops = [op if isinstance(op, Op) else Op.from_dict(op) for op in history]
        mine = [op for op in ops if op.f in self.fs and op.process != "nemesis"]
        res = check_linearizable(mine, self.model, time_limit_s=self.time_limit_s, clock=time.monotonic)
        return linearizability_result(res, len(mine))


# ---------------------------------------------------------------------------------------------
# Builder


@register("controller-register", needs=("splitbrain-protocol",), roles=("controllers",))
def build_register(ctx: WorkloadContext) -> Workload:
    """The controller-register workload for ``ctx`` (see the module docstring)."""
    o = register_options(ctx)
    cluster = cluster_options(ctx.db)
    model = ControllerMetadata(replicas=o.replicas, unclean=bool(getattr(cluster, "enable_elect_unclean_master",
                                                                         False)))
    controllers = tuple(ctx.spec.nodes.controllers)
    return Workload(
        name="controller-register",
        client=RegisterClient(ctx.db, o),
        generator=RegisterGen(set_names(o.broker_sets), controllers, o),
        checkers={"linearizable": LinearizableChecker(model, time_limit_s=o.check_time_limit_s),
                  "stats": StatsChecker(("read",), REGISTER_FS)},
        fs=REGISTER_FS,
        extra={"sets": set_names(o.broker_sets), "model": model.describe()},
    )

