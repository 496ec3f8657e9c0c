"""EDN parsing and history format detection (one table of text -> value / ops)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checker.history import HistoryError, Op, write_jsonl
from checker.readers import EdnError, Keyword, detect_format, parse_edn, parse_edn_all, parse_history, read_history

EDN_CASES: list[tuple[str, str, Any]] = [
    ("int", "42", 42),
    ("negative", "-7", -7),
    ("float", "1.5", 1.5),
    ("nil", "nil", None),
    ("bools", "[true false]", [True, False]),
    ("keyword", ":timed-out", Keyword("timed-out")),
    ("string-escapes", r'"a\"b\nc"', 'a"b\nc'),
    ("vector", "[1 2 [3]]", [1, 2, [3]]),
    ("list", "(1 2)", [1, 2]),
    ("commas", "[1,2 , 3]", [1, 2, 3]),
    ("map", "{:a 1, :b [2]}", {"a": 1, "b": [2]}),
    ("set", "#{1 2}", frozenset({1, 2})),
    ("comment", "[1 ; two\n 3]", [1, 3]),
    ("discard", "[1 #_ 2 3]", [1, 3]),
    ("nested-in-string", '"#{:a [}"', "#{:a [}"),
    ("tagged", '#inst "2020"', "2020"),
    ("symbol", "foo/bar", "foo/bar"),
]


@pytest.mark.parametrize(("text", "want"), [c[1:] for c in EDN_CASES], ids=[c[0] for c in EDN_CASES])
def test_parse_edn(text: str, want: Any) -> None:
    assert parse_edn(text) == want


def test_keyword_reads_as_plain_name_but_prints_as_keyword() -> None:
    k = parse_edn(":process")
    assert k == "process" and repr(k) == ":process"


@pytest.mark.parametrize("text", ["[1 2", "[1 2)", "{:a}", "]"])
def test_malformed_edn_names_offset(text: str) -> None:
    with pytest.raises(EdnError, match=r"offset|never closed|odd"):
        parse_edn_all(text)


FORMATS = [
    ("jepsen-log", "INFO  jepsen.util - 0\t:invoke\t:read\tnil\n"),
    ("jepsen-log", "INFO  jepsen.util - 0 :invoke :read nil\n"),
    ("edn-lines", '{:process 0, :type :invoke, :f :get, :key "1", :value nil}\n'),
    ("edn", "[{:process 0, :type :invoke, :f :read, :value nil}]"),
    ("edn", "; comment\n({:process 0 :type :invoke :f :read})"),
    ("jsonl", '{"index": 0, "time": 5, "type": "invoke", "process": 0, "f": "read", "value": null}\n'),
]


@pytest.mark.parametrize(("fmt", "text"), FORMATS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(FORMATS)])
def test_detect_format(fmt: str, text: str) -> None:
    assert detect_format(text) == fmt
    got_fmt, ops = parse_history(text)
    assert got_fmt == fmt and ops[0].type == "invoke" and ops[0].process == 0


def test_unrecognised_format_is_a_clear_error() -> None:
    with pytest.raises(HistoryError, match="unrecognised history format"):
        detect_format("hello world")


def test_jepsen_log_semantics() -> None:
    text = ("INFO  jepsen.util - 3\t:invoke\t:read\tnil\n"
            "INFO  jepsen.util - 3\t:fail\t:read\t:timed-out\n"
            "INFO  jepsen.util - 4 :invoke :cas [3 4]\n"
            "INFO  jepsen.util - 4 :fail :cas [3 4]\n"
            "INFO  jepsen.util - :nemesis :info :start nil\n"
            "some other log line\n")
    _, ops = parse_history(text)
    assert [(o.process, o.type, o.f, o.value) for o in ops] == [
        (3, "invoke", "read", None), (3, "info", "read", "timed-out"),
        (4, "invoke", "cas", [3, 4]), (4, "fail", "cas", [3, 4]), ("nemesis", "info", "start", None),
    ]
    assert [o.time for o in ops] == [0, 1, 2, 3, 4]


def test_edn_ops_fold_key_into_value_and_ignore_nemesis_process() -> None:
    text = ('[{:process :nemesis, :type :info, :f :start, :value "cut #{n1}"}\n'
            ' {:process 1, :type :ok, :f :put, :key "k", :value "v", :time 99, :index 7}]')
    _, ops = parse_history(text)
    assert ops[0].process == "nemesis" and not ops[0].is_client
    assert ops[1].value == {"key": "k", "value": "v"} and ops[1].extra == {"orig_time": 99, "orig_index": 7}


def test_jsonl_roundtrip_and_missing_file(tmp_path: Path) -> None:
    ops = [Op(0, 10, "invoke", 1, "write", 3), Op(1, 20, "ok", 1, "write", 3)]
    path = tmp_path / "history.jsonl"
    write_jsonl(path, ops)
    hist = read_history(path)
    assert hist.format == "jsonl" and list(hist.ops) == ops
    with pytest.raises(HistoryError, match="no such history file"):
        read_history(tmp_path / "absent.jsonl")
