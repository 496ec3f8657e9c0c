"""The fast history.jsonl reader against the reference reader: the same ops, the same errors, on any file.

The reference (``Path.read_text`` then ``parse_history``) is the oracle; ``read_history`` is what ``splitbrain
check`` runs (the fast reader where it answers, the reference where it abstains).  Files are drawn as lines
of every kind the two might disagree on: plain ops, unknown keys (``extra`` and the fast reader's own wire name
for it included), fields of other types, JSON msgspec is stricter about, blank and torn lines, carriage
returns, two objects on a line, one object over two lines, bytes that are not UTF-8.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker.cli import configure, run
from checker.history import EXTRA_WIRE_NAME, HistoryError, write_jsonl
from checker.linearizable.gen import kv_history, register_history
from checker.readers import parse_history, read_history, read_jsonl_fast

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=8)
_ODD_FIELD = st.sampled_from([
    ("index", 1.0), ("index", 1.5), ("index", "7"), ("index", True), ("time", -3), ("time", 2**80),
    ("process", True), ("process", 1.0), ("process", "nemesis"), ("process", "p1"), ("process", None),
    ("type", "done"), ("type", 3), ("f", 5), ("f", None), ("node", 5), ("node", "n1"), ("error", {"e": [1]}),
    ("extra", {"k": 1}), ("extra", 3), (EXTRA_WIRE_NAME, {"k": 1}), ("line", 9), ("value", None),
])
RAW_LINES = [
    "", "   ", "\t", "\x0c", "\x1c", "not json", "[1, 2]", "null", '{"index": 0}', "{",
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r","value":NaN}',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r","value":Infinity}',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r","value":1e400}',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r","value":"\\ud800"}',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r"} {"index":1,"time":0,"type":"ok","process":1,"f":"r"}',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r"},{"index":1,"time":0,"type":"ok","process":1,"f":"r"}',
    '{"index":0,"time":0,',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r","' + EXTRA_WIRE_NAME[:-1] + '\\u0061":{"k":1}}',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r","\\u007f' + EXTRA_WIRE_NAME[1:] + '":{"k":1}}',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r","' + EXTRA_WIRE_NAME + '":{}}',
    '{"index":0,"time":0,\r"type":"ok","process":1,"f":"r"}',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r"}\r{"index":1,"time":0,"type":"ok","process":1,"f":"r"}',
    '"type":"ok","process":1,"f":"r"}',
    '{"index":0,"index":4,"time":0,"type":"ok","process":1,"f":"r","value":{"a":1,"a":2}}',
    '  {"index":0,"time":0,"type":"ok","process":1,"f":"r"}\t',
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r","value":' + "[" * 300 + "]" * 300 + "}",
    '{"index":0,"time":0,"type":"ok","process":1,"f":"r","value":"caf\u00e9 \u2028"}',
    '\u00a0{"index":0,"time":0,"type":"ok","process":1,"f":"r"}',
    "INFO  jepsen.util - 0\t:invoke\t:read\tnil",
]
_RAW_LINES = st.sampled_from(RAW_LINES)
_OP = '{"index":%d,"time":0,"type":"ok","process":1,"f":"r"}'


@st.composite
def _op_line(draw: st.DrawFn) -> str:
    d: dict[str, Any] = {"index": draw(st.integers(0, 10**6)), "time": draw(st.integers(0, 10**12)),
                         "type": draw(st.sampled_from(["invoke", "ok", "fail", "info"])),
                         "process": draw(st.one_of(st.integers(-5, 50), st.just("nemesis"))),
                         "f": draw(st.sampled_from(["read", "write", "cas", "get", "append"]))}
    if draw(st.booleans()):
        d["value"] = draw(_VALUES)
    if draw(st.integers(0, 3)) == 0:
        d["error"] = draw(_VALUES)
    for key, value in draw(st.lists(_ODD_FIELD, max_size=2)):
        d[key] = value
    keys = list(d)
    draw(st.randoms(use_true_random=False)).shuffle(keys)
    return json.dumps({k: d[k] for k in keys}, ensure_ascii=draw(st.booleans()),
                      separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))


@st.composite
def _file(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.one_of(_op_line(), _op_line(), _op_line(), _RAW_LINES), max_size=8))
    end = draw(st.sampled_from(["\n", "\n", "\r\n", "\n\n", ""]))
    body = "\n".join(lines) + end
    if draw(st.integers(0, 7)) == 0:
        body = draw(st.sampled_from(["\n", " ", "\ufeff", "\r\n"])) + body
    data = body.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0 and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + data[at:]
    return data


def _reference(path: Path, fmt: str | None = None) -> tuple[str, Any]:
    """What the reference reader gives: ("ok", (format, ops)) or ("error", its type and message)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return "error", f"{path}: cannot read history file: {exc}"
    try:
        got_fmt, ops = parse_history(text, fmt=fmt, where=f"{path}: ")
    except (HistoryError, RecursionError) as exc:
        return "error", f"{type(exc).__name__}: {exc}"
    return "ok", (got_fmt, tuple(ops))


