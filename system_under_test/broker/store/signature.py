"""Store signatures (cluster-join-protocol.md): which cluster a store belongs to, and whether it
was shut down cleanly.

* **initial signature** -- ``<store>/cluster.sig``: the cluster id, written when the store is
  created and never changed.  Stores of one cluster share it; opening a store with another
  cluster id raises :class:`InconsistentClusterId` ("wrong store").
* **final signature** -- ``<store>/clean.sig``: (cluster id, last master epoch, max offset,
  shutdown id), written on an orderly close and removed when the store is opened again.  Its
  presence marks the store **clean**; manual recovery compares final signatures to find the
  latest store.

Store states (the sets E, C, D of the join protocol):

* ``EMPTY`` -- no commit-log bytes and no epoch file (whatever else is there);
* ``CLEAN`` -- a valid ``clean.sig`` is present;
* ``DIRTY`` -- anything else (crashed, or killed, or the marker is damaged).

Both files are ``key=value`` lines with a CRC line, written atomically.
"""

from __future__ import annotations

import enum
import logging
import os
from dataclasses import asdict, dataclass

from system_under_test.broker.store import _fileio
from system_under_test.broker.store._kv import encode_kv, parse_kv
from system_under_test.broker.store.errors import InconsistentClusterId, StoreCorruption

log = logging.getLogger("splitbrain.broker.store.signature")

CLUSTER_SIG_NAME = "cluster.sig"
CLEAN_SIG_NAME = "clean.sig"


class StoreState(enum.Enum):
    EMPTY = "empty"
    CLEAN = "clean"
    DIRTY = "dirty"


@dataclass(frozen=True)
class InitialSignature:
    """The cluster this store belongs to, and when the store was created (ms, store clock)."""

    cluster_id: str
    created_ms: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.cluster_id, str) or not self.cluster_id or "\n" in self.cluster_id:
            raise ValueError(f"cluster_id must be a non-empty single-line str, got {self.cluster_id!r}")


@dataclass(frozen=True)
class FinalSignature:
    """What a clean store looked like at shutdown; equal final signatures mean equal clean stores."""

    cluster_id: str
    last_epoch: int
    max_offset: int
    shutdown_id: str

    def __post_init__(self) -> None:
        if self.last_epoch < 0 or self.max_offset < 0:
            raise ValueError(f"FinalSignature needs epoch/offset >= 0, got {self.last_epoch}/{self.max_offset}")

    def describe(self) -> str:
        return f"{self.cluster_id} epoch={self.last_epoch} max={self.max_offset} shutdown={self.shutdown_id}"


@dataclass(frozen=True)
class StoreInspection:
    """What :func:`inspect_store` found (for the admin ``store inspect`` verb and formation)."""

    directory: str
    state: StoreState
    initial: InitialSignature | None
    final: FinalSignature | None

    def describe(self) -> str:
        cid = self.initial.cluster_id if self.initial else "-"
        fin = self.final.describe() if self.final else "-"
        return f"store {self.directory}: {self.state.value} cluster={cid} final=[{fin}]"


def read_initial(store_dir: str) -> InitialSignature | None:
    """The initial signature, None if absent.

    Raises:
        StoreCorruption: the file exists but is damaged.
    """
    path = os.path.join(store_dir, CLUSTER_SIG_NAME)
    raw = _fileio.read_or_none(path)
    if raw is None:
        return None
    try:
        fields = parse_kv(raw, path, ("cluster_id", "created_ms"))
        return InitialSignature(fields["cluster_id"], int(fields["created_ms"]))
    except ValueError as exc:
        raise StoreCorruption(f"initial signature unreadable: {exc}", path=path, offset=0) from exc


def read_final(store_dir: str) -> FinalSignature | None:
    """The final signature, or None if absent or damaged (a damaged marker means dirty; logged)."""
    path = os.path.join(store_dir, CLEAN_SIG_NAME)
    raw = _fileio.read_or_none(path)
    if raw is None:
        return None
    try:
        f = parse_kv(raw, path, ("cluster_id", "last_epoch", "max_offset", "shutdown_id"))
        return FinalSignature(f["cluster_id"], int(f["last_epoch"]), int(f["max_offset"]), f["shutdown_id"])
    except ValueError as exc:
        log.warning("clean marker damaged, treating the store as dirty: %s", exc)
        return None


def has_data(store_dir: str) -> bool:
    """True if the store holds commit-log bytes or an epoch file."""
    cl = os.path.join(store_dir, "commitlog")
    if os.path.isdir(cl):
        for name in os.listdir(cl):
            p = os.path.join(cl, name)
            if os.path.isfile(p) and os.path.getsize(p) > 0:
                return True
    return any(os.path.exists(os.path.join(store_dir, n)) for n in ("epochFileCheckpoint", "epochFileCheckpoint.bak"))


def inspect_store(store_dir: str) -> StoreInspection:
    """Classify a store directory without changing it (a missing directory is EMPTY)."""
    if not os.path.isdir(store_dir):
        return StoreInspection(store_dir, StoreState.EMPTY, None, None)
    initial = read_initial(store_dir)
    final = read_final(store_dir)
    if final is not None:
        state = StoreState.CLEAN
    elif has_data(store_dir):
        state = StoreState.DIRTY
    else:
        state = StoreState.EMPTY
    return StoreInspection(store_dir, state, initial, final)


def bind_cluster(store_dir: str, cluster_id: str, now_ms: int) -> InitialSignature:
    """Check (or, for a new store, write) the initial signature.

    Raises:
        InconsistentClusterId: the store belongs to another cluster.
        StoreCorruption: the store holds data but has no initial signature.
    """
    InitialSignature(cluster_id)  # validate
    existing = read_initial(store_dir)
    path = os.path.join(store_dir, CLUSTER_SIG_NAME)
    if existing is None:
        if has_data(store_dir):
            raise StoreCorruption(
                f"store {store_dir} holds data but has no {CLUSTER_SIG_NAME}; cannot tell which cluster it "
                f"belongs to. Restore the file or wipe the store",
                path=path,
                offset=0,
            )
        sig = InitialSignature(cluster_id, now_ms)
        _fileio.atomic_write(path, encode_kv(asdict(sig)))
        return sig
    if existing.cluster_id != cluster_id:
        raise InconsistentClusterId(
            f"store {store_dir} belongs to cluster {existing.cluster_id!r} but this broker was started for cluster "
            f"{cluster_id!r} (wrong store: point the broker at another directory or wipe this one)",
            expected=cluster_id,
            found=existing.cluster_id,
        )
    return existing


def write_clean(store_dir: str, final: FinalSignature) -> None:
    """Mark the store clean (last step of an orderly close)."""
    _fileio.atomic_write(os.path.join(store_dir, CLEAN_SIG_NAME), encode_kv(asdict(final)))


def take_clean(store_dir: str) -> FinalSignature | None:
    """Read and durably remove the clean marker (first step of open): from now on, until the next
    orderly close, the store is dirty."""
    final = read_final(store_dir)
    _fileio.remove_durably(os.path.join(store_dir, CLEAN_SIG_NAME))
    return final
