"""The store's exception hierarchy.

    StoreError                    base of everything the store raises on purpose
    ├── StoreCorruption           on-disk data failed a check (CRC, framing, hole); names file and offset
    ├── StoreFullError            a write failed with ENOSPC (also an OSError); the broker answers DISK_FULL
    ├── StoreIOError              any other failed write/fsync (also an OSError); outcome of the write unknown
    ├── OffsetError               a physical/logical offset outside the log or not on a record boundary
    ├── EpochFileError            an epoch-file update breaking the epoch rules, or an unreadable epoch file
    ├── InconsistentClusterId     the store belongs to another cluster (cluster-join-protocol.md "wrong store")
    └── StoreClosed               the store was used after close()

Every message says what was expected, what was found, and where (file, offset, epoch).
"""

from __future__ import annotations

import errno


class StoreError(Exception):
    """Base class of all store errors."""


class StoreCorruption(StoreError):
    """On-disk data is damaged somewhere other than a torn tail.

    Attributes:
        path: the file holding the damaged bytes.
        offset: the physical offset (commit log) or byte position (other files) of the damage.
    """

    def __init__(self, message: str, *, path: str = "", offset: int = -1) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset


class StoreFullError(StoreError, OSError):
    """A write failed because the disk is full (errno ENOSPC).  The log is unchanged."""

    def __init__(self, message: str) -> None:
        OSError.__init__(self, errno.ENOSPC, message)

    def __str__(self) -> str:
        return str(self.strerror)


class StoreIOError(StoreError, OSError):
    """A write or fsync failed for another reason; bytes written before it may or may not be durable."""

    def __init__(self, message: str, code: int = errno.EIO) -> None:
        OSError.__init__(self, code, message)

    def __str__(self) -> str:
        return str(self.strerror)


class OffsetError(StoreError, ValueError):
    """An offset argument is outside the valid range or not on a record boundary."""


class EpochFileError(StoreError, ValueError):
    """An epoch entry that breaks the rules (epochs and start offsets strictly increase), or a bad file."""


class InconsistentClusterId(StoreError):
    """The store's initial signature names another cluster.

    Attributes:
        expected: the cluster id this broker was started with.
        found: the cluster id recorded in the store's ``cluster.sig``.
    """

    def __init__(self, message: str, *, expected: str, found: str) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found


class StoreClosed(StoreError):
    """The store (or one of its files) was used after close()."""
