"""The ``broker-ids`` workload: persistent unique broker ids under crashes, restarts and address changes.

In a nutshell.  Two kinds of ops run side by side.

1. **Allocator ops** on *virtual* broker sets ``vids-0..`` (nobody else touches them), sent to the controller
   like a broker would, judged for linearizability against :class:`IdAllocator`:

   * ``next-id``  ``{"broker_set": B}`` -> ok ``{"next_broker_id": N}`` (GetNextBrokerId);
   * ``apply-id`` ``{"broker_set": B, "broker_id": I, "register_code": RC}`` -> ok ``{"applied": true}`` or,
     when the controller refuses with CONTROLLER_BROKER_ID_INVALID, ok ``{"applied": false}`` (ApplyBrokerId);
     the generator applies the next id it saw, ids above it (gaps), stale ids and its own earlier claims again;
   * ``read-ids`` ``{"broker_set": B}`` -> ok ``{"ids": [I...]}`` (GetReplicaInfo's members).

2. **Lanes** of real broker processes (the DB's ``extra_brokers``, our cluster's
   ``systems.splitbrain.extra_brokers``) started on the spec's broker nodes in broker sets ``bids-0..``.  One lane
   per registration failpoint: a fresh broker is crashed at the point (``crash-broker``), restarted on a changed
   port (``start-broker``), stopped (``stop-broker``) and started again on its first port; for ``broker.register.*``
   the broker registers once before the crash.  Lanes run concurrently, so new brokers join while others crash.
   ``start-broker`` records the id the broker believes it has (GET_BROKER_RUNTIME_INFO), its broker epoch and
   address; ``crash-broker`` records the identity files the crash left.
   ``read-table`` reads the controller's table of a real set.

Checkers: ``linearizable`` (allocator ops vs :class:`IdAllocator`), ``invariants`` (``checker.invariants``
over broker-id / apply-broker-id / replica-info observations made from these ops and from
``registration-crash`` nemesis ops: ids unique per set, stable per broker across restarts and address
changes, no register code applied with two ids, epochs monotonic per broker), ``restarts`` (every restart
after a crash at a registration failpoint comes back; a refused restart -- e.g. a torn ``.broker.meta`` --
is anomaly ``restart-refused``) and ``stats``.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from checker.compose import Anomaly, Result, result_from_anomalies
from checker.history import Op
from checker.invariants import check_invariants
from checker.linearizable import check as check_linearizable
from checker.models import UNKNOWN, Inconsistent, Model, ModelError, OpInput
from harness import generator as g
from harness.errors import SpecError
from harness.protocols import ExtraBrokerSlots
from system_under_test.broker.registration import FAILPOINTS, FIRST_REGISTRATION_POINTS
from system_under_test.broker.registration.driver import FP_META_BEFORE_RENAME
from system_under_test.client.workload_requests import (
    ALLOC_APPLY_FRACTION,
    ALLOC_READ_FRACTION,
    alloc_op,
    alloc_seen,
    apply_id_addr,
    apply_id_call,
    apply_id_value,
    next_id_call,
    next_id_value,
    read_value,
    replica_info_call,
)
from workloads.common import (
    BrokerSpawningClient,
    InvariantOps,
    StatsChecker,
    cluster_name,
    completion_for,
    invocation,
    invoke_times,
    linearizability_result,
    op_dicts,
    option,
    parse_options,
)
from workloads.registry import Workload, WorkloadContext, register

__all__ = [
    "ALLOC_FS", "BROKER_IDS_FS", "LANE_FS", "BrokerIdsClient", "BrokerIdsGen", "BrokerIdsOptions", "IdAllocator",
    "IdsInvariantChecker", "LinearizableIdsChecker", "RestartChecker", "build_broker_ids", "invariant_ops",
    "lane_plan",
]

ALLOC_FS = frozenset({"next-id", "apply-id", "read-ids"})
LANE_FS = frozenset({"crash-broker", "start-broker", "stop-broker"})
BROKER_IDS_FS = ALLOC_FS | LANE_FS | {"read-table"}

AllocState = tuple[int, tuple[tuple[int, str], ...]]
"""(next broker id, sorted ((id, register code), ...) held)."""


# ---------------------------------------------------------------------------------------------
# Model (pure)


class IdAllocator(Model):
    """The controller's broker-id allocator of one broker set, as a sequential object.

    State ``(next, held)``.  ``next-id`` returns ``next``.  ``apply-id(I, RC)``: I held with RC -> applied (no
    change); I held with another code -> refused; no id held yet and I != next -> refused (a new set only
    takes its next id); I < next -> refused (ids are never reused); else applied: ``next = I + 1``, (I, RC)
    held.  ``read-ids`` returns the held ids.  Definite failures are dropped; info ops take effect or not.
    """

    name = "id-allocator"
    fail_policy = "drop"

    def init(self) -> Hashable:
        return (1, ())

    def partition_key(self, op: OpInput) -> Hashable | None:
        return op.value.get("broker_set") if isinstance(op.value, Mapping) else None

    def read_only(self, op: OpInput, output: Any) -> bool:
        return op.f in ("next-id", "read-ids")

    def describe_state(self, state: Any) -> str:
        nxt, held = state
        return f"next={nxt} held={[i for i, _ in held]}"

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        nxt, held = state
        v = op.value if isinstance(op.value, Mapping) else {}
        if op.f == "next-id":
            got = output.get("next_broker_id") if isinstance(output, Mapping) else output
            if output is UNKNOWN or got == nxt:
                return state
            return Inconsistent(f"GetNextBrokerId returned {got} but the next id is {nxt} "
                                f"(held: {[i for i, _ in held]})")
        if op.f == "read-ids":
            ids = sorted(output.get("ids", [])) if isinstance(output, Mapping) else None
            if output is UNKNOWN or ids == [i for i, _ in held]:
                return state
            return Inconsistent(f"read ids {ids} but the held ids are {[i for i, _ in held]}")
        if op.f != "apply-id":
            raise ModelError(f"id-allocator: unknown op {op.f!r}; expected next-id, apply-id or read-ids")
        bid, code = v.get("broker_id"), str(v.get("register_code"))
        if type(bid) is not int:
            raise ModelError(f"id-allocator: apply-id needs an int broker_id, got {bid!r}")
        holder = dict(held).get(bid)
        if holder is not None:
            accept, why = holder == code, f"id {bid} is held under register code {holder!r}"
        elif not held and bid != nxt:
            accept, why = False, f"a new broker set only takes its next id {nxt}"
        elif bid < nxt:
            accept, why = False, f"id {bid} < next id {nxt}: ids are never reused"
        else:
            accept, why = True, f"id {bid} >= next id {nxt} is free"
        applied = output.get("applied") if isinstance(output, Mapping) else None
        if output is not UNKNOWN and bool(applied) != accept:
            verb = "applied" if applied else "refused"
            return Inconsistent(f"ApplyBrokerId({bid}, {code!r}) was {verb} but {why}")
        if not accept or holder is not None:
            return state
        return (max(nxt, bid + 1), tuple(sorted((*held, (bid, code)))))


# ---------------------------------------------------------------------------------------------
# Options and plan


@dataclass(frozen=True)
class BrokerIdsOptions:
    """Options (``workloads[i].options``); each field gives its range.

    ``failpoints`` = how many of :data:`FAILPOINTS` get a lane (first N; 0 = allocator only), ``lanes`` = lanes
    running at once, ``base_port`` = first extra broker port, ``spawn_timeout_s`` = how long a crash/start op
    waits (those ops get that plus 10 s before the runner times them out), ``registration_crash`` = also run
    the ``registration-crash`` nemesis package (needs broker nodes), ``stop_after_lanes`` = end the workload
    once every lane has run (the time limit becomes a ceiling: a gate that must see every failpoint hit
    does not depend on how fast the host is).
    """

    virtual_sets: int = option(2, 1, 8, allowed="an integer in [1, 8]")
    real_sets: int = option(2, 1, 8, allowed="an integer in [1, 8]")
    failpoints: int = option(len(FAILPOINTS), 0, len(FAILPOINTS), allowed=f"an integer in [0, {len(FAILPOINTS)}]")
    lanes: int = option(2, 1, 10, allowed="an integer in [1, 10]")
    base_port: int = option(10920, 1024, 60000, allowed="a port in [1024, 60000]")
    spawn_timeout_s: float = option(4.0, 0.5, 120.0, allowed="seconds in [0.5, 120]")
    apply_fraction: float = option(ALLOC_APPLY_FRACTION, 0.0, 1.0, allowed="a number in [0, 1]")
    read_fraction: float = option(ALLOC_READ_FRACTION, 0.0, 1.0, allowed="a number in [0, 1]")
    check_time_limit_s: float = option(30.0, 1.0, 3600.0, allowed="seconds in [1, 3600]")
    registration_crash: bool = option(True, allowed="true or false (add the registration-crash nemesis package)")
    stop_after_lanes: bool = option(False, allowed="true or false (end the workload once every lane has run)")



def lane_plan(nodes: Sequence[str], failpoints: Sequence[str], real_sets: int, base_port: int
              ) -> tuple[tuple[dict[str, Any], ...], ...]:
    """One lane (a sequence of op values run strictly in order) per failpoint (pure)."""
    if not nodes:
        return ()
    lanes = []
    for i, fp in enumerate(failpoints):
        slot = {"node": nodes[i % len(nodes)], "slot": f"s{i}", "broker_name": f"bids-{i % real_sets}", "lane": i}
        a, b = base_port + 2 * i, base_port + 2 * i + 1
        steps: list[dict[str, Any]] = []
        if fp not in FIRST_REGISTRATION_POINTS:
            steps += [{"f": "start-broker", **slot, "port": a}, {"f": "stop-broker", **slot}]
        steps += [{"f": "crash-broker", **slot, "port": a, "failpoint": fp}, {"f": "start-broker", **slot, "port": b},
                  {"f": "stop-broker", **slot}, {"f": "start-broker", **slot, "port": a}, {"f": "stop-broker", **slot}]
        lanes.append(tuple(steps))
    return tuple(lanes)


# ---------------------------------------------------------------------------------------------
# Generator (pure)


@dataclass(frozen=True, slots=True)
class BrokerIdsGen:
    """Lanes first (at most ``options.lanes`` in flight), allocator ops on every other free thread.

    ``pos[i]`` = next step of lane i; ``busy`` = lanes with an op in flight; ``seen`` = per virtual set the
    highest next id observed; ``claims`` = (set, id, code) this generator applied ok (re-applied sometimes).
    """

    lanes: tuple[tuple[dict[str, Any], ...], ...]
    virtual: tuple[str, ...]
    real: tuple[str, ...]
    options: BrokerIdsOptions
    pos: tuple[int, ...] = ()
    busy: frozenset[int] = frozenset()
    seen: Mapping[str, int] | None = None
    claims: tuple[tuple[str, int, str], ...] = ()
    n: int = 0

    def op(self, ctx: g.Context) -> Any:
        if ctx.free_thread() is None:
            return (g.PENDING, self)
        pos = self.pos or tuple(0 for _ in self.lanes)
        if self.options.stop_after_lanes and self.lanes and all(p >= len(ln) for p, ln in zip(pos, self.lanes)):
            return None
        if len(self.busy) < self.options.lanes:
            for i, lane in enumerate(self.lanes):
                if i not in self.busy and pos[i] < len(lane):
                    step = dict(lane[pos[i]])
                    f = step.pop("f")
                    return (invocation(ctx, f, step), replace(self, pos=pos, busy=self.busy | {i}))
        o = self.options
        f, value = alloc_op(ctx.rng, self.virtual, self.real, self.seen or {}, self.claims, self.n,
                            apply_fraction=o.apply_fraction, read_fraction=o.read_fraction)
        if f in ("read-ids", "read-table"):
            return (invocation(ctx, f, value), self)
        return (invocation(ctx, f, value), replace(self, pos=pos, n=self.n + 1 if f == "apply-id" else self.n))

    def update(self, ctx: g.Context, event: dict[str, Any]) -> BrokerIdsGen:
        if event.get("type") not in ("ok", "fail", "info"):
            return self
        f, v = event.get("f"), event.get("value")
        if not isinstance(v, Mapping):
            return self
        if f in LANE_FS and isinstance(v.get("lane"), int) and v["lane"] in self.busy:
            i = v["lane"]
            pos = list(self.pos or tuple(0 for _ in self.lanes))
            pos[i] += 1
            return replace(self, pos=tuple(pos), busy=self.busy - {i})
        if event.get("type") != "ok":
            return self
        learnt = alloc_seen(self.seen or {}, self.claims, f, v)
        return self if learnt is None else replace(self, seen=learnt[0], claims=learnt[1])


# ---------------------------------------------------------------------------------------------
# Client (shell)


class BrokerIdsClient(BrokerSpawningClient):
    """Allocator ops through the controller client; lane ops through the DB's extra brokers
    (:class:`harness.protocols.ExtraBrokerSlots`, shared by every worker)."""

    def __init__(self, db: object, options: BrokerIdsOptions, *, extra: ExtraBrokerSlots | None = None,
                 controller: Any = None) -> None:
        self._db = db
        self._workload = "broker-ids"
        self.options = options
        self.extra_root = "broker-ids"
        self._extra = extra
        self.controller = controller

    @property
    def cluster_name(self) -> str:
        return cluster_name(self._db)

    async def open(self, test: dict[str, Any], node: str) -> BrokerIdsClient:
        return BrokerIdsClient(self._db, self.options, extra=self.extra,
                               controller=self.db.client(test, timeout_s=1.5))

    async def setup(self, test: dict[str, Any]) -> None:
        return None

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        f, v = op["f"], dict(op.get("value") or {})
        try:
            if f in LANE_FS:
                return {**op, "type": "ok", "value": {**v, **await self._lane(test, f, v)}}
            if f == "next-id":
                resp = await self.controller.call(*next_id_call(self.cluster_name, v["broker_set"]))
                return {**op, "type": "ok", "value": next_id_value(v, resp.header)}
            if f == "apply-id":
                return await self._apply(op, v)
            if f in ("read-ids", "read-table"):
                return await self._read(op, f, v)
        except Exception as exc:
            return completion_for(op, exc, read_only=f in ("next-id", "read-ids", "read-table"))
        return {**op, "type": "fail", "error": f"broker-ids: unknown f {f!r}; expected one of {sorted(BROKER_IDS_FS)}"}

    async def _lane(self, test: dict[str, Any], f: str, v: Mapping[str, Any]) -> dict[str, Any]:
        node, slot, name = str(v["node"]), str(v["slot"]), str(v["broker_name"])
        timeout = self.options.spawn_timeout_s
        if f == "stop-broker":
            await self.extra.kill(test, node, slot)
            return {}
        if f == "crash-broker":
            return await self.extra.crash_at(test, node, slot, name, int(v["port"]), str(v["failpoint"]),
                                             timeout_s=timeout)
        return await self.extra.start_slot(test, node, slot, name, int(v["port"]), timeout_s=timeout)

    async def _apply(self, op: dict[str, Any], v: dict[str, Any]) -> dict[str, Any]:
        from system_under_test.protocol.errors import RpcError

        code, header = apply_id_call(self.cluster_name, v["broker_set"], int(v["broker_id"]), str(v["register_code"]),
                                     apply_id_addr(int(v["broker_id"])))
        try:
            await self.controller.call(code, header)
        except RpcError as exc:
            value = apply_id_value(v, exc.code, str(exc))
            if value is None:
                raise
            return {**op, "type": "ok", "value": value}
        return {**op, "type": "ok", "value": apply_id_value(v, 0, "")}

    async def _read(self, op: dict[str, Any], f: str, v: dict[str, Any]) -> dict[str, Any]:
        from system_under_test.protocol.errors import RpcError

        code, header = replica_info_call(str(v.get("broker_set") or v.get("broker_name")))
        try:
            resp = await self.controller.call(code, header)
        except RpcError as exc:
            value = read_value(f, v, exc.code, exc.header, None)
            if value is None:
                raise
            return {**op, "type": "ok", "value": value}
        return {**op, "type": "ok", "value": read_value(f, v, 0, resp.header, resp.body)}



# ---------------------------------------------------------------------------------------------
# Checkers (pure)


def _starts(history: Sequence[Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(op, start result) for every broker start: lane ``start-broker`` ops and registration-crash nemesis ops."""
    out = []
    for d in op_dicts(history):
        v = d.get("value")
        if not isinstance(v, Mapping):
            continue
        if d.get("f") == "start-broker" and d.get("type") == "ok" and d.get("process") != "nemesis":
            out.append((d, {**v, "identity": f"{v.get('node')}/{v.get('slot')}"}))
        elif d.get("f") == "registration-crash" and d.get("type") != "invoke":
            for key in ("first", "restart"):
                if isinstance(v.get(key), Mapping):
                    out.append((d, {**v[key], "broker_name": v.get("broker_name"), "identity": v.get("identity"),
                                    "after_crash": key == "restart", "failpoint": v.get("failpoint")}))
    return out


