"""History writer: round trip through checker.history, dense indices, renumbering, crash prefix."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker.history import HistoryError, pair_ops, read_jsonl
from harness.history_writer import HistoryWriter


def fake_clock(step: int = 1000):  # type: ignore[no-untyped-def]
    c = itertools.count(0, step)
    return lambda: next(c)


def test_round_trip(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path / "h.jsonl", client_threads=2, clock_ns=fake_clock(), keep=True)
    w.append({"type": "invoke", "process": 0, "f": "send", "value": {"k": 1}, "node": "b1"})
    w.append({"type": "invoke", "process": "nemesis", "f": "start-partition", "value": None})
    w.append({"type": "ok", "process": 0, "f": "send", "value": {"k": 1, "offset": 3}, "latency_hint": 5})
    w.append({"type": "info", "process": "nemesis", "f": "start-partition", "value": {"c1": ["c2"]}})
    w.close()
    ops = read_jsonl(tmp_path / "h.jsonl")
    assert [o.index for o in ops] == [0, 1, 2, 3]
    assert [o.time for o in ops] == sorted(o.time for o in ops) and ops[0].time > 0
    assert ops[0].node == "b1" and ops[2].value == {"k": 1, "offset": 3} and ops[2].extra == {"latency_hint": 5}
    assert ops == w.ops
    assert [(i.index, c.index if c else None) for i, c in pair_ops(ops)] == [(0, 2)]
    assert w.counts == {"invoke": 2, "ok": 1, "fail": 0, "info": 1}


def test_process_renumbering_after_info(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path / "h.jsonl", client_threads=3)
    w.append({"type": "invoke", "process": 1, "f": "read"})
    info = w.append({"type": "info", "process": 1, "f": "read", "error": "timeout"})
    assert w.process_after(info) == 4
    w.append({"type": "invoke", "process": 4, "f": "read"})
    ok = w.append({"type": "ok", "process": 4, "f": "read", "value": 3})
    assert w.process_after(ok) == 4
    nem = w.append({"type": "invoke", "process": "nemesis", "f": "kill"})
    assert w.process_after({**nem, "type": "info"}) == "nemesis"
    w.close()
    assert read_jsonl(tmp_path / "h.jsonl")[1].error == "timeout"


@pytest.mark.parametrize("ops,match", [
    ([{"type": "ok", "process": 0, "f": "read"}], "no open invoke"),
    ([{"type": "invoke", "process": 0, "f": "read"}, {"type": "invoke", "process": 0, "f": "read"}], "still open"),
    ([{"type": "invoke", "process": 0, "f": "read"}, {"type": "ok", "process": 0, "f": "write"}], "does not match"),
    ([{"type": "done", "process": 0, "f": "read"}], "type must be"),
    ([{"type": "invoke", "process": "n1", "f": "read"}], "process must be"),
], ids=["orphan-completion", "double-invoke", "f-mismatch", "bad-type", "bad-process"])
def test_lifecycle_errors(tmp_path: Path, ops: list[dict[str, object]], match: str) -> None:
    w = HistoryWriter(tmp_path / "h.jsonl", client_threads=1)
    with pytest.raises(HistoryError, match=match):
        for op in ops:
            w.append(op)
    w.close()


def test_streamed_lines_survive_a_crash(tmp_path: Path) -> None:
    """Appends reach the kernel on flush (the interpreter flushes before every wait); a torn tail is
    ignored by the reader."""
    path = tmp_path / "h.jsonl"
    w = HistoryWriter(path, client_threads=1)
    w.append({"type": "invoke", "process": 0, "f": "read"})
    w.append({"type": "ok", "process": 0, "f": "read", "value": {1: float("nan")}})
    w.flush()
    assert len(path.read_text().splitlines()) == 2  # visible before close/sync
    assert json.loads(path.read_text().splitlines()[1])["value"] == {"1": None}  # always valid JSON
    with path.open("a") as fh:
        fh.write('{"index":2,"time":')  # a writer killed mid-line
    assert [o.index for o in read_jsonl(path)] == [0, 1]
    assert [o["f"] for o in w.open_invocations()] == []
    w.append({"type": "invoke", "process": 0, "f": "read"})
    assert [o["f"] for o in w.open_invocations()] == ["read"]
    w.close()
    with pytest.raises(HistoryError, match="closed"):
        w.append({"type": "ok", "process": 0, "f": "read"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["ok", "fail", "info"]), json_values,
                                st.sampled_from(["read", "write", "cas"])), max_size=40))
def test_hypothesis_round_trip(tmp_path: Path, steps: list[tuple[int, str, object, str]]) -> None:
    """Any lifecycle-respecting sequence written by the writer reads back identically."""
    path = tmp_path / "rt.jsonl"
    w = HistoryWriter(path, client_threads=4, clock_ns=fake_clock(7), keep=True)
    process = {t: t for t in range(4)}
    for thread, kind, value, f in steps:
        p = process[thread]
        w.append({"type": "invoke", "process": p, "f": f, "value": value})
        rec = w.append({"type": kind, "process": p, "f": f, "value": value, "error": "e" if kind != "ok" else None})
        process[thread] = w.process_after(rec)
    w.close()
    ops = read_jsonl(path)
    assert ops == w.ops
    assert [o.index for o in ops] == list(range(2 * len(steps)))
    assert all(c is not None and c.process == i.process for i, c in pair_ops(ops))
    info_procs = {o.process for o in ops if o.type == "info"}
    assert not any(o.type == "invoke" and o.process in info_procs and o.index > min(
        x.index for x in ops if x.type == "info" and x.process == o.process) for o in ops)
