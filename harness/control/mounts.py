"""Mounts a run made on this machine (the lazy store file system, :mod:`nemesis.lazyfs`): find them, remove them.

Why a module: a mount left behind outlives the run that made it -- it pins the directory, and a later ``rm -r``
of the run's root walks into it -- so every way a local run ends (an orderly teardown, :meth:`LocalRemote.close`,
the supervisor after the harness was killed, ``splitbrain cluster down``) removes the mounts under the run's
root before removing the root itself.  ``umount -l`` (lazy) also removes a FUSE mount whose daemon is dead
("transport endpoint is not connected") or that a process still uses.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["is_mounted", "mounts_under", "unmount"]


def _unescape(field: str) -> str:
    """Undo mountinfo's octal escapes (space, tab, newline, backslash)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit() and len(field[i + 1 : i + 4]) == 3:
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mount_points(mountinfo: str | None = None) -> list[str]:
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return []
    return [_unescape(line.split()[4]) for line in mountinfo.splitlines() if len(line.split()) > 4]


def _abs(path: str | Path) -> str:
    """Absolute and normalised without touching the file system (a dead FUSE mount fails every stat)."""
    return os.path.normpath(os.path.abspath(path))


def is_mounted(path: str | Path) -> bool:
    """Whether ``path`` is a mount point in this process's mount namespace."""
    return _abs(path) in _mount_points()


def mounts_under(root: str | Path, mountinfo: str | None = None) -> list[str]:
    """Mount points at or below ``root``, deepest first (the order to unmount them in)."""
    base = _abs(root)
    found = [m for m in _mount_points(mountinfo) if m == base or m.startswith(base.rstrip("/") + "/")]
    return sorted(set(found), key=lambda m: (-m.count("/"), m))


def unmount(path: str | Path) -> bool:
    """Lazily unmount ``path`` if it is mounted; returns whether it was.  Never raises for a path that is not
    mounted (or already gone)."""
    if not is_mounted(path):
        return False
    subprocess.run(["umount", "-l", _abs(path)], capture_output=True, timeout=30, check=False)
    return True