def _read(path: Path, fmt: str | None = None) -> tuple[str, Any]:
    try:
        hist = read_history(path, fmt=fmt)
    except HistoryError as exc:
        message = str(exc)
        return "error", message if "cannot read history file" in message else f"HistoryError: {message}"
    except RecursionError as exc:
        return "error", f"RecursionError: {exc}"
    return "ok", (hist.format, hist.ops)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_file(), named=st.booleans())
def test_read_history_gives_the_reference_ops_and_errors(tmp_path: Path, data: bytes, named: bool) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(data)
    fmt = "jsonl" if named else None
    assert _read(path, fmt) == _reference(path, fmt)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_op_line(), min_size=1, max_size=8))
def test_the_fast_reader_answers_exactly_or_abstains(tmp_path: Path, lines: list[str]) -> None:
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "history.jsonl"
    path.write_bytes(data)
    fast = read_jsonl_fast(data)
    if fast is not None:
        assert _reference(path) == ("ok", ("jsonl", tuple(fast)))


@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["kv", "register"]))
@settings(max_examples=20, deadline=None)
def test_recorded_histories_take_the_fast_reader(seed: int, kind: str) -> None:
    """What the harness and the generators write is what the fast reader is for: it must not abstain there."""
    rng = random.Random(seed)
    ops = kv_history(rng, clients=5, ops=200) if kind == "kv" else register_history(rng, clients=5, ops=200)
    text = "".join(json.dumps(op.to_dict(), separators=(",", ":"), default=str) + "\n" for op in ops)
    assert read_jsonl_fast(text.encode()) == ops


@pytest.mark.parametrize("at", ["first", "inner", "last", "torn"])
@pytest.mark.parametrize("line", RAW_LINES, ids=range(len(RAW_LINES)))
def test_each_hazard_reads_as_the_reference_reads_it(tmp_path: Path, line: str, at: str) -> None:
    lines = [_OP % 0, _OP % 1, _OP % 2]
    where = {"first": 0, "inner": 2, "last": 3, "torn": 3}[at]
    text = "\n".join([*lines[:where], line, *lines[where:]]) + ("" if at == "torn" else "\n")
    path = tmp_path / "history.jsonl"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    assert _read(path) == _reference(path)


def test_blank_lines_between_ops_keep_the_fast_reader() -> None:
    ops = register_history(random.Random(3), clients=3, ops=10)
    lines = [json.dumps(op.to_dict()) for op in ops]
    text = "\n" + "\n\n".join(lines[:5]) + "\n\n\n" + "\n".join(lines[5:]) + "\n"
    assert read_jsonl_fast(text.encode()) == ops


def test_deep_values_are_left_to_the_reference(tmp_path: Path) -> None:
    """json.loads and msgspec both stop at the recursion limit, counted from different stack depths (so where
    the reference gives up depends on its caller): the fast reader answers only well below it."""
    import sys

    limit = sys.getrecursionlimit()
    path = tmp_path / "history.jsonl"
    for depth in [1, 50, limit // 2, *range(limit - 200, limit + 5, 3)]:
        value = "[" * depth + "]" * depth
        path.write_text(f'{{"index":0,"time":0,"type":"ok","process":1,"f":"r","value":{value}}}\n')
        fast = read_jsonl_fast(path.read_bytes())
        assert fast is not None or depth > limit // 2, depth
        assert fast is None or depth < limit - 50, depth
        if fast is not None:
            assert _reference(path) == ("ok", ("jsonl", tuple(fast)))


def _check(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser()
    configure(parser)
    return run(parser.parse_args(argv))


def test_a_bad_line_is_one_line_naming_file_and_line(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "history.jsonl"
    write_jsonl(path, kv_history(random.Random(1), clients=2, ops=20))
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace('"process":', '"process":true,"was":')  # a bool process: the fast reader abstains
    lines[5] = "{oops"
    path.write_text("\n".join(lines) + "\n")
    assert _check(["--model", "kv", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"splitbrain check: {path}: line 6: not JSON: Expecting property name enclosed in double quotes: " \
                  "line 1 column 2 (char 1)"


def test_check_loads_no_plotting_spec_or_yaml_modules(tmp_path: Path) -> None:
    """``splitbrain check`` without ``--html`` imports only what it needs: not the timeline's plotting libraries,
    not the spec module and YAML (they cost it several times its search on a long history)."""
    path = tmp_path / "history.jsonl"
    write_jsonl(path, register_history(random.Random(2), clients=2, ops=20))
    probe = ("import sys; from harness.cli import main; code = main(['check', '--model', 'cas-register', sys.argv[1]]);"
             " print(code, sorted(m for m in ('matplotlib', 'numpy', 'yaml', 'harness.spec', 'checker.timeline')"
             " if m in sys.modules))")
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", probe, str(path)], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(root)}, timeout=120, check=True).stdout
    assert out.splitlines()[-1] == "0 []", out
