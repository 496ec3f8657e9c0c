"""RaftStorage on real files: round trips, overwrites, segments, torn tails, corruption, snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from system_under_test.raft.storage import HARD_STATE_FILE, RaftStorage
from system_under_test.raft.types import Entry, EntryKind, HardState, Snapshot, StorageCorruption

VOTERS = ("n1", "n2", "n3")


def ents(first: int, last: int, term: int = 1) -> list[Entry]:
    return [Entry(term, i, f"v{i}".encode()) for i in range(first, last + 1)]


def opened(path: Path, **kw: int) -> RaftStorage:
    st = RaftStorage(path, **kw)
    st.load()
    return st


def reload(path: Path, **kw: int) -> tuple[HardState, Snapshot | None, list[Entry]]:
    return RaftStorage(path, **kw).load()


def segments(path: Path) -> list[Path]:
    return sorted((path / "log").glob("*.seg"))


def test_empty_directory_loads_defaults(tmp_path: Path) -> None:
    assert reload(tmp_path / "d") == (HardState(), None, [])


def test_write_before_load_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"load\(\) must be called"):
        RaftStorage(tmp_path).append(ents(1, 1))


def test_round_trip_entries_and_hard_state(tmp_path: Path) -> None:
    st = opened(tmp_path)
    written = [*ents(1, 5), Entry(2, 6, b"", EntryKind.NOOP)]
    st.append(written)
    st.sync()
    st.save_hard_state(HardState(2, "n3", 4))
    st.close()
    assert reload(tmp_path) == (HardState(2, "n3", 4), None, written)


def test_commit_only_hard_state_without_fsync_still_round_trips(tmp_path: Path) -> None:
    st = opened(tmp_path)
    st.save_hard_state(HardState(1, "n1", 0))
    st.save_hard_state(HardState(1, "n1", 3), sync=False)
    st.close()
    assert reload(tmp_path)[0] == HardState(1, "n1", 3)


@pytest.mark.parametrize("segment_bytes", [1 << 20, 64], ids=["one-segment", "many-segments"])
@pytest.mark.parametrize("overwrite_from", [1, 2, 7, 10])
def test_append_overwrites_the_suffix(tmp_path: Path, segment_bytes: int, overwrite_from: int) -> None:
    st = opened(tmp_path, segment_bytes=segment_bytes)
    st.append(ents(1, 10, term=1))
    st.append(ents(overwrite_from, overwrite_from + 1, term=2))
    st.sync()
    st.close()
    expected = ents(1, overwrite_from - 1, term=1) + ents(overwrite_from, overwrite_from + 1, term=2)
    assert reload(tmp_path, segment_bytes=segment_bytes)[2] == expected
    # the truncated segments are gone, not merely ignored
    for seg in segments(tmp_path):
        assert int(seg.stem) <= overwrite_from + 1


def test_segments_roll_at_the_size_limit(tmp_path: Path) -> None:
    st = opened(tmp_path, segment_bytes=100)
    for i in range(1, 41):
        st.append(ents(i, i))
    st.sync()
    st.close()
    segs = segments(tmp_path)
    assert len(segs) > 3
    assert all(p.stat().st_size < 100 + 40 for p in segs)
    assert [e.index for e in reload(tmp_path, segment_bytes=100)[2]] == list(range(1, 41))


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        pytest.param([Entry(1, 1), Entry(1, 3)], "contiguous", id="not-contiguous"),
        pytest.param([Entry(1, 5)], "gap", id="gap-after-last"),
    ],
)
def test_append_rejects_bad_batches(tmp_path: Path, entries: list[Entry], message: str) -> None:
    st = opened(tmp_path)
    st.append(ents(1, 2))
    with pytest.raises(ValueError, match=message):
        st.append(entries)


def test_torn_tail_at_every_byte_of_the_last_record(tmp_path: Path) -> None:
    src = tmp_path / "src"
    st = opened(src)
    st.append(ents(1, 3))
    st.sync()
    st.close()
    seg = segments(src)[0]
    full = seg.read_bytes()
    st = opened(tmp_path / "two")
    st.append(ents(1, 2))
    st.sync()
    st.close()
    last_start = segments(tmp_path / "two")[0].stat().st_size
    for cut in range(last_start + 1, len(full)):
        d = tmp_path / f"cut{cut}"
        (d / "log").mkdir(parents=True)
        (d / "log" / seg.name).write_bytes(full[:cut])
        st = RaftStorage(d)
        assert st.load()[2] == ents(1, 2), f"cut at byte {cut}"
        assert (d / "log" / seg.name).stat().st_size == last_start, "torn bytes must be truncated"
        st.append([Entry(2, 3, b"after")])  # the log continues cleanly after the truncation
        st.sync()
        st.close()
        assert reload(d)[2] == [*ents(1, 2), Entry(2, 3, b"after")]


def test_corruption_in_the_middle_names_file_and_offset(tmp_path: Path) -> None:
    st = opened(tmp_path)
    st.append(ents(1, 5))
    st.sync()
    st.close()
    seg = segments(tmp_path)[0]
    buf = bytearray(seg.read_bytes())
    rec = len(buf) // 5  # all records have the same size here
    buf[2 * rec + 14] ^= 0xFF  # payload of the third record
    seg.write_bytes(bytes(buf))
    with pytest.raises(StorageCorruption, match=rf"{seg.name}: CRC mismatch .* at byte offset {2 * rec} "):
        reload(tmp_path)


def test_bad_final_record_of_an_older_segment_is_corruption(tmp_path: Path) -> None:
    st = opened(tmp_path, segment_bytes=60)
    st.append(ents(1, 9))
    st.sync()
    st.close()
    first = segments(tmp_path)[0]
    assert len(segments(tmp_path)) > 1
    buf = bytearray(first.read_bytes())
    buf[-1] ^= 0xFF
    first.write_bytes(bytes(buf))
    with pytest.raises(StorageCorruption, match=first.name):
        reload(tmp_path, segment_bytes=60)


def test_corrupt_hard_state_is_corruption(tmp_path: Path) -> None:
    st = opened(tmp_path)
    st.save_hard_state(HardState(3, "n1", 0))
    st.close()
    path = tmp_path / HARD_STATE_FILE
    buf = bytearray(path.read_bytes())
    buf[-1] ^= 0x01
    path.write_bytes(bytes(buf))
    with pytest.raises(StorageCorruption, match=HARD_STATE_FILE):
        reload(tmp_path)


def test_compaction_deletes_whole_segments_below_the_snapshot(tmp_path: Path) -> None:
    st = opened(tmp_path, segment_bytes=60)
    st.append(ents(1, 30))
    st.sync()
    before = len(segments(tmp_path))
    snap = Snapshot(20, 1, b"state@20", VOTERS)
    st.save_snapshot(snap)
    with pytest.raises(ValueError, match="beyond the durable snapshot"):
        st.compact(21)
    removed = st.compact(20)
    st.close()
    assert removed > 0 and len(segments(tmp_path)) == before - removed
    assert min(int(p.stem) for p in segments(tmp_path)) <= 21  # entry 21 survives
    hs, loaded, entries = reload(tmp_path, segment_bytes=60)
    assert loaded == snap
    assert entries == ents(21, 30)
    assert hs.commit == 20  # a snapshot is committed state


def test_snapshot_that_conflicts_with_the_log_discards_it(tmp_path: Path) -> None:
    st = opened(tmp_path)
    st.append(ents(1, 8, term=1))
    st.sync()
    st.save_snapshot(Snapshot(5, 3, b"leader's state", VOTERS))  # term 3 at index 5: our log diverged
    with pytest.raises(ValueError, match="below the snapshot"):
        st.append(ents(5, 5, term=3))
    st.append(ents(6, 7, term=3))
    st.sync()
    st.close()
    _, snap, entries = reload(tmp_path)
    assert snap is not None and snap.index == 5
    assert entries == ents(6, 7, term=3)


def test_snapshot_beyond_the_log_then_appends(tmp_path: Path) -> None:
    st = opened(tmp_path)
    st.append(ents(1, 3))
    st.sync()
    st.save_snapshot(Snapshot(100, 4, b"s", VOTERS))
    assert st.last_index == 100
    st.append(ents(101, 102, term=4))
    st.sync()
    st.close()
    assert reload(tmp_path)[2] == ents(101, 102, term=4)


def test_interrupted_snapshot_install_is_finished_on_load(tmp_path: Path) -> None:
    # crash after the snapshot file was written but before the conflicting log was discarded
    st = opened(tmp_path)
    st.append(ents(1, 8, term=1))
    st.sync()
    st.close()
    other = opened(tmp_path / "other")
    other.save_snapshot(Snapshot(5, 3, b"x", VOTERS))
    other.close()
    (tmp_path / "snapshot").write_bytes((tmp_path / "other" / "snapshot").read_bytes())
    _, snap, entries = reload(tmp_path)
    assert snap is not None and snap.term == 3 and entries == []


def test_restart_many_times_keeps_appending(tmp_path: Path) -> None:
    for round_ in range(5):
        st = opened(tmp_path, segment_bytes=80)
        st.append(ents(round_ * 4 + 1, round_ * 4 + 4, term=round_ + 1))
        st.sync()
        st.save_hard_state(HardState(round_ + 1, "n1", round_ * 4))
        st.close()
    hs, _, entries = reload(tmp_path, segment_bytes=80)
    assert hs == HardState(5, "n1", 16)
    assert [e.index for e in entries] == list(range(1, 21))
    assert [e.term for e in entries] == [i // 4 + 1 for i in range(20)]


def test_load_twice_on_one_object_starts_over(tmp_path: Path) -> None:
    st = opened(tmp_path, segment_bytes=64)
    st.append(ents(1, 6))
    st.sync()
    assert st.load()[2] == ents(1, 6)  # e.g. a RaftNode restarted in place
    st.append(ents(7, 8))
    st.sync()
    st.close()
    assert reload(tmp_path, segment_bytes=64)[2] == ents(1, 8)
