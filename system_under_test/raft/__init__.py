"""Raft: sans-IO core, durable storage and asyncio node shell.

Public surface:

* vocabulary (``types``): Entry, HardState, Snapshot, Message, Ready, RaftConfig and the errors;
* :class:`RaftCore` -- the pure protocol state machine;
* :class:`RaftStorage` -- hard state, log segments and snapshot on disk;
* :class:`RaftNode` -- the asyncio shell (persist -> send -> apply -> advance), with its
  :class:`StateMachine` protocol;
* :class:`RaftTransport`, :func:`messages_from_frame` -- RAFT_MESSAGE frames over protocol.rpc;
* :func:`serve_raft`, :func:`deliver_frame` -- a standalone Raft message server (tests, bench, demo).

Errors::

    RaftError
     +-- ProposalDropped     definitely not committed (not leader / index lost to another entry)
     +-- RaftTimeout         outcome unknown (not committed within the timeout)
     +-- StorageCorruption   a damaged raft file; the node must not start
"""

from system_under_test.raft.core import RaftCore
from system_under_test.raft.node import RaftNode, RaftTimeout, StateMachine
from system_under_test.raft.server import RaftServer, deliver_frame, serve_raft
from system_under_test.raft.storage import RaftStorage
from system_under_test.raft.transport import RaftTransport, messages_from_frame
from system_under_test.raft.types import (
    Entry,
    EntryKind,
    HardState,
    Message,
    MessageType,
    ProposalDropped,
    RaftConfig,
    RaftError,
    ReadState,
    Ready,
    Role,
    Snapshot,
    SoftState,
    StorageCorruption,
    message_from_wire,
    message_to_wire,
)

__all__ = [
    "Entry",
    "EntryKind",
    "HardState",
    "Message",
    "MessageType",
    "ProposalDropped",
    "RaftConfig",
    "RaftCore",
    "RaftError",
    "RaftNode",
    "RaftServer",
    "RaftStorage",
    "RaftTimeout",
    "ReadState",
    "Ready",
    "Role",
    "Snapshot",
    "SoftState",
    "StateMachine",
    "StorageCorruption",
    "RaftTransport",
    "deliver_frame",
    "message_from_wire",
    "message_to_wire",
    "messages_from_frame",
    "serve_raft",
]
