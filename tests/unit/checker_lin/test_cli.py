"""`splitbrain check` end to end through harness.cli.main (real files, real parsing, exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checker.history import Op, write_jsonl
from harness.cli import main


def _write(tmp_path: Path, name: str, ops: list[Op]) -> str:
    path = tmp_path / name
    write_jsonl(path, ops)
    return str(path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    ok = [Op(0, 0, "invoke", 0, "write", 1), Op(1, 1, "ok", 0, "write", 1),
          Op(2, 2, "invoke", 1, "read", None), Op(3, 3, "ok", 1, "read", 1)]
    bad = [*ok[:2], Op(2, 2, "invoke", 1, "read", None), Op(3, 3, "ok", 1, "read", 7)]
    return {"ok": _write(tmp_path, "ok.jsonl", ok), "bad": _write(tmp_path, "bad.jsonl", bad)}


def test_valid_file_exits_0(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--model", "register", files["ok"]]) == 0
    out = capsys.readouterr().out
    assert "ok.jsonl: valid" in out and "total: 1 file(s)" in out


def test_json_lines_and_exit_1(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--model", "register", "--json", files["ok"], files["bad"]]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["valid"] for x in lines] == [True, False]
    assert lines[1]["first_failure"]["op"]["value"] == 7 and lines[1]["file"] == files["bad"]
    assert all(isinstance(x["seconds"], float) for x in lines)


def test_initial_value_flag(files: dict[str, str]) -> None:
    assert main(["check", "--model", "register", "--initial", "7", files["bad"]]) == 1
    assert main(["check", "--model", "cas-register", "--initial", "1", files["ok"]]) == 0


def test_unknown_model_names_the_flag(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--model", "nope", files["ok"]]) == 2
    err = capsys.readouterr().err
    assert "--model 'nope'" in err and "cas-register" in err and len(err.strip().splitlines()) == 1


def test_missing_file_names_the_file(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--model", "register", files["ok"], "/nonexistent/h.jsonl"]) == 2
    assert "/nonexistent/h.jsonl: no such history file" in capsys.readouterr().err


def test_html_dir(files: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "html"
    assert main(["check", "--model", "register", "--html", str(out), files["bad"]]) == 1
    assert "NOT linearizable" in (out / "bad.jsonl.html").read_text()


def test_unknown_verdict_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ops: list[Op] = []
    for p in range(12):
        ops.append(Op(len(ops), 0, "invoke", p, "write", p))
    for p in range(12):
        ops.append(Op(len(ops), 1, "ok", p, "write", p))
    ops += [Op(len(ops), 2, "invoke", 99, "read", None), Op(len(ops) + 1, 3, "ok", 99, "read", 5)]
    ops += [Op(len(ops), 4, "invoke", 99, "read", None), Op(len(ops) + 1, 5, "ok", 99, "read", 6)]
    path = _write(tmp_path, "u.jsonl", ops)
    assert main(["check", "--model", "register", "--max-cache-entries", "10", "--json", path]) == 2
    line = json.loads(capsys.readouterr().out)
    assert (line["valid"], line["cause"]) == ("unknown", "memory")


def test_an_empty_history_is_bad_input_not_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["check", "--model", "register", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "empty.jsonl" in err and "no operations" in err
