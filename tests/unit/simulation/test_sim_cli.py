"""``splitbrain sim``: prints the verdict, writes a run directory a checker can read back, refuses bad flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from checker.history import read_jsonl
from checker.queue import check_queue_file
from harness import cli
from nemesis.schedule import parse
from nemesis.targets import Topology
from systems.splitbrain.selectors import SELECTORS


def test_sim_command_writes_a_checkable_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = cli.main(["sim", "--seed", "5", "--seconds", "10", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "valid" in text and "replay: splitbrain sim --seed 5 --seconds 10" in text
    ops = read_jsonl(out / "history.jsonl")
    assert ops and [op.index for op in ops] == list(range(len(ops)))
    assert check_queue_file(out / "history.jsonl").valid is True
    doc = json.loads((out / "results.json").read_text())
    assert doc["valid"] is True and set(doc["checkers"]) >= {"queue", "invariants", "availability", "restarts"}
    steps = yaml.safe_load((out / "schedule.yaml").read_text())
    parse(steps or [], Topology(("c1", "c2", "c3"), (("b1-1", "b1-2", "b1-3"),), selectors=SELECTORS))


def test_sim_command_exits_1_on_a_found_bug(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["sim", "--seed", "1", "--seconds", "30", "--bug", "ack-before-replication",
                     "--out", str(tmp_path / "bug")])
    assert code == 1, capsys.readouterr().out


@pytest.mark.parametrize(("argv", "fragment"), [
    (["sim", "--seconds", "-1"], "--seconds"),
    (["sim", "--faults", "earthquake"], "--faults"),
    (["sim", "--bug", "nope"], "--bug"),
    (["sim", "--seeds", "0"], "--seeds"),
    (["sim", "--workloads", "queue,bank"], "--workloads"),
    (["sim", "--workloads", "membership"], "--workloads"),
])
def test_sim_command_refuses_bad_flags_in_one_line(argv: list[str], fragment: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]
