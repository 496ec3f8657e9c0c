"""The release gate's printed table, summary line and JUnit file (spark_analysis.gate's pure renderers)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from spark_analysis.gate import render_junit, render_table, summary_line
from spark_analysis.regression import CellCounts, gate

CELLS = [CellCounts("queue", "kill", 5, 50, 30, 50), CellCounts("queue", "none", 0, 50, 0, 50),
         CellCounts("broker-ids", "pause", 1, 4, 0, 50)]


def test_table_lists_every_cell_worst_first_with_counts_and_method() -> None:
    text = render_table(gate(CELLS, min_runs=20), "0.2.0", "0.3.0")
    lines = text.splitlines()
    assert "candidate 0.3.0 vs baseline 0.2.0" in lines[0] and "Holm" in lines[0] and "Boschloo" in lines[0]
    assert lines[2].startswith("REGRESSED") and "queue" in lines[2] and "5/50 0.10" in lines[2]
    assert "30/50 0.60" in lines[2] and "+0.50 [" in lines[2]
    assert lines[3].startswith("pass") and lines[4].startswith("too-few-runs")


def test_summary_names_the_regressed_or_the_short_cells() -> None:
    assert "FAIL" in summary_line(gate(CELLS), "0.2.0", "0.3.0")
    assert "too few runs to decide in 1 more: broker-ids x pause" in summary_line(gate(CELLS), "0.2.0", "0.3.0")
    assert "queue x kill" in summary_line(gate(CELLS), "0.2.0", "0.3.0")
    short = summary_line(gate(CELLS[1:]), "0.2.0", "0.3.0")
    assert short.startswith("gate: UNDECIDED") and "broker-ids x pause (0.2.0: 4, 0.3.0: 50)" in short
    assert summary_line(gate(CELLS[1:2]), "0.2.0", "0.3.0").startswith("gate: PASS")
    assert "no checked runs" in summary_line(gate([]), "0.2.0", "0.3.0")


def test_junit_has_a_failure_per_regressed_cell_and_an_error_per_short_cell() -> None:
    root = ET.fromstring(render_junit(gate(CELLS), "0.2.0", "0.3.0"))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["queue x kill"].find("failure") is not None
    assert cases["broker-ids x pause"].find("error") is not None
    assert cases["queue x none"].find("failure") is None and cases["queue x none"].find("error") is None
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["baseline"] == "0.2.0" and props["candidate"] == "0.3.0"
