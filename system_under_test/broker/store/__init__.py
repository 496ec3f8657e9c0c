"""The broker's message store: commit log, consume queues, epoch file, checkpoint and signatures.

Public surface (everything else is internal):

* :class:`MessageStore` -- the façade the broker and HA code use (``open``, ``put``, ``get``, ``get_raw``,
  ``append_raw``, ``read_raw``, ``truncate``, ``set_confirm_offset``, ``flush``, ``close``);
* :class:`StoreConfig`, :class:`FlushPolicy`;
* :class:`Record` and its frame codec (:func:`encode`, :func:`decode`, :func:`decode_many`,
  :func:`decode_pulled` for the frames a PULL_MESSAGE reply carries);
* :class:`EpochFileCache`, :class:`EpochEntry`, :class:`EpochRange`, :class:`EpochHistory`;
* :func:`find_consistent_point` (RIP-44 slave truncation point);
* signatures: :class:`StoreState`, :func:`inspect_store`, :class:`FinalSignature`;
* errors (see :mod:`.errors` for the tree).
"""

from system_under_test.broker.store.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from system_under_test.broker.store.commitlog import (
    FP_BEFORE_FSYNC,
    FP_WRITE,
    CommitLog,
    RecoveryReport,
)
from system_under_test.broker.store.config import FlushPolicy, StoreConfig
from system_under_test.broker.store.consume_queue import ENTRY_BYTES, CqEntry
from system_under_test.broker.store.epoch_file import EpochEntry, EpochFileCache, EpochHistory, EpochRange
from system_under_test.broker.store.errors import (
    EpochFileError,
    InconsistentClusterId,
    OffsetError,
    StoreClosed,
    StoreCorruption,
    StoreError,
    StoreFullError,
    StoreIOError,
)
from system_under_test.broker.store.offline import cut_files_offline
from system_under_test.broker.store.record import (
    Decoded,
    DecodeResult,
    DecodeStop,
    Record,
    StopKind,
    decode,
    decode_many,
    decode_pulled,
    encode,
    trusted_record,
    trusted_records,
)
from system_under_test.broker.store.recovery import DurableLoss
from system_under_test.broker.store.results import GetResult, PutResult, RawGetResult
from system_under_test.broker.store.signature import (
    FinalSignature,
    InitialSignature,
    StoreInspection,
    StoreState,
    inspect_store,
)
from system_under_test.broker.store.store import MessageStore
from system_under_test.broker.store.truncation import ConsistentPoint, explain_consistent_point, find_consistent_point

__all__ = [
    "MessageStore",
    "PutResult",
    "GetResult",
    "RawGetResult",
    "StoreConfig",
    "FlushPolicy",
    "Record",
    "trusted_record",
    "trusted_records",
    "encode",
    "decode",
    "decode_many",
    "decode_pulled",
    "Decoded",
    "DecodeResult",
    "DecodeStop",
    "StopKind",
    "CommitLog",
    "RecoveryReport",
    "DurableLoss",
    "cut_files_offline",
    "FP_WRITE",
    "FP_BEFORE_FSYNC",
    "CqEntry",
    "ENTRY_BYTES",
    "Checkpoint",
    "load_checkpoint",
    "save_checkpoint",
    "EpochEntry",
    "EpochRange",
    "EpochHistory",
    "EpochFileCache",
    "find_consistent_point",
    "explain_consistent_point",
    "ConsistentPoint",
    "StoreState",
    "InitialSignature",
    "FinalSignature",
    "StoreInspection",
    "inspect_store",
    "StoreError",
    "StoreCorruption",
    "StoreFullError",
    "StoreIOError",
    "OffsetError",
    "EpochFileError",
    "InconsistentClusterId",
    "StoreClosed",
]
