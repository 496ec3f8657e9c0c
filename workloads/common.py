"""What every workload shares: how a failed op is recorded, how options are declared and read, how an op is
invoked on a free thread, and the op-count checker.

Options are declared once, as the fields of a frozen dataclass made with :func:`option` (default, range and
the allowed-values text an error quotes); :func:`parse_options` reads ``workloads[i].options`` against them,
so a new option cannot be documented in one place and validated in another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from checker.compose import Anomaly, Result
from checker.history import Op
from checker.linearizable import Result as LinResult
from checker.linearizable import failure_window
from harness import generator as g
from harness.errors import SpecError
from harness.protocols import CAPABILITIES, ExtraBrokerSlots, MissingCapability, Registration, Specified, WireClients
from workloads.registry import WorkloadContext

__all__ = ["BrokerSpawningClient", "InvariantOps", "StatsChecker", "WireDB", "cluster_name", "cluster_options",
           "completion_for", "invocation", "invoke_times", "linearizability_result", "op_dicts", "option",
           "parse_options", "registration_db", "thread_of", "unserved", "wire_db", "wire_spec_db"]

T = TypeVar("T")


def completion_for(op: Mapping[str, Any], exc: BaseException, *, read_only: bool = False) -> dict[str, Any]:
    """The completion of ``op`` that raised ``exc``: ``fail`` if it certainly had no effect, else ``info``.

    Whether it certainly had no effect is the error's own ``definite`` flag (set by ``protocol.codes`` for
    RPC replies, by the producer for sends, and on the client errors raised before anything was sent).
    Everything else is unknown.  ``read_only`` ops have no effect, so they are always ``fail``.
    """
    definite = getattr(exc, "definite", False) is True
    kind = "fail" if definite or read_only else "info"
    return {**op, "type": kind, "error": f"{type(exc).__name__}: {exc}"}


def option(default: Any, lo: Any = None, hi: Any = None, *, allowed: str, pattern: str | None = None) -> Any:
    """A workload option field: ``default`` (its type is the option's type), an inclusive range, or for a
    string a ``pattern`` it must match in full; ``allowed`` is what an error says a good value is."""
    return dataclasses.field(default=default, metadata={"lo": lo, "hi": hi, "allowed": allowed, "pattern": pattern})


def parse_options(ctx: WorkloadContext, cls: type[T]) -> T:
    """``cls`` (a dataclass of :func:`option` fields) from ``ctx.options``, every value checked.

    Raises:
        SpecError: an unknown key, or a value of the wrong type or out of range, naming
            ``workloads[i].options.<key>``.
    """
    source = getattr(ctx.spec, "source", "<spec>")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key in ctx.options:
        if key not in fields:
            raise SpecError(source, f"workloads[{ctx.index}].options.{key}", ctx.options[key],
                            f"a known option; known: {sorted(fields)}")
    values: dict[str, Any] = {}
    for name, f in fields.items():
        meta = f.metadata
        value = ctx.option(name, f.default, type(f.default), meta["allowed"])
        lo, hi, pattern = meta["lo"], meta["hi"], meta["pattern"]
        bad = (pattern is not None and not re.fullmatch(pattern, value)) or \
              (lo is not None and value < lo) or (hi is not None and value > hi)
        if bad:
            raise SpecError(source, f"workloads[{ctx.index}].options.{name}", value, meta["allowed"])
        values[name] = value
    return cls(**values)


def invocation(ctx: g.Context, f: str, value: Any) -> dict[str, Any] | None:
    """An invocation of ``f`` on the first free thread of ``ctx`` (None if every thread is busy).

    The context orders its threads: under :func:`harness.generator.pace` it holds just the worker whose
    turn it is, under :func:`harness.generator.stagger` the least recently used thread comes first."""
    thread = ctx.free_thread()
    if thread is None:
        return None
    return {"type": "invoke", "process": ctx.workers[thread], "time": ctx.time_ns, "f": f, "value": value}


def thread_of(ctx: g.Context, process: Any) -> Any:
    """The client thread a process runs on (threads keep ``process % client_threads``)."""
    if isinstance(process, int) and ctx.client_threads > 0:
        return process % ctx.client_threads
    return process


@dataclass(frozen=True)
class StatsChecker:
    """Op counts by ``f`` and type (Jepsen ``stats``); invalid if a ``required`` f never completed ok."""

    required: tuple[str, ...] = ()
    fs: frozenset[str] = frozenset()

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> dict[str, Any]:
        counts: dict[str, dict[str, int]] = {}
        for op in history:
            d = op.to_dict() if isinstance(op, Op) else op
            if d.get("process") == "nemesis" or d.get("type") == "invoke" or (self.fs and d.get("f") not in self.fs):
                continue
            by_type = counts.setdefault(str(d.get("f")), {"ok": 0, "fail": 0, "info": 0})
            by_type[str(d.get("type"))] = by_type.get(str(d.get("type")), 0) + 1
        never = [f for f in self.required if counts.get(f, {}).get("ok", 0) == 0]
        out: dict[str, Any] = {"valid": not never, "by_f": counts}
        if never:
            out["never_ok"] = never
        return out


def op_dicts(history: Sequence[Any]) -> list[dict[str, Any]]:
    """The history's ops as plain dicts (checkers accept both :class:`Op` and dicts)."""
    return [op.to_dict() if isinstance(op, Op) else dict(op) for op in history]


def unserved(ctx: WorkloadContext, workload: str, capability: str) -> SpecError:
    """The error a generic workload's builder raises when ``ctx.db`` lacks the client protocol of ``capability``
    (a name of :data:`harness.protocols.CAPABILITIES`), on ``workloads[i].name``, naming the system's DB, the
    capability and its protocol.  Validation refuses such a spec earlier (:func:`workloads.registry.needs`); this is
    the builder's second line, where it narrows ``ctx.db`` to the protocol it calls."""
    cap = CAPABILITIES[capability]
    proto = f" ({cap.protocol.__module__}.{cap.protocol.__name__})" if cap.protocol is not None else ""
    db = type(ctx.db)
    return SpecError(getattr(ctx.spec, "source", "<spec>"), f"workloads[{ctx.index}].name", workload,
                     f"a workload the system can serve: {workload} needs {capability}{proto}, which the system's "
                     f"DB ({db.__module__}.{db.__qualname__}) does not offer")


# Our cluster's own workloads (queue, controller-register, broker-ids, membership) speak its wire protocol.  Their
# builders run without a DB in unit tests (they validate options only), so their clients keep the DB they were
# given and narrow it here when they first call it, raising MissingCapability (validation refuses such a spec
# before that, by the capability ``splitbrain-protocol``).


@runtime_checkable
class WireDB(WireClients, Specified, Protocol):
    """A DB speaking our cluster's wire protocol (:class:`~harness.protocols.WireClients`) that keeps its spec
    (:class:`~harness.protocols.Specified`): what the ``queue`` workload calls (it reads the broker sets from the
    spec)."""


def wire_db(db: object, workload: str) -> WireClients:
    """``db`` as a :class:`~harness.protocols.WireClients`, or :class:`~harness.protocols.MissingCapability`."""
    if not isinstance(db, WireClients):
        raise MissingCapability(db, workload, ["splitbrain-protocol"])
    return db


def wire_spec_db(db: object, workload: str) -> WireDB:
    """``db`` as a :class:`WireDB`, or :class:`~harness.protocols.MissingCapability` naming what it lacks."""
    if not isinstance(db, WireDB):
        raise MissingCapability(db, workload, [name for name, proto in (("splitbrain-protocol", WireClients),
                                                                         ("a spec (Specified)", Specified))
                                               if not isinstance(db, proto)])
    return db


def registration_db(db: object, workload: str) -> Registration:
    """``db`` as a :class:`~harness.protocols.Registration` (it starts extra brokers), or
    :class:`~harness.protocols.MissingCapability`."""
    if not isinstance(db, Registration):
        raise MissingCapability(db, workload, ["registration"])
    return db


def cluster_options(db: object) -> Any:
    """Our cluster's options (:class:`systems.splitbrain.options.ClusterOptions`) when ``db`` is our cluster's DB,
    else None.  The one place our cluster's workloads read past the protocols: the cluster name their requests
    carry and the settings their checkers are told (unsafe replication, unclean election) are our cluster's own,
    and a DB without them gets the defaults (a DB of tests' own)."""
    return getattr(db, "options", None)


def cluster_name(db: object) -> str:
    """The cluster name our cluster's requests carry (:func:`cluster_options`; ``splitbrain`` by default)."""
    return str(getattr(cluster_options(db), "cluster_name", "splitbrain"))


class BrokerSpawningClient:
    """The end of a client that starts brokers of its own (``extra``, the DB's
    :class:`~harness.protocols.ExtraBrokerSlots` under ``extra_root``) and holds a controller client: teardown
    kills every broker it started, close closes the controller client.

    ``extra`` is asked of the DB on first use, not when the client is built: a workload's builder validates its
    options with no DB to start brokers yet, and the clients the workers open share the first one's slots."""

    _workload: str  # the workload's name, for errors
    _db: object  # the DB the workload was built with, narrowed where it is called
    controller: Any
    extra_root: str
    _extra: ExtraBrokerSlots | None

    @property
    def db(self) -> WireClients:
        return wire_db(self._db, self._workload)

    @property
    def extra(self) -> ExtraBrokerSlots:
        if self._extra is None:
            self._extra = registration_db(self._db, self._workload).extra_brokers(self.extra_root)
        return self._extra

    async def teardown(self, test: dict[str, Any]) -> None:
        if self._extra is not None:
            await self._extra.kill_all(test)

    async def close(self, test: dict[str, Any]) -> None:
        if self.controller is not None:
            with contextlib.suppress(Exception):
                await self.controller.close()


def invoke_times(history: Sequence[Any]) -> dict[int, int]:
    """The invoke time of each completed op, by the completion's index (invoke and completion pair by process,
    the history's rule)."""
    pending: dict[Any, int] = {}
    out: dict[int, int] = {}
    for d in op_dicts(history):
        if d.get("type") == "invoke":
            pending[d.get("process")] = d.get("time", 0)
        elif d.get("process") in pending and isinstance(d.get("index"), int):
            out[d["index"]] = pending.pop(d.get("process"))
    return out


class InvariantOps:
    """A ``checker.invariants`` history built from a workload's observations: each becomes an invoke/ok pair
    on a process of its own (``<prefix>-<op's process>``), in the order they are added, numbered with the index
    of the workload op it came from, so an anomaly names the ops of the run's history.

    A table read spans its op, from the invoke time ``invokes`` holds for it (:func:`invoke_times`) to its
    completion: the checker orders two reads only when one had completed before the other was invoked, since
    reads by several processes overlap and may complete in another order than the controller answered them.
    Without its invoke time a read is taken to happen at its completion."""

    def __init__(self, prefix: str, invokes: Mapping[int, int] | None = None) -> None:
        self.prefix = prefix
        self.invokes = dict(invokes or {})
        self.ops: list[dict[str, Any]] = []

    def add(self, d: Mapping[str, Any], f: str, value: dict[str, Any], *, invoke_time: int | None = None) -> None:
        time = d.get("time", 0)
        index = d.get("index") if isinstance(d.get("index"), int) else len(self.ops)
        base = {"process": f"{self.prefix}-{d.get('process')}", "f": f, "index": index}
        self.ops.append({**base, "type": "invoke", "time": time if invoke_time is None else invoke_time,
                         "value": None})
        self.ops.append({**base, "type": "ok", "time": time, "value": value})

    def broker_started(self, d: Mapping[str, Any], broker_name: str, node: str, state: Mapping[str, Any]) -> None:
        """A broker ``node`` of ``broker_name`` reported ``state`` (its broker_id and, if known, its epoch)."""
        if not isinstance(state.get("broker_id"), int):
            return
        self.add(d, "broker-id", {"broker_name": broker_name, "node": node, "broker_id": state["broker_id"]})
        if isinstance(state.get("broker_epoch"), int):
            self.add(d, "replica-info", {"broker_name": broker_name, "observer": node,
                                         "broker_epochs": {str(state["broker_id"]): state["broker_epoch"]}})

    def table_read(self, d: Mapping[str, Any], broker_name: str, v: Mapping[str, Any]) -> None:
        """The controller's replica table of ``broker_name`` as one read ``v`` returned it."""
        self.add(d, "replica-info", {"broker_name": broker_name, "master_broker_id": v.get("master_id"),
                                     "master_epoch": v.get("master_epoch"), "observer": "controller-table",
                                     "sync_state_set_epoch": v.get("sync_state_set_epoch")},
                 invoke_time=self.invokes.get(d["index"]) if isinstance(d.get("index"), int) else None)


def linearizability_result(res: LinResult, n_ops: int, *, key: str | None = None) -> Result:
    """A linearizability check as a checker verdict.

    The search's figures become the stats (``first_failure``, steps, ...; and for a failure its
    ``explanation`` and the ``failure_window`` the web UI draws); a failure is also one
    ``nonlinearizable`` anomaly naming the op that cannot be placed and the last ok op before it, so the
    CLI summary, JUnit and the run list say what failed like they do for every other checker.

    ``key`` is for a history checked one register at a time (:mod:`checker.per_key`): the register's name becomes
    the anomaly's key and starts its explanation, since the ops alone do not say which register they touched.
    """
    stats: dict[str, Any] = {k: v for k, v in res.to_dict().items() if k != "valid"}
    stats["ops"] = n_ops
    anomalies: dict[str, list[Anomaly]] = {}
    if res.valid is False:
        stats["explanation"] = res.describe() if key is None else f"register {key}: {res.describe()}"
        window = failure_window(res)
        if window is not None:
            stats["failure_window"] = window
        failing = res.op.index if res.op is not None else (res.call.invoke.index if res.call is not None else None)
        ops = tuple(i for i in (failing, res.previous_ok.index if res.previous_ok is not None else None)
                    if isinstance(i, int) and i >= 0)
        name = key if key is not None else ("" if res.partition is None else repr(res.partition))
        anomalies["nonlinearizable"] = [Anomaly(
            "nonlinearizable", name, ops, res.reason or f"an order of the ops that {res.model} allows",
            res.first_failure(), stats["explanation"])]
    valid: bool | Literal["unknown"] = res.valid if isinstance(res.valid, bool) else "unknown"
    return Result(valid=valid, anomalies=anomalies, stats=stats, error=res.cause or None)
