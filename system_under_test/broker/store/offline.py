"""Offline surgery on a closed store's files (shell), for nemeses and admin tools."""

from __future__ import annotations

import os

from system_under_test.broker.store import _fileio
from system_under_test.broker.store.commitlog import COMMITLOG_DIR


def cut_files_offline(store_dir: str, phys_offset: int) -> int:
    """Drop every commit-log byte at or after ``phys_offset`` directly in the files of a store that is
    NOT open -- what a power cut does to bytes that were never fsynced (the lose-unfsynced-writes
    nemesis passes the broker's last reported ``synced_offset``).  The cut need not be on a record
    boundary: the next open treats a partial record as a torn tail.  Returns the bytes dropped.
    """
    directory = os.path.join(store_dir, COMMITLOG_DIR)
    dropped = 0
    names = sorted(n for n in os.listdir(directory) if len(n) == 20 and n.isdigit())
    for name in names:
        start, path = int(name), os.path.join(directory, name)
        size = os.path.getsize(path)
        if start >= phys_offset and start != int(names[0]):
            os.unlink(path)
            dropped += size
        elif start + size > phys_offset:
            os.truncate(path, max(0, phys_offset - start))
            dropped += start + size - max(phys_offset, start)
    _fileio.fsync_dir(directory)
    return dropped
