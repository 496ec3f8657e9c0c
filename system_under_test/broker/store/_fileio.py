"""Small file helpers shared by the store's metadata files (shell; private).

``atomic_write`` is the one way metadata reaches disk: write a temp file in the same
directory, fsync it, rename it over the target, fsync the directory.  A crash leaves either the
old or the new content, never a mix.
"""

from __future__ import annotations

import os

from system_under_test.storage_util import atomic_write_bytes as atomic_write
from system_under_test.storage_util import fsync_dir

__all__ = ["atomic_write", "fsync_dir", "read_or_none", "remove_durably"]


def read_or_none(path: str) -> bytes | None:
    """The file's bytes, or None if it does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def remove_durably(path: str) -> bool:
    """Unlink ``path`` (if present) and fsync its directory.  Returns whether it existed."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_dir(os.path.dirname(os.path.abspath(path)))
    return True
