"""Cluster formation for the controller quorum (seeds/cluster-join-protocol.md, after Qpid's cluster code).

Words:

* **initial signature** -- the cluster id, written into a store when it joins a cluster and never
  changed.  Two stores with different cluster ids never belong to one quorum.
* **final signature** -- the clean marker (shutdown id, last applied index, term) written by an
  orderly shutdown.  A store with it is **clean**; a store with a cluster id but no clean marker
  is **dirty** (the process was killed, or is running); a store with no cluster id is **empty**.
* **wait-for N** -- the number of initial members whose status a node must have before the
  quorum goes active.

This module is a pure core: :func:`decide` takes the statuses collected so far and returns WAIT,
ACTIVATE (with the cluster id to adopt) or ABORT (with a reason naming the offending member,
option or signature).  The file shell (:class:`StoreSignatures`) reads and writes the signature
files atomically.

Rules (in order):

1. Critical options (cluster name, voters, unclean election, timeouts...) must be identical on
   every member we heard from; otherwise ABORT naming the option and both values.
2. Every non-empty store must carry the same cluster id; otherwise ABORT naming both ids.
3. If some member is already **active**, this node *joins*: adopt the cluster id (an empty store)
   or verify it (a non-empty store) and ACTIVATE; Raft catches the node up.  A member reports itself
   active from the moment it has decided and written its cluster id (before its Raft starts): in that
   window its store is dirty, and a peer still forming must not take it for a crashed store (rule 6).
4. Otherwise WAIT until ``wait_for`` members (this node included) have reported.
5. All stores empty: ACTIVATE with the cluster id proposed by the smallest node id (every member
   computes the same answer from the same statuses).
6. Some stores non-empty: clean stores must share one shutdown id (else ABORT).  If no store is
   clean, the seed requires **manual recovery** (``splitbrain admin store inspect`` then
   ``mark-clean``) and we ABORT -- unless ``dirty_recovery="raft"``, which accepts dirty stores
   because the Raft log and hard state are themselves fsynced (the harness uses this when it
   kills the whole quorum on purpose).
"""

from __future__ import annotations

import enum
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from system_under_test.storage_util import atomic_write_bytes, fsync_dir


class StoreState(enum.Enum):
    EMPTY = "empty"
    CLEAN = "clean"
    DIRTY = "dirty"


@dataclass(frozen=True)
class MemberStatus:
    """What one member reports about itself during formation."""

    node_id: str
    store_state: StoreState
    cluster_id: str | None
    shutdown_id: str | None
    options: dict[str, Any]
    proposed_cluster_id: str
    active: bool = False
    last_index: int = 0

    def __post_init__(self) -> None:
        if self.store_state is StoreState.EMPTY and self.cluster_id is not None:
            raise ValueError(f"member {self.node_id}: an empty store cannot carry cluster id {self.cluster_id!r}")
        if self.store_state is not StoreState.EMPTY and not self.cluster_id:
            raise ValueError(f"member {self.node_id}: a {self.store_state.value} store must carry a cluster id")

    def to_wire(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id, "store_state": self.store_state.value, "cluster_id": self.cluster_id,
            "shutdown_id": self.shutdown_id, "options": self.options, "proposed_cluster_id": self.proposed_cluster_id,
            "active": self.active, "last_index": self.last_index,
        }

    @staticmethod
    def from_wire(d: dict[str, Any]) -> MemberStatus:
        try:
            return MemberStatus(
                node_id=str(d["node_id"]), store_state=StoreState(d["store_state"]), cluster_id=d.get("cluster_id"),
                shutdown_id=d.get("shutdown_id"), options=dict(d.get("options") or {}),
                proposed_cluster_id=str(d["proposed_cluster_id"]), active=bool(d.get("active", False)),
                last_index=int(d.get("last_index", 0)),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"malformed formation status {d!r:.200}: {exc}") from exc


class Verdict(enum.Enum):
    WAIT = "wait"
    ACTIVATE = "activate"
    ABORT = "abort"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    cluster_id: str | None = None
    reason: str = ""
    waiting_for: tuple[str, ...] = field(default_factory=tuple)


