"""The run page's fault accounting table (pure HTML rendering)."""

from __future__ import annotations

import json

from harness.web.pages import faults_table


def test_faults_table_shows_kinds_counts_reasons_and_warnings() -> None:
    doc = {"faults": {"kill": {"requested": 2, "effective": 2, "not_effective": 0, "reasons": {}},
                      "crash-at:raft.before_apply": {"requested": 1, "effective": 0, "not_effective": 1,
                                                     "reasons": {"failpoint <x> was not reached": 1}}},
           "fault_warnings": ["fault crash-at:raft.before_apply was requested 1x and never took effect"]}
    html = faults_table(json.dumps(doc))
    assert "<td>kill</td><td>2</td><td>2</td><td>0</td>" in html
    assert "<tr class='bad'><td>crash-at:raft.before_apply</td>" in html
    assert "failpoint &lt;x&gt; was not reached (1)" in html  # escaped
    assert "never took effect" in html


def test_faults_table_is_empty_without_accounting() -> None:
    assert faults_table(json.dumps({"valid": True})) == ""
    assert faults_table("not json") == ""
