"""``splitbrain spark report`` rejects bad flags with one line naming the flag, exit 2, before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main


@pytest.mark.parametrize(("extra", "message"), [
    ([], "--warehouse {w}: no runs table there"),
    (["--alpha", "1.5"], "--alpha: 1.5 is outside (0, 1)"),
    (["--min-runs", "0"], "--min-runs: 0 is below 1"),
    (["--out-is-a-file"], "--out {o}: exists and is not a directory"),
], ids=["no-warehouse", "alpha", "min-runs", "out-is-a-file"])
def test_bad_report_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    w, o = tmp_path / "w", tmp_path / "dash"
    if extra != []:
        (w / "runs").mkdir(parents=True)
    if extra == ["--out-is-a-file"]:
        o.write_text("x")
        extra = []
    assert main(["spark", "report", "--warehouse", str(w), "--out", str(o), *extra]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "spark report: " + message.format(w=w, o=o) + (
        " (write one with `splitbrain spark ingest`)" if "runs table" in message else "")
    assert not (o.is_dir() and any(o.iterdir()))
