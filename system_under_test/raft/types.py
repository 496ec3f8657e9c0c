"""Raft vocabulary shared by the pure core, the storage and the asyncio node shell.

Words (Raft paper, section 5):

* **term** -- a logical election period; at most one leader per term.
* **index** -- position of an entry in the replicated log, 1-based; 0 means "before the log".
* **hard state** -- (term, vote, commit): what must be on disk before the node sends any
  message that depends on it.
* **entry** -- one log record: (term, index, kind, data).
* **snapshot** -- the state machine's state at (index, term), plus the voter set.
* **Ready** -- everything the core wants the shell to do next; see :class:`Ready`.

Everything here is a frozen dataclass and validates itself on construction.  The wire form of
a :class:`Message` is a msgpack-able dict produced by :func:`message_to_wire`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class EntryKind(enum.IntEnum):
    NORMAL = 0  # application data (a controller event batch)
    NOOP = 1  # appended by a new leader before serving (commits earlier-term entries)


@dataclass(frozen=True, slots=True)
class Entry:
    term: int
    index: int
    data: bytes = b""
    kind: EntryKind = EntryKind.NORMAL

    def __post_init__(self) -> None:
        if self.term < 0 or self.index < 1:
            raise ValueError(f"Entry needs term >= 0 and index >= 1, got term={self.term} index={self.index}")

    def describe(self) -> str:
        return f"{self.term}/{self.index} {self.kind.name}{'' if not self.data else f' {len(self.data)}B'}"


@dataclass(frozen=True, slots=True)
class HardState:
    term: int = 0
    vote: str | None = None
    commit: int = 0

    def __post_init__(self) -> None:
        if self.term < 0 or self.commit < 0:
            raise ValueError(f"HardState needs term >= 0 and commit >= 0, got {self}")

    def describe(self) -> str:
        return f"term={self.term} vote={self.vote or '-'} commit={self.commit}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    index: int
    term: int
    data: bytes
    voters: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.index < 0 or self.term < 0:
            raise ValueError(f"Snapshot needs index >= 0 and term >= 0, got index={self.index} term={self.term}")
        if not self.voters:
            raise ValueError("Snapshot needs a non-empty voter set")

    def describe(self) -> str:
        return f"snapshot@{self.term}/{self.index} {len(self.data)}B voters={','.join(self.voters)}"


class MessageType(enum.IntEnum):
    APPEND = 1  # leader -> follower: entries after (log_term, index); carries commit
    APPEND_RESP = 2  # follower -> leader: reject or ack up to index; reject_hint for fast backoff
    VOTE = 3  # candidate -> all: log position (log_term, index)
    VOTE_RESP = 4
    PRE_VOTE = 5  # would-be candidate -> all, at term+1, without bumping the real term
    PRE_VOTE_RESP = 6
    HEARTBEAT = 7  # leader -> follower: commit (min of follower match and leader commit); context for read-index
    HEARTBEAT_RESP = 8
    SNAPSHOT = 9  # leader -> follower: InstallSnapshot
    TIMEOUT_NOW = 10  # leadership transfer: target campaigns immediately


@dataclass(frozen=True, slots=True)
class Message:
    type: MessageType
    src: str
    dst: str
    term: int
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    snapshot: Snapshot | None = None
    context: bytes = b""

    def __post_init__(self) -> None:
        if self.term < 0:
            raise ValueError(f"Message term must be >= 0, got {self.term}")
        if self.src == self.dst:
            raise ValueError(f"Message from {self.src} to itself")

    def describe(self) -> str:
        parts = [f"{self.src}->{self.dst} {self.type.name} term={self.term}"]
        if self.type in (MessageType.APPEND, MessageType.VOTE, MessageType.PRE_VOTE):
            parts.append(f"log={self.log_term}/{self.index}")
        if self.entries:
            parts.append(f"entries=[{', '.join(e.describe() for e in self.entries)}]")
        if self.commit:
            parts.append(f"commit={self.commit}")
        if self.reject:
            parts.append(f"reject hint={self.reject_hint}")
        elif self.type in (MessageType.APPEND_RESP,):
            parts.append(f"index={self.index}")
        if self.snapshot is not None:
            parts.append(self.snapshot.describe())
        return " ".join(parts)


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state the shell may want to observe (not persisted)."""

    leader: str | None
    role: Role


@dataclass(frozen=True, slots=True)
class ReadState:
    """A read-index result: once the local applied index reaches ``index``, reads tagged
    ``context`` are linearizable."""

    index: int
    context: bytes


@dataclass(frozen=True)
class Ready:
    """What the shell must do, in this order (see system_under_test/raft/node.py):

    1. persist ``snapshot`` (if any), then ``entries`` (overwriting any existing entries from
       ``entries[0].index`` on), then ``hard_state`` (if any) -- fsync when ``must_sync``;
    2. send ``messages`` (only after step 1: a vote or an ack must never outrun the disk);
    3. restore ``snapshot`` into the state machine (if any) and apply ``committed_entries``;
    4. call ``advance()`` on the core.
    """

    soft_state: SoftState | None = None
    hard_state: HardState | None = None
    entries: tuple[Entry, ...] = ()
    snapshot: Snapshot | None = None
    committed_entries: tuple[Entry, ...] = ()
    messages: tuple[Message, ...] = ()
    read_states: tuple[ReadState, ...] = ()
    must_sync: bool = False

    def is_empty(self) -> bool:
        return not (
            self.soft_state or self.hard_state or self.entries or self.snapshot or self.committed_entries
            or self.messages or self.read_states
        )


