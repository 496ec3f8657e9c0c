"""Shell: ``.broker.meta`` and ``.broker.meta.temp`` in the store root dir, written atomically.

Every write goes through :func:`atomic_write` = :func:`prepare_atomic` (write ``<name>.tmp``, fsync)
then :func:`commit_atomic` (rename over ``<name>``, fsync the directory).  A crash at any point
leaves either the old complete file or the new complete file, never a torn one; a left-over
``*.tmp`` is ignored by the loader and overwritten by the next write.  (The reference Java code
deletes and rewrites in place, without fsync; ours is atomic as the seed asks.)

"Promote" (seed CreateMetaFileFromTemp) = write ``.broker.meta`` atomically from the temp content,
then delete ``.broker.meta.temp`` and fsync the dir.  A crash between the two leaves both files;
the meta file wins on restart and the stale temp is deleted then (see
:func:`~.state_machine.restart_event`).

``MetaFiles(bug_non_atomic_meta=True)`` is the deliberately broken variant behind the test
suite's ``--bug non-atomic-meta`` switch: it truncates ``.broker.meta`` and writes it in place in
two halves with no fsync, so a crash in between leaves a torn file that the next start refuses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from system_under_test.broker.registration.meta_record import (
    MetaRecord,
    TempMetaRecord,
    decode_meta,
    decode_temp_meta,
    encode_meta,
    encode_temp_meta,
)
from system_under_test.storage_util import atomic_write_bytes, commit_temp, fsync_dir, write_synced_temp

META_NAME = ".broker.meta"
TEMP_NAME = ".broker.meta.temp"


def prepare_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``<path>.tmp`` and fsync it; returns the tmp path.  ``path`` is untouched."""
    return write_synced_temp(path, data)


def commit_atomic(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` over ``path`` and fsync the directory."""
    commit_temp(tmp, path)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers (and crashes) see the old or the new content, whole."""
    atomic_write_bytes(path, data)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class MetaFiles:
    """The two identity files of one store root dir.

    Attributes:
        store_dir: the broker's store root dir (must exist).
        bug_non_atomic_meta: write ``.broker.meta`` in place (deliberate bug; off by default).
    """

    store_dir: Path
    bug_non_atomic_meta: bool = False

    @property
    def meta_path(self) -> Path:
        return self.store_dir / META_NAME

    @property
    def temp_path(self) -> Path:
        return self.store_dir / TEMP_NAME

    def load_meta(self) -> MetaRecord | None:
        """The decoded meta file, or None if absent.

        Raises:
            MetaCorruptError: the file exists but is torn/corrupt (names the path).
        """
        data = _read(self.meta_path)
        return None if data is None else decode_meta(data, where=str(self.meta_path))

    def load_temp(self) -> TempMetaRecord | None:
        """The decoded temp meta file, or None if absent.

        Raises:
            MetaCorruptError: the file exists but is torn/corrupt (names the path).
        """
        data = _read(self.temp_path)
        return None if data is None else decode_temp_meta(data, where=str(self.temp_path))

    def write_temp(self, record: TempMetaRecord) -> None:
        """Durably (atomically) write the temp meta file."""
        atomic_write(self.temp_path, encode_temp_meta(record))

    def prepare_meta(self, record: MetaRecord) -> Path:
        """First half of writing the meta file: returns the path to pass to :meth:`commit_meta`.

        Atomic mode: writes and fsyncs ``.broker.meta.tmp``.  Bug mode: truncates ``.broker.meta`` and
        writes the first half of the content in place (so a crash now leaves a torn meta file).
        """
        data = encode_meta(record)
        if not self.bug_non_atomic_meta:
            return prepare_atomic(self.meta_path, data)
        with open(self.meta_path, "wb") as f:
            f.write(data[: len(data) // 2])
            f.flush()
        return self.meta_path

    def commit_meta(self, prepared: Path, record: MetaRecord) -> None:
        """Second half: rename into place and fsync the dir (bug mode: append the second half in place)."""
        if not self.bug_non_atomic_meta:
            commit_atomic(prepared, self.meta_path)
            return
        data = encode_meta(record)
        with open(self.meta_path, "ab") as f:
            f.write(data[len(data) // 2 :])

    def write_meta(self, record: MetaRecord) -> None:
        """Prepare and commit in one call."""
        self.commit_meta(self.prepare_meta(record), record)

    def delete_temp(self) -> None:
        """Remove the temp meta file (if present) and fsync the dir."""
        try:
            os.unlink(self.temp_path)
        except FileNotFoundError:
            pass
        fsync_dir(self.store_dir)

    def promote(self, record: TempMetaRecord) -> None:
        """Write the meta file from the temp content, then delete the temp (seed CreateMetaFileFromTemp)."""
        self.write_meta(record.to_meta())
        self.delete_temp()
