"""EpochFileCache: reference EpochFileCacheTest scenarios (2.5), append rules, file format, .bak fallback."""

from __future__ import annotations

import os
import pathlib

import pytest

from system_under_test.broker.store import EpochEntry, EpochFileCache, EpochFileError, EpochRange
from system_under_test.broker.store.epoch_file import encode_epoch_text, parse_epoch_text


def three_epochs(path: str | None = None) -> EpochFileCache:
    cache = EpochFileCache(path)
    cache.append(1, 100)
    cache.append(2, 300)
    cache.append(3, 500)
    return cache


def test_init_from_file(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "epochFileCheckpoint")
    three_epochs(path)
    loaded = EpochFileCache.load(path)
    assert loaded.entries == (EpochEntry(1, 100), EpochEntry(2, 300), EpochEntry(3, 500))
    assert loaded.last_epoch == 3
    with open(path) as f:
        assert f.read().split("\n")[0] == "3"


def test_truncate_suffix_by_offset_150_keeps_epoch1_only() -> None:
    cache = three_epochs()
    cache.truncate_suffix_by_offset(150)
    assert cache.entries == (EpochEntry(1, 100),)
    assert cache.last_epoch == 1


def test_find_entry_by_offset_350_is_epoch2() -> None:
    cache = three_epochs()
    assert cache.find_entry_by_offset(350) == EpochRange(2, 300, 500)
    assert cache.find_entry_by_offset(99) is None
    assert cache.find_entry_by_offset(10**9) == EpochRange(3, 500, None)


def test_ranges_last_entry_end() -> None:
    cache = three_epochs()
    assert [r.end_offset for r in cache.ranges()] == [300, 500, None]
    assert [r.end_offset for r in cache.ranges(700)] == [300, 500, 700]


@pytest.mark.parametrize(
    "epoch,start,why",
    [(3, 600, "same epoch"), (2, 600, "older epoch"), (4, 500, "same start"), (4, 400, "older start")],
    ids=["same-epoch", "older-epoch", "same-start", "older-start"],
)
def test_append_requires_strict_increase(epoch: int, start: int, why: str) -> None:
    cache = three_epochs()
    with pytest.raises(EpochFileError, match=f"cannot append epoch entry {epoch}-{start} after 3-500"):
        cache.append(epoch, start)
    assert cache.last_epoch == 3


def test_append_identical_last_entry_is_noop() -> None:
    cache = three_epochs()
    cache.append(3, 500)
    assert len(cache.entries) == 3


def test_start_epoch_drops_empty_epoch() -> None:
    cache = three_epochs()
    cache.start_epoch(4, 500)  # epoch 3 wrote nothing
    assert cache.entries == (EpochEntry(1, 100), EpochEntry(2, 300), EpochEntry(4, 500))
    with pytest.raises(EpochFileError):
        cache.start_epoch(2, 900)


def test_truncate_prefix_removes_entries_ending_at_or_before() -> None:
    cache = three_epochs()
    cache.truncate_prefix_by_offset(300)
    assert cache.entries == (EpochEntry(2, 300), EpochEntry(3, 500))
    cache.truncate_prefix_by_offset(10**9)  # the last entry never ends
    assert cache.entries == (EpochEntry(3, 500),)


def test_remove_beyond_keeps_entry_starting_at_max() -> None:
    cache = three_epochs()
    cache.remove_beyond(500)
    assert cache.last_epoch == 3
    cache.remove_beyond(499)
    assert cache.last_epoch == 2


def test_file_format_and_crc() -> None:
    text = encode_epoch_text([EpochEntry(1, 100), EpochEntry(2, 300)])
    lines = text.split("\n")
    assert lines[0] == "2" and lines[2:4] == ["1-100", "2-300"]
    assert parse_epoch_text(text).entries == (EpochEntry(1, 100), EpochEntry(2, 300))
    with pytest.raises(EpochFileError, match="CRC mismatch"):
        parse_epoch_text(text.replace("2-300", "2-301"))
    with pytest.raises(EpochFileError, match="count line says 3"):
        parse_epoch_text("3" + text[1:])
    with pytest.raises(EpochFileError, match="strictly increase"):
        parse_epoch_text(encode_epoch_text([EpochEntry(2, 100), EpochEntry(1, 300)]))


@pytest.mark.parametrize("damage", ["garbage", "crc", "truncated", "missing"])
def test_bak_fallback(tmp_path: object, damage: str) -> None:
    path = os.path.join(str(tmp_path), "epochFileCheckpoint")
    cache = EpochFileCache(path)
    cache.append(1, 0)
    cache.append(2, 100)  # .bak now holds [1-0], the file [1-0, 2-100]
    cache.append(3, 200)  # .bak now holds [1-0, 2-100]
    if damage == "missing":
        os.unlink(path)
    else:
        raw = pathlib.Path(path).read_bytes()
        bad = {"garbage": b"\x00\xffjunk", "crc": raw.replace(b"3-200", b"3-201"), "truncated": raw[:-4]}[damage]
        with open(path, "wb") as f:
            f.write(bad)
    loaded = EpochFileCache.load(path)
    assert loaded.entries == (EpochEntry(1, 0), EpochEntry(2, 100))
    # the fallback is written back, so the next load reads the main file again
    assert EpochFileCache.load(path).entries == loaded.entries


def test_both_files_bad_raises(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "epochFileCheckpoint")
    three_epochs(path)
    for p in (path, path + ".bak"):
        with open(p, "wb") as f:
            f.write(b"nonsense")
    with pytest.raises(EpochFileError, match="backup too"):
        EpochFileCache.load(path)


def test_missing_files_give_empty_cache(tmp_path: object) -> None:
    cache = EpochFileCache.load(os.path.join(str(tmp_path), "nope"))
    assert cache.entries == () and cache.last_epoch == 0