@dataclass(frozen=True)
class RaftConfig:
    """Static configuration of one Raft node.

    Attributes:
        node_id: this node's id; must be in ``voters``.
        voters: ids of every voting member (the initial configuration).
        election_ticks: a follower that hears no leader for a randomized ``[election_ticks,
            2*election_ticks)`` ticks starts a (pre-)election.  Must exceed ``heartbeat_ticks``;
            the ratio trades failover time against spurious elections under load.
        heartbeat_ticks: leader heartbeat period in ticks.
        pre_vote: run a pre-vote round first so a partitioned node cannot disrupt the quorum by
            inflating its term when it rejoins.
        check_quorum: a leader that has not heard from a majority within ``election_ticks``
            steps down (needed for leader leases and to bound stale leadership).
        max_batch_entries / max_inflight: flow control of log replication (pipelining window).
    """

    node_id: str
    voters: tuple[str, ...]
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    max_batch_entries: int = 512
    max_inflight: int = 64

    def __post_init__(self) -> None:
        if self.node_id not in self.voters:
            raise ValueError(f"RaftConfig.node_id {self.node_id!r} is not in voters {list(self.voters)}")
        if len(set(self.voters)) != len(self.voters):
            raise ValueError(f"RaftConfig.voters has duplicates: {list(self.voters)}")
        if self.heartbeat_ticks < 1 or self.election_ticks <= self.heartbeat_ticks:
            raise ValueError(
                f"RaftConfig needs 1 <= heartbeat_ticks < election_ticks, got heartbeat_ticks={self.heartbeat_ticks} "
                f"election_ticks={self.election_ticks}"
            )
        if self.max_batch_entries < 1 or self.max_inflight < 1:
            raise ValueError("RaftConfig.max_batch_entries and max_inflight must be >= 1")


class RaftError(Exception):
    """Base of Raft errors."""


class ProposalDropped(RaftError):
    """The proposal was not appended (not leader, or a leadership transfer is in progress).

    Attributes:
        leader: the known leader id, if any (the hint for NOT_LEADER replies).
    """

    def __init__(self, message: str, leader: str | None = None) -> None:
        super().__init__(message)
        self.leader = leader


class StorageCorruption(RaftError):
    """A record in the middle of the Raft log or a state file failed its CRC; the node must stop."""


def _entry_to_wire(e: Entry) -> list[Any]:
    return [e.term, e.index, int(e.kind), e.data]


def _entry_from_wire(w: list[Any]) -> Entry:
    return Entry(term=int(w[0]), index=int(w[1]), kind=EntryKind(w[2]), data=bytes(w[3]))


def entry_to_wire(e: Entry) -> list[Any]:
    return _entry_to_wire(e)


def entry_from_wire(w: list[Any]) -> Entry:
    return _entry_from_wire(w)


def message_to_wire(m: Message) -> dict[str, Any]:
    """A msgpack-able dict; omits default fields to keep heartbeats small."""
    d: dict[str, Any] = {"t": int(m.type), "s": m.src, "d": m.dst, "term": m.term}
    if m.log_term:
        d["lt"] = m.log_term
    if m.index:
        d["i"] = m.index
    if m.entries:
        d["e"] = [_entry_to_wire(e) for e in m.entries]
    if m.commit:
        d["c"] = m.commit
    if m.reject:
        d["r"] = True
    if m.reject_hint:
        d["rh"] = m.reject_hint
    if m.snapshot is not None:
        s = m.snapshot
        d["snap"] = [s.index, s.term, s.data, list(s.voters)]
    if m.context:
        d["ctx"] = m.context
    return d


def message_from_wire(d: dict[str, Any]) -> Message:
    """Inverse of :func:`message_to_wire`.

    Raises:
        ValueError: naming the bad field (a malformed peer message).
    """
    if not isinstance(d, dict):
        raise ValueError(f"malformed raft message {d!r:.200}: expected a map, got {type(d).__name__}")
    try:
        snap = d.get("snap")
        return Message(
            type=MessageType(d["t"]),
            src=str(d["s"]),
            dst=str(d["d"]),
            term=int(d["term"]),
            log_term=int(d.get("lt", 0)),
            index=int(d.get("i", 0)),
            entries=tuple(_entry_from_wire(w) for w in d.get("e", ())),
            commit=int(d.get("c", 0)),
            reject=bool(d.get("r", False)),
            reject_hint=int(d.get("rh", 0)),
            snapshot=None if snap is None else Snapshot(int(snap[0]), int(snap[1]), bytes(snap[2]), tuple(snap[3])),
            context=bytes(d.get("ctx", b"")),
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"malformed raft message {d!r:.200}: {exc}") from exc