APPLIED_POINTS: tuple[str, ...] = FAILPOINTS[FAILPOINTS.index(FP_META_BEFORE_RENAME):]
"""Registration failpoints a broker reaches only after the controller applied its claim (ApplyBrokerId ok): a
crash there must leave the applied id on disk (``PROMOTE_STEPS``), and the restart must come back with it."""


def _applied_claims(history: Sequence[Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(op, ``own-id-applied`` value) for each registration crash hit at one of :data:`APPLIED_POINTS`, with
    the id of the identity files found at the crash (``.broker.meta`` first, then its prepared copy, then the
    claim's temp file): the id the controller had applied for that store."""
    out = []
    for d in op_dicts(history):
        v = d.get("value")
        if d.get("type") == "invoke" or not isinstance(v, Mapping):
            continue
        if d.get("f") == "registration-crash" and d.get("process") == "nemesis":
            crash, identity = v.get("crash"), v.get("identity")
        elif d.get("f") == "crash-broker" and d.get("type") == "ok":
            crash, identity = v, f"{v.get('node')}/{v.get('slot')}"  # a lane's crash (the identity of its starts)
        else:
            continue
        if not isinstance(crash, Mapping) or not crash.get("hit") or v.get("failpoint") not in APPLIED_POINTS:
            continue
        raw = crash.get("files")
        files: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        ids = [f.get("broker_id") for name in (".broker.meta", ".broker.meta.tmp", ".broker.meta.temp")
               if isinstance(f := files.get(name), Mapping) and isinstance(f.get("broker_id"), int)]
        if ids and v.get("broker_name"):
            out.append((d, {"broker_name": v["broker_name"], "node": identity, "broker_id": ids[0]}))
    return out


def invariant_ops(history: Sequence[Any]) -> list[dict[str, Any]]:
    """This workload's ops rewritten into ``checker.invariants`` history shapes (pure).  A registration crash
    after the claim was applied becomes an ``own-id-applied`` observation of the crashed store before its
    restart's ``broker-id`` one, so ``broker-id-leaked`` relates the two."""
    out = InvariantOps("bids", invoke_times(history))
    for d, claim in _applied_claims(history):
        out.add(d, "own-id-applied", claim)
    for d, s in _starts(history):
        if s.get("broker_name"):
            out.broker_started(d, s["broker_name"], s["identity"], s)
    for d in op_dicts(history):
        v = d.get("value")
        if d.get("type") != "ok" or not isinstance(v, Mapping):
            continue
        if d.get("f") == "apply-id" and v.get("applied"):
            out.add(d, "apply-broker-id", {"broker_name": v["broker_set"], "broker_id": v["broker_id"],
                                           "register_code": v["register_code"]})
        elif d.get("f") == "read-table":
            out.table_read(d, v["broker_name"], v)
    return out.ops


@dataclass(frozen=True)
class IdsInvariantChecker:
    """``checker.invariants.check_invariants`` over :func:`invariant_ops`."""

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Any:
        return check_invariants(invariant_ops(history))


@dataclass(frozen=True)
class RestartChecker:
    """Every broker restart after a crash at a registration failpoint must come back with an id.

    Anomaly ``restart-refused``: the broker exited instead (a torn meta file, a refused claim ...).  Stats count
    crashes per failpoint and whether the failpoint fired (``not_hit`` is a harness problem, not a verdict).
    """

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Any:
        crashed: dict[str, Any] = {}  # identity -> failpoint of its last crash
        hits: dict[str, dict[str, int]] = {}
        anomalies: dict[str, list[Anomaly]] = {}
        for d in op_dicts(history):
            v = d.get("value")
            if d.get("f") == "crash-broker" and d.get("type") == "ok" and isinstance(v, Mapping):
                fp = str(v.get("failpoint"))
                hits.setdefault(fp, {"hit": 0, "not_hit": 0})["hit" if v.get("hit") else "not_hit"] += 1
                if v.get("hit"):
                    crashed[f"{v.get('node')}/{v.get('slot')}"] = fp
            elif d.get("f") == "registration-crash" and isinstance(v, Mapping) and isinstance(v.get("crash"), Mapping):
                fp = str(v.get("failpoint"))
                hit = bool(v["crash"].get("hit"))
                hits.setdefault(fp, {"hit": 0, "not_hit": 0})["hit" if hit else "not_hit"] += 1
        for d, s in _starts(history):
            ident = str(s.get("identity"))
            at: Any = s.get("failpoint") if s.get("after_crash") else crashed.pop(ident, None)
            if at is None or not s.get("refused"):
                continue
            anomalies.setdefault("restart-refused", []).append(Anomaly(
                "restart-refused", str(s.get("broker_name")), (int(d.get("index", -1)),),
                "the broker restarts with its id", {"refused": True, "identity": ident},
                f"{ident} crashed at {at} and then refused to start: {str(s.get('log', ''))[-300:]}"))
        return result_from_anomalies(anomalies, stats={"crashes": hits})


@dataclass(frozen=True)
class LinearizableIdsChecker:
    """``checker.linearizable.check`` of the allocator ops against :class:`IdAllocator`."""

    time_limit_s: float = 30.0

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Result:
        ops = [op if isinstance(op, Op) else Op.from_dict(op) for op in history]
        mine = [op for op in ops if op.f in ALLOC_FS and op.process != "nemesis"]
        res = check_linearizable(mine, IdAllocator(), time_limit_s=self.time_limit_s, clock=time.monotonic)
        return linearizability_result(res, len(mine))


# ---------------------------------------------------------------------------------------------
# Builder


@register("broker-ids", needs=("splitbrain-protocol",), roles=("controllers", "broker_sets"),
          populated=("controllers",))  # it registers brokers of its own (extra_brokers)
def build_broker_ids(ctx: WorkloadContext) -> Workload:
    """The broker-ids workload for ``ctx`` (see the module docstring).

    Raises:
        SpecError: a bad option, or lanes asked for on a spec without broker nodes.
    """
    o = parse_options(ctx, BrokerIdsOptions)
    nodes = tuple(n for s in ctx.spec.nodes.broker_sets for n in s)
    if o.failpoints and not nodes:
        raise SpecError(getattr(ctx.spec, "source", "<spec>"), f"workloads[{ctx.index}].options.failpoints",
                        o.failpoints, "0 on a spec without broker nodes (lanes run extra brokers on broker nodes)")
    virtual = tuple(f"vids-{i}" for i in range(o.virtual_sets))
    real = tuple(f"bids-{i}" for i in range(o.real_sets))
    lanes = lane_plan(nodes, FAILPOINTS[: o.failpoints], o.real_sets, o.base_port)
    return Workload(
        name="broker-ids",
        client=BrokerIdsClient(ctx.db, o),
        generator=BrokerIdsGen(lanes, virtual, real, o),
        checkers={"linearizable": LinearizableIdsChecker(o.check_time_limit_s), "invariants": IdsInvariantChecker(),
                  "restarts": RestartChecker(), "stats": StatsChecker(("next-id", "apply-id"), BROKER_IDS_FS)},
        fs=BROKER_IDS_FS,
        nemesis_packages=("registration-crash",) if o.registration_crash and nodes else (),
        op_timeouts=dict.fromkeys(LANE_FS, o.spawn_timeout_s + 10.0),  # a crash/start waits up to spawn_timeout_s
        extra={"virtual_sets": virtual, "real_sets": real, "lanes": len(lanes), "model": IdAllocator().describe()},
    )
