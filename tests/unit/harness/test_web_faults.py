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


def test_verdict_table_puts_the_crash_first_and_explains_each_failing_checker() -> None:
    from harness.web.pages import verdict_table

    doc = {"valid": False, "crashed": "RuntimeError: boom <b>", "crashed_at": "nemesis/faults.py:42 in invoke",
           "checkers": {
               "queue/perf": {"valid": True, "anomaly_counts": {}},
               "queue/queue": {"valid": False, "anomaly_counts": {"lost-write": 2}, "anomaly_examples": {
                   "lost-write": [{"type": "lost-write", "key": "q1", "ops": [4, 9],
                                   "explanation": "'w1' was acknowledged at offset 3 but never polled"}]}}}}
    html = verdict_table(json.dumps(doc))
    assert html.index("crashed: RuntimeError: boom &lt;b&gt; (at nemesis/faults.py:42 in invoke)") < html.index(
        "<h3>verdict</h3>")
    assert html.index("queue/queue") < html.index("queue/perf")  # failing first
    assert "lost-write &times;2" in html and "&#x27;w1&#x27; was acknowledged at offset 3 but never polled" in html
    assert "lost-write [q1] ops=[4, 9]" in html and "lost-write: 1 more not listed (2 in all)" in html
    assert verdict_table("not json") == "" and verdict_table(json.dumps({"ended": "killed"})).count("killed") == 1
