"""``splitbrain spark gate`` end to end on a real embedded Spark, deciding with the sequential core: a synthetic
corpus where version 0.3.0 regressed in one cell, gated from the results directory and from a warehouse (the same
table both ways, performance rows included), both ways round, as rate cells and as safety cells, short of runs,
and a version without runs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from spark_analysis.ingest import ingest
from spark_analysis.synth import Cell, generate, parse_regression

pytestmark = pytest.mark.integration

CELLS = (Cell("queue", "kill", 0.1), Cell("queue", "none", 0.0))


@pytest.fixture(scope="module")
def corpus(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("spark-gate")
    generate(base / "results", runs=160, ops=20, seed=5, cells=CELLS, versions=("0.2.0", "0.3.0"),
             regressions=(parse_regression("0.3.0:queue:kill:0.8"),))
    ingest(spark, [base / "results"], base / "warehouse")
    return base


def gate(base: Path, *extra: str) -> list[str]:
    return ["spark", "gate", "--master", "local[2]", "--junit", str(base / "junit.xml"), *extra]


def test_the_regressed_rate_cell_fails_the_gate_from_results_and_from_the_warehouse(
        corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tables = []
    for source in (["--results", str(corpus / "results")], ["--warehouse", str(corpus / "warehouse")]):
        code = main(gate(corpus, "--baseline", "0.2.0", "--candidate", "0.3.0", "--cell-kind", "rate", *source))
        out = capsys.readouterr().out
        assert code == 1, out
        lines = out.splitlines()
        assert lines[2].startswith("FAIL") and "queue x kill x random" in lines[2]
        assert any(line.startswith("pass") and "queue x none x random" in line for line in lines), out
        assert "gate: FAIL" in out and "discordant pairs" in out
        root = ET.parse(corpus / "junit.xml").getroot()
        assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "0")
        tables.append([ln for ln in lines if not ln.startswith("wrote ")])
    assert tables[0] == tables[1]  # the two sources give the same runs, figures and verdicts
    assert any("perf" in ln and "kill recovery_s" in ln for ln in tables[0])


def test_the_old_version_as_candidate_passes(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(gate(corpus, "--baseline", "0.3.0", "--candidate", "0.2.0", "--cell-kind", "rate", "--results",
                     str(corpus / "results"))) == 0
    assert "gate: PASS" in capsys.readouterr().out


def test_safe_settings_make_any_candidate_anomaly_a_failure(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The corpus's specs have safe settings, so by default its cells are safety cells: 0.2.0's own lost writes
    fail it as a candidate -- an old bug still there, since 0.3.0 showed the same kind."""
    assert main(gate(corpus, "--baseline", "0.3.0", "--candidate", "0.2.0", "--warehouse",
                     str(corpus / "warehouse"))) == 1
    out = capsys.readouterr().out
    assert "gate: FAIL" in out and "queue x kill x random" in out and "old bug still there: lost-write" in out


def test_too_few_runs_is_undecided_and_names_the_cell(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # min-rate 0.01 needs 299 clean runs before a cell with no anomaly at all can pass
    assert main(gate(corpus, "--baseline", "0.3.0", "--candidate", "0.2.0", "--cell-kind", "rate", "--min-rate",
                     "0.01", "--results", str(corpus / "results"))) == 2
    out = capsys.readouterr().out
    assert "gate: UNDECIDED" in out and "queue x none x random" in out


def test_a_version_with_no_runs_is_one_line_exit_2(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(gate(corpus, "--baseline", "0.2.0", "--candidate", "9.9", "--results", str(corpus / "results"))) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "9.9" in err[0] and "0.2.0" in err[0]
