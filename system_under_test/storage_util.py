"""Durable file helpers shared by every store in the cluster (controller, Raft, broker).

``atomic_write_bytes`` is the one way splitbrain replaces a small file: write a temp file in the
same directory, fsync it, rename it over the target, fsync the directory.  After a crash at any
point the target holds either the old or the new complete content, never a mix.  The two halves
(:func:`write_synced_temp`, :func:`commit_temp`) are exposed so a caller can put a failpoint
between them (the broker's ``broker.meta.before_rename``).
"""

from __future__ import annotations

import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename, create or unlink inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced_temp(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``<path>.tmp`` and fsync it; ``path`` itself is untouched.  Returns the temp path.
    A failed write removes the temp file."""
    tmp = Path(path).with_name(Path(path).name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    os.close(fd)
    return tmp


def commit_temp(tmp: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Rename the synced temp file over ``path`` and fsync the directory."""
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably (temp, fsync, rename, fsync dir)."""
    commit_temp(write_synced_temp(path, data), path)
