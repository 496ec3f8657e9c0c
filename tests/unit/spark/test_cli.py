"""``splitbrain spark`` argument handling (the verbs that need no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main


def test_spark_synth_writes_a_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark", "synth", str(tmp_path / "r"), "--runs", "5", "--ops", "60", "--seed", "3",
                 "--torn", "1"]) == 0
    assert "wrote 5 runs" in capsys.readouterr().out
    assert len(list((tmp_path / "r").glob("*/*/history.jsonl"))) == 5


def test_spark_synth_rejects_bad_sizes_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark", "synth", str(tmp_path), "--runs", "0"]) == 2
    assert "need runs >= 1" in capsys.readouterr().err


def test_spark_needs_a_verb(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark"]) == 2  # one line naming what is missing, no usage block (harness.cli.OneLineParser)
    assert "VERB" in capsys.readouterr().err
