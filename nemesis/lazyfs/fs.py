"""The lazy file system's FUSE shell: a passthrough over a backing directory whose file data waits in memory
(:mod:`nemesis.lazyfs.core`) until the file is fsynced.

``python -m nemesis.lazyfs mount BACKING MOUNTPOINT --control SOCKET`` mounts it (foreground; SIGTERM or SIGINT
flushes what is pending -- a clean shutdown, not a crash -- and unmounts); ``python -m nemesis.lazyfs crash
--control SOCKET`` drops every write not yet fsynced and prints what it dropped as JSON (``{"dropped": bytes,
"files": {path: bytes}, ...}``; ``--torn --seed N`` keeps a seeded prefix of each file's pending writes);
``status`` prints what is pending.

How it keeps the kernel honest: every file is opened with ``direct_io`` (no page cache of its own, so a read
after a crash sees the dropped bytes gone and every write reaches us) and attributes and names are never cached
(timeouts 0, so sizes come from here each time).  What it does at once, durably, on the backing directory:
create, mkdir, unlink, rmdir, rename, chmod, chown, utimes (the core's docstring says why this is the known
simplification).  Not supported (ENOSYS): links, symlinks, device nodes, xattrs -- a broker's store uses none.

One trio task loop, and every handler is synchronous (no await inside), so each request runs alone; an fsync
blocks the loop while the backing file is fsynced, as a disk queue would.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import signal
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyfuse3
import trio

from nemesis.lazyfs.core import Cache, PendingFile

__all__ = ["LazyOps", "control_request", "serve"]

log = logging.getLogger("splitbrain.lazyfs")

_MAX_SOCKET_PATH = 107


class _FdSink:
    """The durable side of one file: its backing file descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def pwrite(self, offset: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, offset)
            view, offset = view[n:], offset + n

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)


@dataclass
class _Open:
    fd: int
    refs: int


