"""Parsing one run directory's files into warehouse rows (pure)."""

from __future__ import annotations

import json

import pytest

from spark_analysis.runfiles import RunTexts, mode_fields, op_rows, parse_run, spec_fields, verdict_text
from spark_analysis.tables import OPS

SPEC = """name: q1
backend: local
workloads: [queue]
nemesis: {packages: [partition, kill], interval_s: 5}
concurrency: 3
rate: 20
time_limit_s: 30
seed: 42
cluster: {version: "0.3.1"}
"""
RESULTS = json.dumps({
    "valid": False, "duration_s": 31.5, "git_revision": "abc123",
    "checkers": {"queue": {"valid": False, "anomaly_counts": {"lost-write": 2}, "stats": {"time_s": 0.25}},
                 "perf": {"valid": True, "anomaly_counts": {}, "stats": {}}},
    "anomaly_counts": {"lost-write": 2}, "anomaly_examples": {"lost-write": [{"type": "lost-write", "ops": [1]}]},
})
OPS_LINES = [
    {"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "send", "value": {"value": 1}},
    {"index": 1, "time": 5, "type": "ok", "process": 0, "f": "send", "value": {"value": 1, "offset": 0}},
    {"index": 2, "time": 10, "type": "info", "process": "nemesis", "f": "start-partition", "value": ["b1"]},
    {"index": 3, "time": 12, "type": "invoke", "process": 1, "f": "poll", "value": {}},
    {"index": 4, "time": 30, "type": "fail", "process": 1, "f": "poll", "value": {}, "error": "timeout"},
    {"index": 5, "time": 40, "type": "info", "process": "nemesis", "f": "stop-partition", "value": None},
    {"index": 6, "time": 41, "type": "invoke", "process": 1, "f": "poll", "value": {}},
    {"index": 7, "time": 44, "type": "ok", "process": 1, "f": "poll", "value": {"records": [[0, 1]]}},
]
HISTORY = "".join(json.dumps(o) + "\n" for o in OPS_LINES)


def parse(test_yaml: str | None = SPEC, results: str | None = RESULTS, history: str | None = HISTORY):
    return parse_run("q1/20261101T020000.000Z", "/r", "/r/q1/20261101T020000.000Z",
                     RunTexts(test_yaml, results, history), batch_id="b1")


def test_complete_run_gives_every_column() -> None:
    p = parse()
    r = p.run
    assert (r["status"], r["valid"], r["problems"]) == ("ok", "false", [])
    assert (r["name"], r["workload"], r["nemesis"], r["nemesis_packages"]) == ("q1", "queue", "partition+kill",
                                                                               ["partition", "kill"])
    assert (r["seed"], r["concurrency"], r["rate"], r["time_limit_s"]) == (42, 3, 20.0, 30.0)
    assert (r["cluster_version"], r["git_revision"]) == ("0.3.1", "abc123")
    assert (r["date"], r["start_time"].isoformat()) == ("2026-11-01", "2026-11-01T02:00:00+00:00")
    assert (r["duration_s"], r["op_count"], r["client_op_count"], r["fault_count"], r["anomaly_count"]) == (
        31.5, 8, 6, 1, 2)
    assert r["href"] == "/run/q1/20261101T020000.000Z/"  # splitbrain serve's scheme, root-relative
    # the partition window [10, 40]: the poll failing at 30 is its last failure; the first ok after the heal, 44
    assert [(w.seq, round(w.unavailable_s * 1e9), round(w.recovery_s * 1e9)) for w in p.recovery] == [(0, 20, 4)]
    assert p.anomalies == [{"run_id": r["run_id"], "type": "lost-write", "count": 2,
                            "example": json.dumps({"ops": [1], "type": "lost-write"}, sort_keys=True)}]
    assert [(c["checker"], c["valid"], c["time_s"], c["anomaly_count"]) for c in p.checks] == [
        ("queue", "false", 0.25, 2), ("perf", "true", None, 0)]


def test_fault_accounting_counts_requested_and_not_effective_faults() -> None:
    lines = OPS_LINES[:2] + [
        {"index": 2, "time": 10, "type": "invoke", "process": "nemesis", "f": "crash-at", "value": {}},
        {"index": 3, "time": 11, "type": "info", "process": "nemesis", "f": "crash-at", "value": {},
         "effective": False, "why": "failpoint raft.before_apply was not reached in time"},
        {"index": 4, "time": 12, "type": "invoke", "process": "nemesis", "f": "kill", "value": "masters"},
        {"index": 5, "time": 13, "type": "info", "process": "nemesis", "f": "kill", "value": ["b1"], "effective": True},
    ]
    r = parse(history="".join(json.dumps(o) + "\n" for o in lines)).run
    assert (r["faults_requested"], r["faults_not_effective"], r["fault_count"]) == (2, 1, 1)
    assert (parse().run["faults_requested"], parse().run["faults_not_effective"]) == (None, None)  # unaccounted


STATUS_CASES = [
    pytest.param({}, "ok", [], id="complete"),
    pytest.param({"results": None}, "partial", ["results.json: missing"], id="no-results"),
    pytest.param({"history": None}, "partial", ["history.jsonl: missing"], id="no-history"),
    pytest.param({"history": HISTORY + '{"index": 8, "ti'}, "partial", ["torn last line 9"], id="torn-tail"),
    pytest.param({"test_yaml": "name: [unclosed"}, "malformed", ["test.yaml: not a YAML mapping"], id="bad-yaml"),
    pytest.param({"test_yaml": "- a list"}, "malformed", ["expected a mapping"], id="yaml-not-mapping"),
    pytest.param({"results": "{not json"}, "malformed", ["results.json: not a JSON object"], id="bad-results"),
    pytest.param({"history": "garbage\n" + HISTORY}, "malformed", ["history.jsonl:1: not a JSON op"],
                 id="bad-history-line"),
    pytest.param({"results": json.dumps({"valid": "unknown", "crashed": "boom"})}, "crashed", ["run crashed: boom"],
                 id="crashed"),
    pytest.param({"results": "{bad", "history": HISTORY + "{tor"}, "malformed", ["results.json", "torn"],
                 id="malformed-beats-partial"),
]


@pytest.mark.parametrize(("change", "status", "problem_parts"), STATUS_CASES)
def test_status_and_problems(change: dict[str, str | None], status: str, problem_parts: list[str]) -> None:
    kwargs = {"test_yaml": SPEC, "results": RESULTS, "history": HISTORY, **change}
    r = parse(**kwargs).run
    assert r["status"] == status
    for part in problem_parts:
        assert any(part in p for p in r["problems"]), (part, r["problems"])


def test_torn_tail_keeps_the_complete_ops() -> None:
    p = parse(history=HISTORY + '{"index": 8')
    assert p.run["op_count"] == 8 and len(list(op_rows(p))) == 8


def test_blank_lines_are_skipped_and_missing_index_defaults_to_position() -> None:
    text = '\n{"time": 1, "type": "invoke", "process": 0, "f": "send"}\n\n'
    p = parse(history=text)
    assert (p.run["status"], [o["index"] for o in p.ops], p.raws) == ("ok", [0], [text.strip()])


def test_op_rows_pair_latency_and_tag_faults() -> None:
    rows = [dict(zip(OPS.fieldNames(), t)) for t in op_rows(parse())]
    by_idx = {r["idx"]: r for r in rows}
    assert (by_idx[1]["latency_ns"], by_idx[1]["invoke_ns"], by_idx[1]["fault_seq"], by_idx[1]["fault_kind"]) == (
        5, 0, -1, None)
    assert (by_idx[4]["latency_ns"], by_idx[4]["fault_seq"], by_idx[4]["fault_kind"], by_idx[4]["error"]) == (
        18, 0, "partition", "timeout")
    # invoked after the heal: calm phase, but still in the partition's epoch (seq 0)
    assert (by_idx[7]["latency_ns"], by_idx[7]["fault_seq"], by_idx[7]["fault_kind"]) == (3, 0, None)
    assert by_idx[2]["is_nemesis"] and by_idx[2]["process"] == "nemesis"
    assert json.loads(by_idx[7]["op_json"]) == OPS_LINES[7]  # the history line as recorded
    assert {r["date"] for r in rows} == {"2026-11-01"} and {r["workload"] for r in rows} == {"queue"}
    assert len(rows) == 8 and all(len(t) == len(OPS.fieldNames()) for t in op_rows(parse()))


@pytest.mark.parametrize(("spec", "key", "expected"), [
    ({"workload": "queue"}, "workload", "queue"),
    ({"workloads": [{"name": "queue", "options": {}}, "broker-ids"]}, "workload", "queue+broker-ids"),
    ({"nemesis": ["kill"]}, "nemesis", "kill"),
    ({"nemesis": {"packages": []}}, "nemesis", "none"),
    ({}, "workload", "unknown"),
    ({"time_limit": 9}, "time_limit_s", 9.0),
    ({"version": "1.2"}, "cluster_version", "1.2"),
    ({"git": {"commit": "deadbeef"}}, "git_revision", "deadbeef"),
    ({"seed": "x"}, "seed", None),
], ids=["singular-workload", "workload-list", "nemesis-list", "no-packages", "no-spec", "time-limit-alias",
        "top-version", "git-commit", "bad-seed"])
def test_spec_fields(spec: dict, key: str, expected: object) -> None:
    assert spec_fields(spec)[key] == expected


def test_spec_key_ignores_the_seed_only() -> None:
    a, b = spec_fields({"name": "x", "seed": 1}), spec_fields({"name": "x", "seed": 2})
    assert a["spec_key"] == b["spec_key"] != spec_fields({"name": "y", "seed": 1})["spec_key"]


@pytest.mark.parametrize(("valid", "text"),
                         [(True, "true"), (False, "false"), ("unknown", "unknown"), (None, "unknown")])
def test_verdict_text(valid: object, text: str) -> None:
    assert verdict_text(valid) == text


def test_provenance_from_results_json_becomes_run_columns() -> None:
    """A real run without a cluster.version label: its version and revision come from results.json."""
    from harness.provenance import Revision, provenance_record

    prov = provenance_record(sut_version="0.1.0", sut_revision=Revision("f00d", True), harness_version="0.1.0",
                             harness_revision=Revision("f00d", True), label=None, host="ci-7", backend="docker",
                             python="3.11.2")
    spec = "name: q1\nworkloads: [queue]\n"
    results = json.dumps({"valid": True, "checkers": {}, "anomaly_counts": {}, **prov})
    run = parse_run("q1/20261101T020000.000Z", "/r", "/r/q1/x", RunTexts(spec, results, HISTORY)).run
    assert (run["cluster_version"], run["git_revision"], run["revision_dirty"]) == ("0.1.0", "f00d", True)
    assert (run["sut_version"], run["harness_version"], run["harness_revision"]) == ("0.1.0", "0.1.0", "f00d")
    assert (run["host"], run["backend"]) == ("ci-7", "docker")


def test_a_spec_label_wins_over_the_recorded_version_and_old_runs_have_no_provenance() -> None:
    run = parse_run("q1/20261101T020000.000Z", "/r", "/r/q1/x", RunTexts(SPEC, RESULTS, HISTORY)).run
    assert run["cluster_version"] == "0.3.1"
    assert (run["sut_version"], run["host"], run["revision_dirty"], run["backend"]) == (None, None, None, "local")


@pytest.mark.parametrize(("spec", "res", "expected"), [
    ({}, {"nemesis_mode": "guided", "coverage": {"points": 12}}, ("guided", 12)),
    ({"nemesis": {"mode": "guided"}}, {}, ("guided", None)),
    ({"nemesis": ["kill"]}, {}, ("random", None)),  # a run from before nemesis modes
    ({}, {"nemesis_mode": "schedule", "coverage": {"points": "x"}}, ("schedule", None)),
], ids=["results", "spec", "old-run", "bad-points"])
def test_mode_fields(spec: dict, res: dict, expected: tuple[str, int | None]) -> None:
    got = mode_fields(spec, res)
    assert (got["nemesis_mode"], got["coverage_points"]) == expected
