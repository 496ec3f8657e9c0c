"""The lazy file system's core against a plain reference: a file is its current bytes plus the bytes it had at
its last fsync, and the raw list of operations since then.  Reads always equal what was written; a crash brings
every file back to its last fsync, or (torn) to its last fsync plus a seeded prefix of the operations since."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis.lazyfs.core import Cache, PendingFile


class Bytes:
    """A Sink over a bytearray: what a real file does with pwrite and ftruncate."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = bytearray(data)

    def pwrite(self, offset: int, data: bytes) -> None:
        if not data:
            return  # writing nothing never extends a file
        if offset > len(self.data):
            self.data += bytes(offset - len(self.data))
        self.data[offset : offset + len(data)] = data

    def truncate(self, size: int) -> None:
        if size < len(self.data):
            del self.data[size:]
        else:
            self.data += bytes(size - len(self.data))

    def fetch(self, offset: int, n: int) -> bytes:
        return bytes(self.data[offset : offset + n])


@dataclass
class RefFile:
    current: Bytes = field(default_factory=Bytes)
    durable: bytes = b""
    log: list[tuple[str, int, bytes]] = field(default_factory=list)  # raw ops since the last fsync


def ref_apply(f: RefFile, op: tuple[str, int, bytes], sink: Bytes) -> None:
    kind, n, data = op
    if kind == "w":
        sink.pwrite(n, data)
    else:
        sink.truncate(n)


def ref_torn(f: RefFile, units: int) -> bytes:
    """The durable bytes plus the first ``units`` units of the raw log (a byte of data or a truncate each)."""
    out = Bytes(f.durable)
    for kind, n, data in f.log:
        if units <= 0:
            break
        if kind == "t":
            out.truncate(n)
            units -= 1
        else:
            take = min(len(data), units)
            if take:
                out.pwrite(n, data[:take])
            units -= take
    return bytes(out.data)


FILES = st.integers(0, 1)
OPS = st.one_of(  # small offsets and lengths, so writes, truncates and reads overlap often
    st.tuples(st.just("write"), FILES, st.integers(0, 40), st.binary(min_size=0, max_size=16)),
    st.tuples(st.just("append"), FILES, st.just(0), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("truncate"), FILES, st.integers(0, 48), st.just(b"")),
    st.tuples(st.just("fsync"), FILES, st.just(0), st.just(b"")),
    st.tuples(st.just("read"), FILES, st.integers(0, 50), st.integers(0, 60).map(lambda n: bytes(n))),
    st.tuples(st.just("crash"), st.just(0), st.integers(0, 2**16), st.sampled_from([b"", b"torn"])),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(OPS, max_size=60))
def test_reads_merge_and_a_crash_returns_each_file_to_its_last_fsync(ops: list[tuple[str, int, int, bytes]]) -> None:
    cache = Cache()
    durable = {k: Bytes() for k in range(3)}
    ref = {k: RefFile() for k in range(3)}
    for kind, key, n, data in ops:
        f, r = cache.of(key), ref[key]
        if kind == "append":
            kind, n = "write", len(r.current.data)
        if kind == "write":
            f.write(n, data)
            r.current.pwrite(n, data)
            if data:
                while r.log and r.log[-1][0] == "w" and n <= r.log[-1][1] \
                        and r.log[-1][1] + len(r.log[-1][2]) <= n + len(data):
                    r.log.pop()  # the core's documented rule: a write wholly covering the last pending one replaces it
                if r.log and r.log[-1][0] == "w" and r.log[-1][1] + len(r.log[-1][2]) == n:
                    # and its other rule: a write continuing the last pending one is merged into it, so a later
                    # write covering only the tail of the merged one does not replace a piece of it
                    _, start, before = r.log.pop()
                    r.log.append(("w", start, before + data))
                else:
                    r.log.append(("w", n, data))
        elif kind == "truncate":
            f.truncate(n)
            r.current.truncate(n)
            r.log.append(("t", n, b""))
        elif kind == "fsync":
            cache.flush(key, durable[key])
            r.durable, r.log = bytes(r.current.data), []
            assert bytes(durable[key].data) == r.durable
        elif kind == "read":
            got = f.read(n, len(data), len(durable[key].data), durable[key].fetch)
            assert got == bytes(r.current.data[n : n + len(data)])
        else:
            torn = data == b"torn"
            report = cache.crash(lambda k: durable[k], str, random.Random(n) if torn else None)
            check = random.Random(n)
            for k in range(3):
                rk = ref[k]
                pending_units = sum(len(d) if c == "w" else 1 for c, _, d in rk.log)
                if not rk.log:
                    assert str(k) not in report.dropped
                    expect = rk.durable
                else:
                    expect = ref_torn(rk, check.randint(0, pending_units)) if torn else rk.durable
                    written = sum(len(d) for c, _, d in rk.log if c == "w")
                    assert report.dropped[str(k)] + report.kept.get(str(k), 0) == written
                assert bytes(durable[k].data) == expect
                rk.durable, rk.log = expect, []
                rk.current = Bytes(expect)
        for k in range(3):  # the size and whole content readers see always match
            g = cache.get(k)
            size = g.size(len(durable[k].data)) if g else len(durable[k].data)
            assert size == len(ref[k].current.data)
            if g:
                assert g.read(0, size + 5, len(durable[k].data), durable[k].fetch) == bytes(ref[k].current.data)


def test_a_truncate_then_an_extension_reads_zeros_over_durable_bytes() -> None:
    d = Bytes(b"abcdef")
    f = PendingFile()
    f.truncate(2)
    f.write(8, b"z")
    assert f.read(0, 100, 6, d.fetch) == b"ab" + bytes(6) + b"z"
    f.flush(d)
    assert bytes(d.data) == b"ab" + bytes(6) + b"z"


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=40), st.lists(st.binary(min_size=1, max_size=40), max_size=10))
def test_appends_merge_into_one_operation(first: bytes, more: list[bytes]) -> None:
    f = PendingFile()
    f.write(0, first)
    pos = len(first)
    for chunk in more:
        f.write(pos, chunk)
        pos += len(chunk)
    assert len(f.ops) == 1 and f.pending_bytes == pos


def test_a_file_rewritten_in_place_keeps_one_pending_write() -> None:
    f = PendingFile()
    for i in range(1000):
        f.write(0, b"%020d\n" % i)
    assert len(f.ops) == 1 and f.read(0, 100, 0, lambda o, n: b"") == b"%020d\n" % 999


def test_a_crash_without_pending_writes_drops_nothing() -> None:
    cache = Cache()
    d = Bytes(b"durable")
    cache.of(1).write(7, b"-tail")
    assert cache.flush(1, d) == 5
    report = cache.crash(lambda k: d, str)
    assert report.dropped == {} and report.dropped_bytes == 0 and bytes(d.data) == b"durable-tail"


def test_negative_offsets_are_refused() -> None:
    with pytest.raises(ValueError):
        PendingFile().write(-1, b"x")
    with pytest.raises(ValueError):
        PendingFile().truncate(-1)