class LazyOps(pyfuse3.Operations):
    """The pyfuse3 operations (module docstring).  Inode numbers are ours, one per backing (device, inode)."""

    def __init__(self, backing: str) -> None:
        super().__init__()
        self.backing = os.path.abspath(backing)
        self.cache = Cache()
        self._path: dict[int, str] = {pyfuse3.ROOT_INODE: self.backing}
        self._by_key: dict[tuple[int, int], int] = {}
        st = os.lstat(self.backing)
        self._by_key[(st.st_dev, st.st_ino)] = pyfuse3.ROOT_INODE
        self._next_ino = pyfuse3.ROOT_INODE + 1
        self._open: dict[int, _Open] = {}  # inode -> one read-write fd shared by every handle
        self._fh: dict[int, int] = {}  # file handle -> inode
        self._next_fh = 1
        self.stats = {"writes": 0, "bytes_written": 0, "fsyncs": 0, "bytes_flushed": 0, "crashes": 0}

    # -- names ----------------------------------------------------------------------------------------------
    def path_of(self, inode: int) -> str:
        try:
            return self._path[inode]
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    def _child(self, parent: int, name: bytes) -> str:
        return os.path.join(self.path_of(parent), os.fsdecode(name))

    def _inode_for(self, path: str, st: os.stat_result) -> int:
        key = (st.st_dev, st.st_ino)
        ino = self._by_key.get(key)
        if ino is None:
            ino = self._next_ino
            self._next_ino += 1
            self._by_key[key] = ino
        self._path[ino] = path
        return ino

    def _drop_inode(self, path: str) -> None:
        """``path`` is about to disappear (unlink, rmdir, replaced by a rename): forget its inode and data."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        ino = self._by_key.pop((st.st_dev, st.st_ino), None)
        if ino is not None:
            self.cache.forget(ino)
            self._path.pop(ino, None)

    def _attr(self, inode: int, path: str | None = None) -> pyfuse3.EntryAttributes:
        path = path or self.path_of(inode)
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        a = pyfuse3.EntryAttributes()
        a.st_ino = inode
        a.generation = 0
        a.entry_timeout = 0
        a.attr_timeout = 0
        a.st_mode, a.st_nlink, a.st_uid, a.st_gid, a.st_rdev = st.st_mode, st.st_nlink, st.st_uid, st.st_gid, 0
        pending = self.cache.get(inode)
        a.st_size = pending.size(st.st_size) if pending else st.st_size
        a.st_blksize = 4096
        a.st_blocks = (a.st_size + 511) // 512
        a.st_atime_ns, a.st_mtime_ns, a.st_ctime_ns = st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns
        return a

    def _entry(self, path: str) -> pyfuse3.EntryAttributes:
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        return self._attr(self._inode_for(path, st), path)

    # -- metadata (durable at once) -------------------------------------------------------------------------
    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        if name == b".":
            return self._attr(parent_inode)
        if name == b"..":
            return self._entry(os.path.dirname(self.path_of(parent_inode)))
        return self._entry(self._child(parent_inode, name))

    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return self._attr(inode)

    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes, fields: Any, fh: int | None,
                      ctx: Any) -> pyfuse3.EntryAttributes:
        path = self.path_of(inode)
        try:
            if fields.update_size:
                self.cache.of(inode).truncate(attr.st_size)  # data, not metadata: waits for fsync like a write
            if fields.update_mode:
                os.chmod(path, stat.S_IMODE(attr.st_mode))
            if fields.update_uid or fields.update_gid:
                os.chown(path, attr.st_uid if fields.update_uid else -1, attr.st_gid if fields.update_gid else -1,
                         follow_symlinks=False)
            if fields.update_atime or fields.update_mtime:
                st = os.lstat(path)
                os.utime(path, ns=(attr.st_atime_ns if fields.update_atime else st.st_atime_ns,
                                   attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns))
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        return self._attr(inode)

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name)
        try:
            os.mkdir(path, mode)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        return self._entry(path)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        path = self._child(parent_inode, name)
        try:
            st = os.lstat(path)
            os.rmdir(path)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        ino = self._by_key.pop((st.st_dev, st.st_ino), None)
        if ino is not None:
            self._path.pop(ino, None)

    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        path = self._child(parent_inode, name)
        if not os.path.lexists(path):
            raise pyfuse3.FUSEError(errno.ENOENT)
        self._drop_inode(path)
        try:
            os.unlink(path)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None

    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int, name_new: bytes,
                     flags: int, ctx: Any) -> None:
        if flags:
            raise pyfuse3.FUSEError(errno.EINVAL)  # RENAME_NOREPLACE / RENAME_EXCHANGE: not needed by a store
        old, new = self._child(parent_inode_old, name_old), self._child(parent_inode_new, name_new)
        try:
            st = os.lstat(old)
            if os.path.lexists(new) and not os.path.samefile(old, new):
                self._drop_inode(new)
            os.rename(old, new)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        ino = self._by_key.get((st.st_dev, st.st_ino))
        if ino is not None:
            self._path[ino] = new
        if stat.S_ISDIR(st.st_mode):
            prefix = old + os.sep
            for i, p in list(self._path.items()):
                if p.startswith(prefix):
                    self._path[i] = new + p[len(old):]

    async def opendir(self, inode: int, ctx: Any) -> int:
        self.path_of(inode)
        return inode

    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        path = self.path_of(fh)
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        for i, name in enumerate(names[start_id:], start=start_id):
            try:
                attr = self._entry(os.path.join(path, name))
            except pyfuse3.FUSEError:
                continue  # vanished meanwhile
            if not pyfuse3.readdir_reply(token, os.fsencode(name), attr, i + 1):
                break

    async def releasedir(self, fh: int) -> None:
        return None

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        return None  # names are durable at once (module docstring)

    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        sv = os.statvfs(self.backing)
        out = pyfuse3.StatvfsData()
        for f in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail",
                  "f_namemax"):
            setattr(out, f, getattr(sv, f))
        return out

    # -- data (lazy) ----------------------------------------------------------------------------------------
    def _hold(self, inode: int, path: str) -> int:
        o = self._open.get(inode)
        if o is None:
            try:
                fd = os.open(path, os.O_RDWR)
            except OSError as exc:
                raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
            o = self._open[inode] = _Open(fd, 0)
        o.refs += 1
        fh = self._next_fh
        self._next_fh += 1
        self._fh[fh] = inode
        return fh

    def _info(self, fh: int) -> pyfuse3.FileInfo:
        fi = pyfuse3.FileInfo(fh=fh)
        fi.direct_io = True
        fi.keep_cache = False
        return fi

    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        path = self.path_of(inode)
        fh = self._hold(inode, path)
        if flags & os.O_TRUNC:
            self.cache.of(inode).truncate(0)
        return self._info(fh)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: Any) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        path = self._child(parent_inode, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | (flags & os.O_EXCL), mode)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        os.close(fd)
        attr = self._entry(path)
        fh = self._hold(attr.st_ino, path)
        if flags & os.O_TRUNC:
            self.cache.of(attr.st_ino).truncate(0)
            attr = self._attr(attr.st_ino, path)
        return self._info(fh), attr

    def _fd(self, fh: int) -> tuple[int, int]:
        try:
            inode = self._fh[fh]
        except KeyError:
            raise pyfuse3.FUSEError(errno.EBADF) from None
        return inode, self._open[inode].fd

    async def read(self, fh: int, off: int, size: int) -> bytes:
        inode, fd = self._fd(fh)
        durable = os.fstat(fd).st_size
        pending = self.cache.get(inode)
        if pending is None:
            return os.pread(fd, size, off)
        return pending.read(off, size, durable, lambda o, n: os.pread(fd, n, o))

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        inode, _ = self._fd(fh)
        self.cache.of(inode).write(off, bytes(buf))
        self.stats["writes"] += 1
        self.stats["bytes_written"] += len(buf)
        return len(buf)

    async def flush(self, fh: int) -> None:
        return None  # close(2) does not make data durable

    async def release(self, fh: int) -> None:
        inode = self._fh.pop(fh, None)
        if inode is None:
            return
        o = self._open.get(inode)
        if o is not None:
            o.refs -= 1
            if o.refs <= 0:
                os.close(o.fd)
                del self._open[inode]

    async def fsync(self, fh: int, datasync: bool) -> None:
        inode, fd = self._fd(fh)
        try:
            self.stats["bytes_flushed"] += self.cache.flush(inode, _FdSink(fd))
            (os.fdatasync if datasync else os.fsync)(fd)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        self.stats["fsyncs"] += 1

    # -- control --------------------------------------------------------------------------------------------
    def _rel(self, inode: int) -> str:
        p = self._path.get(inode)
        return os.path.relpath(p, self.backing) if p else f"<inode {inode}>"

    def _with_sink(self, inode: int, act: Callable[[_FdSink], Any]) -> Any:
        o = self._open.get(inode)
        if o is not None:
            return act(_FdSink(o.fd))
        fd = os.open(self.path_of(inode), os.O_RDWR)
        try:
            return act(_FdSink(fd))
        finally:
            os.close(fd)

    def crash(self, seed: int | None = None) -> dict[str, Any]:
        """Drop every write not yet fsynced (``seed``: a torn crash keeping a seeded prefix of each file's)."""
        rng = random.Random(seed) if seed is not None else None
        sinks: dict[int, Any] = {}

        class _Deferred:
            """Keeps a torn crash's prefix writes until the backing file is open (only torn crashes write)."""

            def __init__(self, ops: LazyOps, inode: int) -> None:
                self.ops, self.inode = ops, inode

            def pwrite(self, offset: int, data: bytes) -> None:
                self.ops._with_sink(self.inode, lambda s: s.pwrite(offset, data))

            def truncate(self, size: int) -> None:
                self.ops._with_sink(self.inode, lambda s: s.truncate(size))

        report = self.cache.crash(lambda i: sinks.setdefault(i, _Deferred(self, i)), self._rel, rng)
        if seed is not None:
            for inode in sinks:
                self._with_sink(inode, lambda s: os.fsync(s.fd))
        self.stats["crashes"] += 1
        out = report.as_json()
        out["torn_seed"] = seed
        log.info("crash: %s", out)
        return out

    def flush_all(self) -> int:
        """A clean shutdown: everything pending becomes durable (not a crash)."""
        total = 0
        for inode in list(self.cache.files):
            pf: PendingFile = self.cache.files.pop(inode)

            def durable(sink: _FdSink, pf: PendingFile = pf) -> int:
                n = pf.flush(sink)
                os.fsync(sink.fd)
                return n

            try:
                total += self._with_sink(inode, durable)
            except (OSError, pyfuse3.FUSEError) as exc:  # unlinked meanwhile: nothing to keep
                log.warning("flush of %s at shutdown failed: %s", self._rel(inode), exc)
        return total

    def status(self) -> dict[str, Any]:
        pending = {self._rel(i): n for i, n in self.cache.pending().items()}
        return {"pending": sum(pending.values()), "files": dict(sorted(pending.items())), **self.stats,
                "open_files": len(self._open)}


async def _control(ops: LazyOps, control: str, ready: Callable[[], None]) -> None:
    """Answer one JSON line per connection: {"cmd": "status"|"crash", "seed": N?} -> one JSON line."""
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    if os.path.exists(control):
        os.unlink(control)
    await sock.bind(control)
    sock.listen(8)
    listener = trio.SocketListener(sock)
    ready()

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                buf += chunk
            try:
                req = json.loads(buf)
                cmd = req.get("cmd")
                if cmd == "status":
                    out: dict[str, Any] = {"ok": True, **ops.status()}
                elif cmd == "crash":
                    seed = req.get("seed")
                    out = {"ok": True, **ops.crash(int(seed) if seed is not None else None)}
                else:
                    out = {"ok": False, "error": f"unknown command {cmd!r}; known: status, crash"}
            except Exception as exc:
                out = {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"}
            await stream.send_all(json.dumps(out, sort_keys=True).encode() + b"\n")

    await trio.serve_listeners(handle, [listener])


def serve(backing: str, mountpoint: str, control: str, *, debug: bool = False) -> int:
    """Mount, serve until SIGTERM/SIGINT, flush what is pending, unmount.  Returns the exit code."""
    if len(os.fsencode(control)) > _MAX_SOCKET_PATH:
        raise ValueError(f"--control {control}: a unix socket path must be at most {_MAX_SOCKET_PATH} bytes")
    ops = LazyOps(backing)
    options = set(pyfuse3.default_options)
    options.add("fsname=lazyfs")
    if debug:
        options.add("debug")
    pyfuse3.init(ops, mountpoint, options)
    flushed = 0
    try:
        async def main() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pyfuse3.main)

                async def answer() -> None:
                    await _control(ops, control, lambda: log.info("lazyfs: %s on %s, control %s", backing,
                                                                   mountpoint, control))
                nursery.start_soon(answer)
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        break
                pyfuse3.terminate()  # pyfuse3.main returns once its workers are done
                nursery.cancel_scope.cancel()

        trio.run(main)
    finally:
        try:
            flushed = ops.flush_all()
        finally:
            pyfuse3.close(unmount=True)
            if os.path.exists(control):
                os.unlink(control)
    log.info("lazyfs: unmounted %s (flushed %d pending bytes)", mountpoint, flushed)
    return 0


def control_request(control: str, request: dict[str, Any], timeout_s: float = 10.0) -> dict[str, Any]:
    """Send one request to a mounted lazyfs's control socket and return its answer (blocking)."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(control)
        s.sendall(json.dumps(request).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    out: dict[str, Any] = json.loads(buf)
    return out