def decide(
    me: MemberStatus, peers: dict[str, MemberStatus], *, voters: tuple[str, ...], wait_for: int,
    dirty_recovery: str = "manual",
) -> Decision:
    """Decide what this member does next, from the statuses heard so far (see the module rules)."""
    if dirty_recovery not in ("manual", "raft"):
        raise ValueError(f"dirty_recovery must be 'manual' or 'raft', got {dirty_recovery!r}")
    if not 1 <= wait_for <= len(voters):
        raise ValueError(f"wait_for must be between 1 and the number of voters ({len(voters)}), got {wait_for}")
    members = {me.node_id: me, **{k: v for k, v in peers.items() if k != me.node_id}}
    for other in members.values():
        if other.node_id not in voters:
            return Decision(Verdict.ABORT, reason=f"member {other.node_id!r} is not one of the voters {list(voters)}")
        for key in sorted(set(me.options) | set(other.options)):
            mine, theirs = me.options.get(key), other.options.get(key)
            if mine != theirs:
                return Decision(
                    Verdict.ABORT,
                    reason=f"option {key!r} differs: {me.node_id} has {mine!r}, {other.node_id} has {theirs!r}",
                )
    non_empty = [m for m in members.values() if m.store_state is not StoreState.EMPTY]
    ids = {m.cluster_id for m in non_empty}
    if len(ids) > 1:
        a, b = sorted(non_empty, key=lambda m: (m.cluster_id or "", m.node_id))[:: len(non_empty) - 1]
        return Decision(
            Verdict.ABORT,
            reason=f"stores belong to different clusters: {a.node_id} has cluster id {a.cluster_id!r}, "
            f"{b.node_id} has {b.cluster_id!r} (a foreign or reused data directory?)",
        )
    active = [m for m in members.values() if m.active and m.node_id != me.node_id]
    if active:
        cluster_id = active[0].cluster_id
        if me.cluster_id is not None and me.cluster_id != cluster_id:
            return Decision(Verdict.ABORT, reason=f"this store has cluster id {me.cluster_id!r}, the active cluster "
                            f"({active[0].node_id}) has {cluster_id!r}")
        return Decision(Verdict.ACTIVATE, cluster_id=cluster_id, reason=f"joining active member {active[0].node_id}")
    if len(members) < wait_for:
        missing = tuple(v for v in voters if v not in members)
        return Decision(Verdict.WAIT, reason=f"have {len(members)} of {wait_for} initial members",
                        waiting_for=missing)
    if not non_empty:
        chosen = min(members.values(), key=lambda m: m.node_id)
        return Decision(Verdict.ACTIVATE, cluster_id=chosen.proposed_cluster_id,
                        reason=f"new cluster (id proposed by {chosen.node_id})")
    cluster_id = next(iter(ids))
    clean = [m for m in non_empty if m.store_state is StoreState.CLEAN]
    shutdown_ids = {m.shutdown_id for m in clean}
    if len(shutdown_ids) > 1:
        detail = ", ".join(f"{m.node_id}={m.shutdown_id}" for m in sorted(clean, key=lambda m: m.node_id))
        return Decision(Verdict.ABORT, reason=f"clean stores disagree on the final signature ({detail}); run "
                        "`splitbrain admin store inspect` and mark the latest one clean")
    if not clean and dirty_recovery == "manual":
        dirty = ", ".join(sorted(m.node_id for m in non_empty))
        return Decision(Verdict.ABORT, reason=f"no clean store among {dirty}: the whole quorum stopped without an "
                        "orderly shutdown; manual recovery needed: `splitbrain admin store inspect DIR...` then "
                        "`splitbrain admin store mark-clean DIR` on the latest store (or start with "
                        "--dirty-recovery raft)")
    return Decision(Verdict.ACTIVATE, cluster_id=cluster_id, reason="restart of an existing cluster")


# --------------------------------------------------------------------------------------------
# File shell: the signature files inside a controller's data directory.

CLUSTER_FILE = "cluster.sig"
CLEAN_FILE = "clean.sig"


class SignatureError(Exception):
    """A signature file exists but is corrupt (CRC mismatch or unparsable)."""


def _encode(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj, sort_keys=True).encode()
    return f"{zlib.crc32(body):08x}\n".encode() + body + b"\n"


def _decode(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    head, _, body = raw.partition(b"\n")
    body = body.rstrip(b"\n")
    try:
        if int(head, 16) != zlib.crc32(body):
            raise SignatureError(f"{path}: CRC mismatch (file is corrupt); restore it or re-create the store")
        obj = json.loads(body)
    except (ValueError, json.JSONDecodeError) as exc:
        raise SignatureError(f"{path}: unreadable signature file: {exc}") from exc
    if not isinstance(obj, dict):
        raise SignatureError(f"{path}: expected a JSON object")
    return obj


@dataclass
class StoreSignatures:
    """Reads and writes ``cluster.sig`` (initial signature) and ``clean.sig`` (final signature)."""

    data_dir: Path

    def state(self) -> StoreState:
        if not (self.data_dir / CLUSTER_FILE).exists():
            return StoreState.EMPTY
        return StoreState.CLEAN if (self.data_dir / CLEAN_FILE).exists() else StoreState.DIRTY

    def cluster(self) -> dict[str, Any] | None:
        p = self.data_dir / CLUSTER_FILE
        return _decode(p) if p.exists() else None

    def clean(self) -> dict[str, Any] | None:
        p = self.data_dir / CLEAN_FILE
        return _decode(p) if p.exists() else None

    def cluster_id(self) -> str | None:
        c = self.cluster()
        return None if c is None else str(c["cluster_id"])

    def write_cluster(self, cluster_id: str, cluster_name: str, created_ms: int) -> None:
        existing = self.cluster_id()
        if existing is not None and existing != cluster_id:
            raise SignatureError(f"{self.data_dir}: store already belongs to cluster {existing!r}, not {cluster_id!r}")
        if existing is None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.data_dir / CLUSTER_FILE, _encode(
                {"cluster_id": cluster_id, "cluster_name": cluster_name, "created_ms": created_ms}))

    def mark_dirty(self) -> None:
        p = self.data_dir / CLEAN_FILE
        if p.exists():
            p.unlink()
            fsync_dir(self.data_dir)

    def mark_clean(self, shutdown_id: str, last_index: int, term: int, time_ms: int) -> None:
        atomic_write_bytes(self.data_dir / CLEAN_FILE, _encode(
            {"shutdown_id": shutdown_id, "last_index": last_index, "term": term, "time_ms": time_ms}))

    def describe(self) -> dict[str, Any]:
        state = self.state()
        out: dict[str, Any] = {"dir": str(self.data_dir), "state": state.value}
        try:
            out["cluster"] = self.cluster()
            out["clean"] = self.clean()
        except SignatureError as exc:
            out["error"] = str(exc)
        return out
