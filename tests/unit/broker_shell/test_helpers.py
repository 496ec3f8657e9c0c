"""Pure helpers of the broker shell: SEND_MESSAGE body decoding and the consumer-offset table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.consumer_offsets import ConsumerOffsets
from system_under_test.broker.server import decode_send_body

GOOD = [
    ([b"a"], [(b"a", "", {})]),
    ([[b"a"]], [(b"a", "", {})]),
    ([[b"a", "k"], [b"b", "", {"TAGS": "x"}]], [(b"a", "k", {}), (b"b", "", {"TAGS": "x"})]),
]


@pytest.mark.parametrize(("body", "want"), GOOD, ids=["bare-bytes", "one-field", "key-and-props"])
def test_decode_send_body(body: Any, want: list[tuple[bytes, str, dict[str, str]]]) -> None:
    recs = decode_send_body("t", 3, body, 1234)
    assert [(r.body, r.key, dict(r.properties)) for r in recs] == want
    assert all(r.topic == "t" and r.queue_id == 3 and r.born_timestamp_ms == 1234 for r in recs)


BAD = [None, [], "x", [["str-body"]], [[b"a", 1]], [[b"a", "", []]], [[b"a", "", {}, "extra"]]]


@pytest.mark.parametrize("body", BAD, ids=[repr(b)[:30] for b in BAD])
def test_decode_send_body_rejects(body: Any) -> None:
    with pytest.raises(ValueError, match="SEND_MESSAGE"):
        decode_send_body("t", 0, body, 0)


def test_bad_topic_is_rejected_by_the_record() -> None:
    with pytest.raises(ValueError, match="topic"):
        decode_send_body("bad/topic", 0, [b"a"], 0)


def test_consumer_offsets_survive_reload(tmp_path: Path) -> None:
    t = ConsumerOffsets(str(tmp_path))
    assert t.get("g", "t", 0) is None
    t.commit("g", "t", 0, 5)
    t.commit("g", "t", 1, 7)
    t.commit("h", "t", 0, 1)
    t.commit("g", "t", 0, 9)
    again = ConsumerOffsets(str(tmp_path))
    assert (again.get("g", "t", 0), again.get("g", "t", 1), again.get("h", "t", 0)) == (9, 7, 1)
    with pytest.raises(ValueError, match=">= 0"):
        again.commit("g", "t", 0, -1)


def test_consumer_offsets_corrupt_file_starts_empty(tmp_path: Path) -> None:
    (tmp_path / "consumerOffset.json").write_text("{not json")
    assert ConsumerOffsets(str(tmp_path)).get("g", "t", 0) is None


_props = st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=3)
_items = st.lists(st.tuples(st.binary(max_size=64), st.text(max_size=8), _props), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(items=_items, queue_id=st.integers(0, 2**32 - 1))
def test_decode_send_body_keeps_every_field(items: list[tuple[bytes, str, dict[str, str]]], queue_id: int) -> None:
    recs = decode_send_body("topic", queue_id, [list(i) for i in items], 99)
    assert [(r.body, r.key, dict(r.properties)) for r in recs] == items
    assert {r.queue_id for r in recs} == {queue_id}


def test_consumer_offsets_concurrent_commits(tmp_path: Path) -> None:
    import concurrent.futures

    t = ConsumerOffsets(str(tmp_path))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: t.commit("g", "t", i % 4, i), range(64)))
    again = ConsumerOffsets(str(tmp_path))
    assert [again.get("g", "t", q) for q in range(4)] == [t.get("g", "t", q) for q in range(4)]
    assert all(again.get("g", "t", q) is not None for q in range(4))
