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
from workloads.common import StatsChecker, completion_for, invocation, linearizability_result, option, parse_options
from workloads.models import INITIAL_STATE, ControllerMetadata, MetaState, describe_meta, meta_from_reply
from workloads.registry import Workload, WorkloadContext, register

__all__ = [
    "REGISTER_FS", "LinearizableChecker", "RegisterClient", "RegisterGen", "RegisterOptions", "build_register",
    "register_options", "set_names",
]

log = logging.getLogger("splitbrain.workloads.controller_register")

REGISTER_FS = frozenset({"read", "elect", "alter"})
_HEARTBEAT_INTERVAL_S = 0.25
_KEEP_STATES = 6  # observed states remembered per set (stale alters pick from the older ones)


@dataclass(frozen=True)
class RegisterOptions:
    """Options of the controller-register workload (see the module docstring)."""

    broker_sets: int = option(2, 1, 8, allowed="an integer in [1, 8]")
    replicas: int = option(3, 2, 5, allowed="an integer in [2, 5]")
    read_fraction: float = option(0.5, 0.0, 1.0, allowed="a number in [0, 1]")
    elect_fraction: float = option(0.15, 0.0, 1.0, allowed="a number in [0, 1]")
    stale_alter_fraction: float = option(0.3, 0.0, 1.0, allowed="a number in [0, 1]")
    follower_read_fraction: float = option(0.5, 0.0, 1.0, allowed="a number in [0, 1]")
    lease_ms: int = option(30_000, 1000, 600_000, allowed="milliseconds in [1000, 600000] (virtual brokers' lease)")
    check_time_limit_s: float = option(60.0, 1.0, 3600.0, allowed="seconds in [1, 3600]")



def register_options(ctx: WorkloadContext) -> RegisterOptions:
    """Validated options (SpecError names ``workloads[i].options.<key>``)."""
    o = parse_options(ctx, RegisterOptions)
    if o.read_fraction + o.elect_fraction > 1.0:
        raise SpecError(getattr(ctx.spec, "source", "<spec>"), f"workloads[{ctx.index}].options.elect_fraction",
                        o.elect_fraction, f"at most 1 - read_fraction = {1.0 - o.read_fraction:.2f}")
    return o


