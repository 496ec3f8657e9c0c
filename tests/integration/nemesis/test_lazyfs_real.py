"""The lazy file system on a real FUSE mount: reads merge what is pending over what is durable, a crash keeps only
what was fsynced (metadata stays), a clean unmount keeps everything and leaves no mount; and a commit log on it
keeps every record across a crash under flush SYNC -- unless its fsync is taken away, when the crash takes the
records the store claimed were durable (the mutation bench's ``store-fsync-dropped``, made visible).  Needs root
and /dev/fuse."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness.control.mounts import is_mounted, unmount
from nemesis.lazyfs.fs import control_request
from system_under_test.broker.store import CommitLog, FlushPolicy, Record, StoreConfig
from system_under_test.broker.store import commitlog as commitlog_module
from system_under_test.broker.store.commitlog import read_synced_file

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/fuse"),
                                 reason="FUSE mounts need root and /dev/fuse")]

SYNC = StoreConfig(segment_bytes=1 << 20, max_message_bytes=4096, flush_policy=FlushPolicy.SYNC,
                   background_flush=False)


@contextmanager
def lazyfs(tmp: Path) -> Iterator[tuple[Path, Path, str]]:
    """(backing, mount point, control socket) of a lazyfs mounted for the test; unmounted (and checked) after."""
    backing, mnt = tmp / "backing", tmp / "mnt"
    backing.mkdir()
    mnt.mkdir()
    control = str(Path(tempfile.gettempdir()) / f"sblz-test-{secrets.token_hex(4)}.sock")
    log = (tmp / "lazyfs.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "nemesis.lazyfs", "mount", str(backing), str(mnt),
                             "--control", control], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if control_request(control, {"cmd": "status"}, timeout_s=2)["ok"]:
                    break
            except OSError:
                pass
            assert proc.poll() is None, (tmp / "lazyfs.log").read_text()
            assert time.monotonic() < deadline, "lazyfs did not come up"
            time.sleep(0.05)
        assert is_mounted(mnt)
        yield backing, mnt, control
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        unmount(mnt)
        log.close()
    assert proc.returncode == 0, (tmp / "lazyfs.log").read_text()
    assert not is_mounted(mnt)


def crash(control: str, **extra: Any) -> dict[str, Any]:
    out = control_request(control, {"cmd": "crash", **extra})
    assert out["ok"], out
    return out


def test_reads_merge_and_a_crash_keeps_only_what_was_fsynced(tmp_path: Path) -> None:
    with lazyfs(tmp_path) as (backing, mnt, control):
        fd = os.open(mnt / "f", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"durable-")
            os.fsync(fd)
            os.write(fd, b"lost")
            os.pwrite(fd, b"D", 0)  # over durable bytes, not synced
            assert os.pread(fd, 100, 0) == b"Durable-lost"  # reads merge pending over durable
            assert os.pread(fd, 3, 7) == b"-lo"
            assert os.fstat(fd).st_size == 12
            assert (backing / "f").read_bytes() == b"durable-"  # the disk has only what was fsynced
            status = control_request(control, {"cmd": "status"})
            assert status["pending"] == 5 and status["files"] == {"f": 5}, status
        finally:
            os.close(fd)
        (mnt / "new").write_bytes(b"never synced")  # created (metadata: durable at once), data not synced
        done = crash(control)
        assert done["dropped"] == 5 + 12 and done["files"] == {"f": 5, "new": 12}, done
        assert (mnt / "f").read_bytes() == b"durable-"
        assert (mnt / "new").exists() and (mnt / "new").read_bytes() == b""
        assert crash(control)["dropped"] == 0  # nothing pending any more: the report says so


def test_a_truncate_waits_for_fsync_and_metadata_is_durable_at_once(tmp_path: Path) -> None:
    with lazyfs(tmp_path) as (backing, mnt, control):
        fd = os.open(mnt / "seg", os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"0123456789")
        os.fsync(fd)
        os.ftruncate(fd, 3)
        assert os.fstat(fd).st_size == 3 and os.pread(fd, 100, 0) == b"012"
        os.close(fd)
        os.mkdir(mnt / "d")
        (mnt / "d" / "tmp").write_bytes(b"meta")
        fd = os.open(mnt / "d" / "tmp", os.O_RDWR)
        os.fsync(fd)
        os.close(fd)
        os.rename(mnt / "d" / "tmp", mnt / "d" / "meta")
        dfd = os.open(mnt / "d", os.O_RDONLY)
        os.fsync(dfd)  # the store's fsync_dir
        os.close(dfd)
        crash(control)
        assert (mnt / "seg").read_bytes() == b"0123456789"  # the truncate was never fsynced
        assert sorted(os.listdir(mnt / "d")) == ["meta"] and (mnt / "d" / "meta").read_bytes() == b"meta"
        os.unlink(mnt / "seg")
        assert sorted(os.listdir(mnt)) == ["d"] and sorted(os.listdir(backing)) == ["d"]


def test_a_torn_crash_keeps_a_prefix_and_a_clean_unmount_keeps_everything(tmp_path: Path) -> None:
    with lazyfs(tmp_path) as (backing, mnt, control):
        fd = os.open(mnt / "log", os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"a" * 1000)
        torn = crash(control, seed=7)
        assert torn["dropped"] + torn["kept"] == 1000 and torn["torn_seed"] == 7, torn
        assert os.pread(fd, 2000, 0) == b"a" * torn["kept"]
        os.pwrite(fd, b"kept at unmount", 0)
        os.close(fd)
    assert (backing / "log").read_bytes()[:15] == b"kept at unmount"  # SIGTERM is a clean shutdown, not a crash


class _NoFsync:
    """The commit log's view of ``os`` with fsync taken away (the store-fsync-dropped fault, injected in the
    system under test: the store still publishes its synced offset as if the fsync had happened)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def fsync(fd: int) -> None:
        return None


def _append_then_crash(store: Path, control: str, n: int) -> tuple[int, int, int | None]:
    """Append ``n`` records under flush SYNC, crash the file system; (records appended, records recovered, synced
    offset the store had published before the crash)."""
    log = CommitLog.open(str(store), SYNC)
    log.recover(0)
    for i in range(n):
        log.append([Record("t", 0, b"%04d" % i * 25, key=f"k{i}", queue_offset=i)])
    published = read_synced_file(str(store))
    assert published == log.max_offset
    log.close(sync=False)  # a killed process: no last flush
    crash(control)
    again = CommitLog.open(str(store), SYNC)
    try:
        return n, again.recover(0).records_verified, published
    finally:
        again.close(sync=False)


def test_a_commit_log_on_lazyfs_keeps_every_fsynced_record_and_loses_them_without_fsync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with lazyfs(tmp_path) as (_, mnt, control):
        (mnt / "ok").mkdir()
        appended, recovered, _ = _append_then_crash(mnt / "ok", control, 50)
        assert recovered == appended == 50

        monkeypatch.setattr(commitlog_module, "os", _NoFsync())
        (mnt / "mutant").mkdir()
        appended, recovered, published = _append_then_crash(mnt / "mutant", control, 50)
        monkeypatch.undo()
        print(f"fsync taken away: {recovered} of {appended} records recovered after the crash; the store had "
              f"published synced offset {published}")
        assert published and published > 0  # the store claimed every byte durable ...
        assert recovered < appended  # ... and the crash took what it never fsynced
