"""Normalising workload ops and node log events into one validated ``Observation`` record type."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# kind -> where it comes from (the one table of observation kinds; documented in checker/invariants/__init__)
KINDS: dict[str, str] = {
    "broker-id": "a broker (node) was seen holding a broker id (history op or log event)",
    "metadata": "a controller metadata snapshot / replica info: master, master epoch, sync-state set epoch",
    "became-master": "log: a broker took the master role in a master epoch",
    "accepted-write": "a broker acknowledged a write as master (send ok, or log event)",
    "fenced": "log: a broker was fenced",
    "unfenced": "log: a broker was unfenced",
    "broker-epoch": "a broker epoch observed for a broker id",
    "applied-broker-id": "an ApplyBrokerId event applied: register code -> broker id",
    "own-id-applied": "a broker (node) was answered that its ApplyBrokerId claim of a broker id was applied",
    "lease-renewed": "log: an acknowledged heartbeat moved a broker's own lease; it now counts from lease_from",
    "lease-granted": "log: the controller leader recorded a broker's heartbeat, renewing its lease of the broker",
}

HISTORY_F_KINDS = {"broker-id": "broker-id", "metadata-snapshot": "metadata", "replica-info": "metadata",
                   "apply-broker-id": "applied-broker-id", "send": "accepted-write", "own-id-applied": "own-id-applied"}
LOG_EVENT_KINDS = {"broker-id": "broker-id", "became-master": "became-master", "accepted-write": "accepted-write",
                   "fenced": "fenced", "unfenced": "unfenced", "broker-epoch": "broker-epoch",
                   "applied-broker-id": "applied-broker-id", "metadata": "metadata",
                   "own-id-applied": "own-id-applied", "lease-renewed": "lease-renewed",
                   "lease-granted": "lease-granted"}


class ObservationError(ValueError):
    """An input record that does not have the documented shape (names the record, field and value)."""


def _opt_int(d: Mapping[str, Any], key: str, where: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ObservationError(f"{where}: field {key!r} must be an int, got {v!r}")
    return v


@dataclass(frozen=True, slots=True)
class Observation:
    kind: str
    time: int  # ns since test start; for history ops the completion time
    observer: str  # "p<process>" for history ops, the node for log events
    broker_name: str  # the broker set
    op: int | None = None  # history op index (None for log events)
    node: str | None = None  # the broker the observation is about
    broker_id: int | None = None
    master_id: int | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    broker_epoch: int | None = None
    register_code: str | None = None
    # history ops: when the op was invoked (the observation holds somewhere in [invoke_time, time]); None for log
    # events, which happen at ``time``
    invoke_time: int | None = None
    # lease-renewed / lease-granted: the heartbeat's name (``<sender>#<request number>``), which pairs the two
    heartbeat: str | None = None
    # lease-renewed: when the broker's own lease now counts from, ns on the run's time axis
    lease_from: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ObservationError(f"observation kind must be one of {sorted(KINDS)}, got {self.kind!r}")
        if not isinstance(self.broker_name, str) or not self.broker_name:
            raise ObservationError(f"{self.kind} observation: 'broker_name' must be a non-empty string, "
                                   f"got {self.broker_name!r}")

    @property
    def where(self) -> str:
        return f"op {self.op}" if self.op is not None else f"log of {self.observer} at {self.time / 1e9:.3f} s"

    @property
    def start(self) -> int:
        """When the observation may first have been made: the op's invoke, or the log event's time."""
        return self.time if self.invoke_time is None else self.invoke_time


def _from_fields(kind: str, d: Mapping[str, Any], *, time: int, observer: str, op: int | None, node: str | None,
                 invoke_time: int | None = None, broker_name: Any = None) -> Observation:
    where = f"op {op}" if op is not None else f"log event {dict(d)!r}"
    rc = d.get("register_code")
    hb = d.get("heartbeat")
    if hb is not None and not isinstance(hb, str):
        raise ObservationError(f"{where}: field 'heartbeat' must be a string, got {hb!r}")
    bs = broker_name or d.get("broker_name")
    if not isinstance(bs, str) or not bs:
        raise ObservationError(f"{where}: field 'broker_name' must be a non-empty string, got {bs!r}")
    return Observation(
        kind=kind, time=time, observer=observer, broker_name=bs, op=op,
        node=node, broker_id=_opt_int(d, "broker_id", where),
        master_id=_opt_int(d, "master_broker_id", where), master_epoch=_opt_int(d, "master_epoch", where),
        sync_state_set_epoch=_opt_int(d, "sync_state_set_epoch", where),
        broker_epoch=_opt_int(d, "broker_epoch", where), register_code=None if rc is None else str(rc),
        invoke_time=invoke_time, heartbeat=hb, lease_from=_opt_int(d, "lease_from", where),
    )


def _as_dict(op: Any) -> dict[str, Any]:
    return op if isinstance(op, dict) else op.to_dict()


def observations_from_history(history: Iterable[Any]) -> Iterator[Observation]:
    """Observations from ok completions of the invariant-relevant ``f`` values (see HISTORY_F_KINDS)."""
    invokes: dict[Any, dict[str, Any]] = {}
    for raw in history:
        d = _as_dict(raw)
        kind = HISTORY_F_KINDS.get(d["f"])
        if kind is None or d["process"] == "nemesis":
            continue
        if d["type"] == "invoke":
            invokes[d["process"]] = d
            continue
        inv = invokes.pop(d["process"], None)
        if d["type"] != "ok":
            continue
        value = d.get("value") or {}
        if not isinstance(value, dict):
            raise ObservationError(f"op {d['index']}: value of an ok {d['f']!r} must be an object, got {value!r}")
        observer = str(value.get("observer") or f"p{d['process']}")
        if kind == "accepted-write":
            node = d.get("node") or (inv or {}).get("node")
            queue = str(value.get("queue", ""))
            parts = queue.split("/")
            if node is None or len(parts) != 3:
                continue  # a send we cannot attribute to a broker set and node
            yield _from_fields(kind, value, time=d["time"], observer=observer, op=d["index"], node=str(node),
                               invoke_time=(inv or d)["time"], broker_name=parts[1])
            continue
        node = value.get("node")
        invoked = (inv or d)["time"]
        if kind == "metadata":
            yield _from_fields(kind, value, time=d["time"], observer=observer, op=d["index"],
                               node=None if node is None else str(node), invoke_time=invoked)
            for bid, epoch in (value.get("broker_epochs") or {}).items():
                yield _from_fields("broker-epoch", {"broker_id": int(bid), "broker_epoch": epoch},
                                   time=d["time"], observer=observer, op=d["index"], node=None,
                                   broker_name=value.get("broker_name"), invoke_time=invoked)
            continue
        yield _from_fields(kind, value, time=d["time"], observer=observer, op=d["index"],
                           node=None if node is None else str(node), invoke_time=invoked)


def observation_from_log_event(e: Mapping[str, Any]) -> Observation:
    """One log-derived event ``{"node", "event", "time", "broker_name", ...}`` as an Observation.

    Raises:
        ObservationError: unknown event, or a missing/mistyped field (the message names both).
    """
    kind = LOG_EVENT_KINDS.get(e.get("event", ""))
    if kind is None:
        raise ObservationError(f"log event {dict(e)!r}: 'event' must be one of {sorted(LOG_EVENT_KINDS)}")
    if not isinstance(e.get("node"), str) or not isinstance(e.get("time"), int):
        raise ObservationError(f"log event {dict(e)!r}: needs 'node' (str) and 'time' (int ns since test start)")
    return _from_fields(kind, e, time=e["time"], observer=e["node"], op=None, node=e["node"])
