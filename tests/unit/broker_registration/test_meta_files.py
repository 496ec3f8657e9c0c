"""Meta file format and the atomic writer: an interrupted write leaves the old or the new file, whole."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.registration.errors import MetaCorruptError
from system_under_test.broker.registration.meta_files import (
    META_NAME,
    TEMP_NAME,
    MetaFiles,
    atomic_write,
    commit_atomic,
    prepare_atomic,
)
from system_under_test.broker.registration.meta_record import (
    MetaRecord,
    TempMetaRecord,
    decode_meta,
    decode_temp_meta,
    encode_meta,
    encode_temp_meta,
)

OLD = MetaRecord("c1", "b1", 1)
NEW = MetaRecord("c1", "b1", 7)
TEMP = TempMetaRecord("c1", "b1", 7, "10.0.0.1:10911;1700000000000;00000000deadbeef")


def test_round_trip() -> None:
    assert decode_meta(encode_meta(OLD)) == OLD
    assert decode_temp_meta(encode_temp_meta(TEMP)) == TEMP
    assert TEMP.to_meta() == NEW


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cluster": "", "broker_name": "b", "broker_id": 1}, "cluster"),
        ({"cluster": "c", "broker_name": "b\n", "broker_id": 1}, "broker_name"),
        ({"cluster": "c", "broker_name": "b", "broker_id": 0}, "broker_id"),
        ({"cluster": "c", "broker_name": "b", "broker_id": True}, "broker_id"),
    ],
)
def test_records_validate_fields(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        MetaRecord(**kwargs)  # type: ignore[arg-type]


def test_every_truncation_is_detected_as_corrupt() -> None:
    data = encode_meta(OLD)
    for n in range(len(data)):
        with pytest.raises(MetaCorruptError, match=r"/store/\.broker\.meta"):
            decode_meta(data[:n], where="/store/.broker.meta")


def test_every_single_byte_flip_is_detected_or_harmless() -> None:
    data = encode_meta(OLD)
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x01
        try:
            got = decode_meta(bytes(flipped))
        except MetaCorruptError:
            continue
        # A flip that still decodes (e.g. hex case in the crc) must decode to the same record.
        assert got == OLD


def test_temp_decoder_rejects_a_meta_file_and_vice_versa() -> None:
    with pytest.raises(MetaCorruptError, match="register_code"):
        decode_temp_meta(encode_meta(OLD))
    with pytest.raises(MetaCorruptError, match="expected keys"):
        decode_meta(encode_temp_meta(TEMP))


def test_load_absent_is_none_and_corrupt_names_the_path(tmp_path: Path) -> None:
    files = MetaFiles(tmp_path)
    assert files.load_meta() is None and files.load_temp() is None
    (tmp_path / META_NAME).write_bytes(b'{"cluster":"c1"')
    with pytest.raises(MetaCorruptError) as info:
        files.load_meta()
    assert str(tmp_path / META_NAME) in str(info.value)
    assert "will not invent a new id" in str(info.value)


def test_promote_writes_meta_and_deletes_temp(tmp_path: Path) -> None:
    files = MetaFiles(tmp_path)
    files.write_temp(TEMP)
    assert files.load_temp() == TEMP
    files.promote(TEMP)
    assert files.load_meta() == NEW
    assert not (tmp_path / TEMP_NAME).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [META_NAME]


def test_interrupted_atomic_write_keeps_the_old_file(tmp_path: Path) -> None:
    """Simulate a crash at every byte of the new content and between every step of the writer."""
    path = tmp_path / META_NAME
    atomic_write(path, encode_meta(OLD))
    new = encode_meta(NEW)
    tmp = path.with_name(path.name + ".tmp")
    for n in range(len(new) + 1):
        tmp.write_bytes(new[:n])  # crash while writing the tmp file (or right after its fsync)
        assert MetaFiles(tmp_path).load_meta() == OLD
    prepared = prepare_atomic(path, new)  # crash after fsync, before rename
    assert MetaFiles(tmp_path).load_meta() == OLD
    commit_atomic(prepared, path)  # rename done: the new file, whole
    assert MetaFiles(tmp_path).load_meta() == NEW
    assert not tmp.exists()


@settings(max_examples=40, deadline=None)
@given(
    ids=st.lists(st.integers(min_value=1, max_value=10**12), min_size=1, max_size=5),
    crash_step=st.integers(min_value=0, max_value=3),
    cut=st.integers(min_value=0, max_value=200),
)
def test_atomic_writer_leaves_old_or_new_complete(ids: list[int], crash_step: int, cut: int) -> None:
    """Writes of successive records; the last one is interrupted at ``crash_step``: the file is old or new."""
    with tempfile.TemporaryDirectory() as d:
        store = Path(d)
        path = store / META_NAME
        files = MetaFiles(store)
        previous: MetaRecord | None = None
        for broker_id in ids[:-1]:
            previous = MetaRecord("c1", "b1", broker_id)
            files.write_meta(previous)
        last = MetaRecord("c1", "b1", ids[-1])
        data = encode_meta(last)
        tmp = path.with_name(path.name + ".tmp")
        if crash_step == 0:  # torn tmp file
            tmp.write_bytes(data[: cut % (len(data) + 1)])
        elif crash_step == 1:  # tmp complete and fsynced, no rename
            prepare_atomic(path, data)
        elif crash_step == 2:  # renamed, directory not yet fsynced (same visible state as done)
            prepared = prepare_atomic(path, data)
            path.unlink(missing_ok=True)
            prepared.rename(path)
        else:
            files.write_meta(last)
        got = files.load_meta()
        assert got in (previous, last)
        if crash_step >= 2:
            assert got == last


def test_bug_non_atomic_meta_leaves_a_torn_file_on_crash(tmp_path: Path) -> None:
    """The deliberate bug: a crash between the two in-place halves leaves a file the next start refuses."""
    buggy = MetaFiles(tmp_path, bug_non_atomic_meta=True)
    buggy.write_meta(OLD)
    assert buggy.load_meta() == OLD  # without a crash the bug is invisible
    buggy.prepare_meta(NEW)  # crash here
    with pytest.raises(MetaCorruptError):
        MetaFiles(tmp_path).load_meta()
    # The correct writer never shows a torn file at the same point.
    good = MetaFiles(tmp_path)
    good.write_meta(OLD)
    good.prepare_meta(NEW)
    assert good.load_meta() == OLD