def set_names(n: int) -> tuple[str, ...]:
    return tuple(f"vreg-{i}" for i in range(n))


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
        rng, o = ctx.rng, self.options
        name = self.sets[rng.randrange(len(self.sets))]
        r = rng.random()
        if r < o.read_fraction:
            via = None
            if self.controllers and rng.random() < o.follower_read_fraction:
                via = self.controllers[rng.randrange(len(self.controllers))]
            return (invocation(ctx, "read", {"broker_set": name, "via": via}), self)
        if r < o.read_fraction + o.elect_fraction:
            target = 1 + rng.randrange(o.replicas)
            states = self.seen.get(name, ())
            if states and rng.random() < 0.7:  # mostly an in-set replica, so elections often succeed
                master, _, sss, _ = states[-1]
                candidates = [i for i in sss if i != master]
                if candidates:
                    target = candidates[rng.randrange(len(candidates))]
            return (invocation(ctx, "elect", {"broker_set": name, "broker_id": target}), self)
        members = [i for i in range(1, o.replicas + 1) if rng.random() < 0.5]
        value: dict[str, Any] = {"broker_set": name, "sync_state_set": members}
        stale = self._stale_state(name)
        if stale is not None and rng.random() < o.stale_alter_fraction:
            master, epoch, _, set_epoch = stale
            value = {"broker_set": name, "sync_state_set": sorted(set(members) | {master}), "master_id": master,
                     "master_epoch": epoch, "sync_state_set_epoch": set_epoch}
        return (invocation(ctx, "alter", value), self)

    def _stale_state(self, name: str) -> MetaState | None:
        states = self.seen.get(name, ())
        if len(states) < 2:
            return None
        latest = states[-1]
        older = [s for s in states[:-1] if s[0] == latest[0] and s[0] is not None and s != latest]
        return older[-1] if older else None

    def update(self, ctx: g.Context, event: dict[str, Any]) -> RegisterGen:
        if event.get("type") != "ok" or event.get("f") not in REGISTER_FS:
            return self
        value = event.get("value")
        if not isinstance(value, Mapping):
            return self
        try:
            if event["f"] == "read":
                state = meta_from_reply(value)
            elif event["f"] == "alter" and isinstance(value.get("sent"), Mapping):
                m, e, s, se = meta_from_reply(value["sent"])
                state = (m, e, s, se + 1)
            elif event["f"] == "elect" and isinstance(value.get("reply"), Mapping):
                state = meta_from_reply(value["reply"])
            else:
                return self
        except ValueError:
            return self
        name = str(value.get("broker_set"))
        states = self.seen.get(name, ())
        if states and states[-1] == state:
            return self
        return replace(self, seen={**self.seen, name: (*states, state)[-_KEEP_STATES:]})


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

    def __init__(self, db: Any, options: RegisterOptions, *, controller: Any = None,
                 addrs: Mapping[str, str] | None = None) -> None:
        self.db = db
        self.options = options
        self.controller = controller
        self.addrs = dict(addrs or {})
        self.brokers: list[_Virtual] = []
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._admin: Any = None

    @property
    def cluster_name(self) -> str:
        return str(getattr(getattr(self.db, "options", None), "cluster_name", "splitbrain"))

    async def open(self, test: dict[str, Any], node: str) -> RegisterClient:
        addrs = self.db.controller_addrs(test)
        return RegisterClient(self.db, self.options, controller=self.db.client(test, timeout_s=1.5),
                              addrs=dict(zip(self.db.controllers, addrs, strict=True)))

    async def setup(self, test: dict[str, Any], timeout_s: float = 30.0) -> None:
        """Register, heartbeat and first-elect the virtual sets; verify each starts in ``INITIAL_STATE``.

        Raises:
            RuntimeError: a set could not be set up in ``timeout_s`` or starts in another state (names both).
        """
        self._admin = self.db.client(test, timeout_s=2.0)
        cluster, deadline = self.cluster_name, time.monotonic() + timeout_s
        for s, name in enumerate(set_names(self.options.broker_sets)):
            for r in range(self.options.replicas):
                addr = f"10.254.{s}.{r + 1}:10911"
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
        from system_under_test.protocol import RequestCode

        await asyncio.gather(*(self._admin.call_all(RequestCode.BROKER_HEARTBEAT, {
            "cluster_name": self.cluster_name, "broker_name": b.broker_name, "broker_id": b.broker_id,
            "broker_addr": b.addr, "broker_epoch": b.broker_epoch, "master_epoch": 0, "max_offset": 0,
            "confirm_offset": 0, "heartbeat_timeout_ms": self.options.lease_ms}, timeout_s=0.5) for b in self.brokers))

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                await self._heartbeat_round()
            except Exception as exc:  # keep beating: a failed round only costs one interval
                log.debug("virtual heartbeat round failed: %r", exc)
            await asyncio.sleep(_HEARTBEAT_INTERVAL_S)

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        from system_under_test.protocol import RequestCode

        f, v = op["f"], op["value"]
        name = v["broker_set"]
        try:
            if f == "read":
                if v.get("via"):
                    frame = await self.controller.call_one(self.addrs[v["via"]],
                                                           RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                                           {"broker_name": name})
                    reply = frame.header
                else:
                    reply = await self.controller.get_replica_info(name)
                return {**op, "type": "ok", "value": {**v, **_meta_fields(reply)}}
            if f == "elect":
                reply = await self.controller.elect_master(name, int(v["broker_id"]), designate=True,
                                                           cluster_name=self.cluster_name)
                return {**op, "type": "ok", "value": {**v, "reply": _meta_fields(reply)}}
            if f == "alter":
                return await self._alter(op, name, v)
        except Exception as exc:
            return completion_for(op, exc, read_only=f == "read")
        return {**op, "type": "fail", "error": f"controller-register: unknown f {f!r}; expected {sorted(REGISTER_FS)}"}

    async def _alter(self, op: dict[str, Any], name: str, v: Mapping[str, Any]) -> dict[str, Any]:
        from system_under_test.protocol import RequestCode

        if "master_epoch" in v:
            sent = {"master_id": v["master_id"], "master_epoch": v["master_epoch"],
                    "sync_state_set": sorted(v["sync_state_set"]), "sync_state_set_epoch": v["sync_state_set_epoch"]}
        else:
            try:
                info = await self.controller.get_replica_info(name)
            except Exception as exc:  # nothing was sent yet
                return {**op, "type": "fail", "error": f"reading the master before altering: {exc!r}"}
            if info.get("master_id") is None:
                return {**op, "type": "fail", "error": f"{name} has no master to alter on behalf of"}
            sent = {"master_id": info["master_id"], "master_epoch": info["master_epoch"],
                    "sync_state_set": sorted(set(v["sync_state_set"]) | {info["master_id"]}),
                    "sync_state_set_epoch": info["sync_state_set_epoch"]}
        resp = await self.controller.call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {
            "cluster_name": self.cluster_name, "broker_name": name, **sent})
        return {**op, "type": "ok", "value": {**v, "sent": sent,
                                              "new_sync_state_set_epoch": resp.header.get("new_sync_state_set_epoch")}}

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


def _meta_fields(reply: Mapping[str, Any]) -> dict[str, Any]:
    return {k: reply.get(k) for k in ("master_id", "master_epoch", "sync_state_set", "sync_state_set_epoch")}


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


@register("controller-register")
def build_register(ctx: WorkloadContext) -> Workload:
    """The controller-register workload for ``ctx`` (see the module docstring)."""
    o = register_options(ctx)
    cluster = getattr(ctx.db, "options", None)
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

