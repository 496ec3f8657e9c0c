"""The release gate's text (table, summary line, JUnit; spark_analysis.gate's pure renderers) and the Spark gate's
pure driver part: rows -> cells and outcomes (gate_inputs, spec_is_safe, fault_figures)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from spark_analysis.gate import fault_figures, gate_inputs, render_junit, render_table, spec_is_safe, summary_line
from spark_analysis.sequential import Cell, FaultFigures, GateReport, GateSettings, RunOutcome, decide


def _report() -> GateReport:
    outcomes = [RunOutcome("queue x kill x random", "candidate", 1, "invalid", ("lost-write",), ref="smoke/1")]
    for seed in range(1, 31):
        figs = {"partition": FaultFigures(recovery_s=1.0 + seed / 100, unavailable_s=2.0)}
        outcomes += [RunOutcome("queue x none x random", b, seed, "valid", faults=figs) for b in ("baseline",
                                                                                                  "candidate")]
    for seed in range(1, 6):
        outcomes += [RunOutcome("queue x pause x random [unsafe]", "baseline", seed, "valid"),
                     RunOutcome("queue x pause x random [unsafe]", "candidate", seed, "valid")]
    cells = [Cell("queue x kill x random", "safety"), Cell("queue x none x random", "safety"),
             Cell("queue x pause x random [unsafe]", "rate")]
    return decide(cells, outcomes, GateSettings(stop_on_failure=False))


def test_table_lists_every_cell_worst_first_with_the_method_and_reasons() -> None:
    text = render_table(_report(), "0.2.0", "0.3.0")
    lines = text.splitlines()
    assert "candidate 0.3.0 vs baseline 0.2.0" in lines[0] and "SPRT" in lines[0] and "29 clean runs" in lines[0]
    assert lines[1].split()[:2] == ["decision", "cell"]
    assert lines[2].startswith("FAIL") and "queue x kill x random" in lines[2] and "lost-write" in lines[2]
    assert lines[3].startswith("undecided") and "[unsafe]" in lines[3]
    assert lines[4].startswith("pass") and "rate < 0.100 (95%)" in lines[4]
    perf = [ln for ln in lines if "partition recovery_s" in ln]
    assert len(perf) == 1 and "1.00x" in perf[0] and perf[0].lstrip().startswith("ok")
    assert any(ln.startswith("fail: queue x kill x random: ") and "smoke/1" in ln for ln in lines)


def test_summary_names_the_failed_or_the_open_cells() -> None:
    r = _report()
    line = summary_line(r, "0.2.0", "0.3.0")
    assert line.startswith("gate: FAIL") and "queue x kill x random" in line and "regression: lost-write" in line
    open_only = decide([Cell("a", "rate")], [RunOutcome("a", "baseline", 1, "valid")])
    assert summary_line(open_only, "0.2.0", "0.3.0").startswith("gate: UNDECIDED -- 1 cell(s) not decided on these")
    n = GateSettings().safety_runs
    passed = decide([Cell("a", "safety")], [RunOutcome("a", b, s, "valid") for s in range(n) for b in
                                            ("baseline", "candidate")], GateSettings(perf_runs=0))
    assert summary_line(passed, "0.2.0", "0.3.0").startswith("gate: PASS") and passed.exit_code == 0


def test_junit_has_a_failure_per_failed_cell_and_an_error_per_open_cell() -> None:
    root = ET.fromstring(render_junit(_report(), "0.2.0", "0.3.0"))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["queue x kill x random"].find("failure") is not None
    assert cases["queue x pause x random [unsafe]"].find("error") is not None
    ok = cases["queue x none x random"]
    assert ok.find("failure") is None and ok.find("error") is None
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["baseline"] == "0.2.0" and props["candidate"] == "0.3.0" and props["alpha"] == "0.05"


# -- the Spark gate's driver part --------------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "safe"), [
    pytest.param({"cluster": {"version": "0.3"}}, True, id="defaults"),
    pytest.param({}, True, id="no-cluster-map"),
    pytest.param({"cluster": {"all_ack_in_sync_state_set": False}}, False, id="no-all-ack"),
    pytest.param({"cluster": {"enable_elect_unclean_master": True}}, False, id="unclean-election"),
    pytest.param({"cluster": {"bugs": ["stale-read"]}}, False, id="known-bug"),
    pytest.param("name: [", None, id="not-a-mapping"),
])
def test_spec_is_safe(spec: Any, safe: bool | None) -> None:
    assert spec_is_safe(spec) is safe


def test_fault_figures_read_the_runs_recorded_json() -> None:
    text = ('{"kill": {"recovery_s": 1.0, "unavailable_s": 2.5, "p99_latency_ms": 30.0}, '
            '"start-partition": {"recovery_s": null, "unavailable_s": 0.5, "p99_latency_ms": null}}')
    assert fault_figures(text) == [("kill", 1.0, 2.5, 30.0), ("start-partition", None, 0.5, None)]
    assert fault_figures(None) == [] and fault_figures("not json") == [] and fault_figures("[1]") == []


def test_the_ingested_figures_are_the_checkers_own() -> None:
    from checker.perf import analyze_perf
    from spark_analysis.runfiles import fault_figures_field

    ops = [{"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "send", "value": 1},
           {"index": 1, "time": 10_000_000, "type": "ok", "process": 0, "f": "send", "value": 1},
           {"index": 2, "time": 1_000_000_000, "type": "invoke", "process": "nemesis", "f": "kill", "value": "m"},
           {"index": 3, "time": 1_000_000_000, "type": "info", "process": "nemesis", "f": "kill", "value": ["b1"]},
           {"index": 4, "time": 2_000_000_000, "type": "invoke", "process": 1, "f": "send", "value": 2},
           {"index": 5, "time": 2_500_000_000, "type": "ok", "process": 1, "f": "send", "value": 2},
           {"index": 6, "time": 3_000_000_000, "type": "invoke", "process": "nemesis", "f": "start", "value": None},
           {"index": 7, "time": 3_000_000_000, "type": "info", "process": "nemesis", "f": "start", "value": ["b1"]}]
    recorded = analyze_perf(ops, ".", plots=False)
    from_results = fault_figures(fault_figures_field({"perf": recorded}, ops))
    from_history = fault_figures(fault_figures_field({}, ops))  # a run recorded before by_fault_kind
    assert from_results == from_history == [("kill", 0.0, 1.5, 500.0)]  # no ok op after the heal: until the end


def _row(run_id: str, version: str, seed: int | None, *, status: str = "ok", valid: str = "true",
         kinds: tuple[str, ...] = (), safe: bool | None = True, nemesis: str = "kill") -> tuple[Any, ...]:
    return (run_id, "queue", nemesis, "random", version, seed, f"2026-11-0{(seed or 0) % 9 + 1}", status, valid,
            list(kinds), safe, [("kill", 1.0, 2.0, 30.0)])


def test_gate_inputs_pairs_runs_by_rank_in_seed_order_and_splits_unsafe_cells() -> None:
    rows = [_row("b/3", "0.2", 30), _row("b/1", "0.2", 10), _row("c/2", "0.3", 20, valid="false", kinds=("lost",)),
            _row("c/1", "0.3", 5), _row("c/x", "0.3", None), _row("b/u", "0.2", 7, safe=False),
            _row("c/u", "0.3", 8, safe=False, valid="unknown"), _row("b/p", "0.2", 1, status="partial"),
            _row("c/crash", "0.3", 2, status="crashed"), _row("o/1", "0.9", 1)]
    got = gate_inputs(rows, "0.2", "0.3")
    assert [(c.key, c.kind) for c in got.cells] == [("queue x kill x random", "safety"),
                                                    ("queue x kill x random [unsafe]", "rate")]
    assert got.damaged == 1 and got.runs_per_version == {"0.2": 3, "0.3": 5}
    by = {(o.cell, o.build, o.seed): o for o in got.outcomes}
    safe = "queue x kill x random"
    # baseline in seed order: b/1 (10), b/3 (30); candidate: crash (2), c/1 (5), c/2 (20), c/x (no seed: last)
    assert [by[(safe, "baseline", i)].ref for i in range(2)] == ["b/1", "b/3"]
    assert [by[(safe, "candidate", i)].ref for i in range(4)] == ["c/crash", "c/1", "c/2", "c/x"]
    assert by[(safe, "candidate", 0)].verdict == "crashed" and by[(safe, "candidate", 2)].anomalies == ("lost",)
    assert by[(safe + " [unsafe]", "candidate", 0)].verdict == "unknown"
    assert by[(safe, "baseline", 0)].faults["kill"] == FaultFigures(1.0, 2.0, 30.0)
    forced = gate_inputs(rows, "0.2", "0.3", cell_kind="rate")
    assert [(c.key, c.kind) for c in forced.cells] == [("queue x kill x random", "rate")]


def test_gate_inputs_a_listed_anomaly_makes_the_run_invalid_and_bad_arguments_are_refused() -> None:
    got = gate_inputs([_row("c/1", "0.3", 1, valid="true", kinds=("lost",)), _row("b/1", "0.2", 1)], "0.2", "0.3")
    assert {o.build: o.verdict for o in got.outcomes} == {"candidate": "invalid", "baseline": "valid"}
    with pytest.raises(ValueError, match="cell_kind"):
        gate_inputs([], "0.2", "0.3", cell_kind="mixed")
    with pytest.raises(ValueError, match="candidate"):
        gate_inputs([], "0.2", "0.2")
