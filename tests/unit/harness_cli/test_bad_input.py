"""Every kind of bad input exits 2 with one line naming the file, field or flag -- never a traceback.

One table: each row is a command line (built from small files the row writes into ``tmp_path``), the exit
code it must give and a fragment its one stderr line must contain.  Rows cover specs, flags, histories and
nodes files; bad nemesis schedules add rows of the same shape.  Nothing here starts a cluster: every row is
refused before any backend is created.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import cli

GOOD: dict[str, Any] = {
    "name": "bad-input", "backend": "local", "nodes": {"controllers": 3, "broker_sets": {"count": 0}},
    "workloads": ["cli-probe"], "nemesis": {"packages": ["kill"], "interval_s": 2, "targets": ["one"]},
    "time_limit_s": 5, "seed": 1,
}


def spec(**changes: Any) -> Callable[[Path], str]:
    """A spec file: GOOD with ``changes`` (a value of ``None`` deletes the key)."""

    def write(tmp: Path) -> str:
        doc = {k: v for k, v in {**GOOD, **changes}.items() if v is not None}
        path = tmp / "spec.yaml"
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        return str(path)

    return write


def text_file(name: str, content: str | bytes) -> Callable[[Path], str]:
    def write(tmp: Path) -> str:
        path = tmp / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return str(path)

    return write


def run_dir(history: str | bytes | None) -> Callable[[Path], str]:
    """A stored run of GOOD whose history.jsonl holds ``history`` (None: a directory in its place)."""

    def write(tmp: Path) -> str:
        run = tmp / "results" / "bad-input" / "20260101T000000.000Z"
        run.mkdir(parents=True)
        (run / "test.yaml").write_text(yaml.safe_dump(GOOD), encoding="utf-8")
        if history is None:
            (run / "history.jsonl").mkdir()
        else:
            (run / "history.jsonl").write_bytes(history if isinstance(history, bytes) else history.encode())
        return str(run)

    return write


def empty_dir(tmp: Path) -> str:
    d = tmp / "empty"
    d.mkdir(exist_ok=True)
    return str(d)


def ssh_spec(tmp: Path) -> str:
    return spec(backend="ssh")(tmp)


NODES_OK = {"nodes": {"c1": "10.0.0.1", "c2": "10.0.0.2", "c3": "10.0.0.3"}}
OP = json.dumps({"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "read-meta", "value": None})


@dataclass(frozen=True)
class Row:
    """argv: strings, or callables that write a file into tmp_path and return its path."""

    id: str
    argv: tuple[Any, ...]
    fragment: str
    code: int = 2


ROWS = [
    # -- specs -------------------------------------------------------------------------------------------
    Row("spec-missing-file", ("test", lambda t: str(t / "nope.yaml")), "nope.yaml: <file>"),
    Row("spec-bad-yaml", ("test", text_file("s.yaml", "name: [unclosed")), "valid YAML"),
    Row("spec-top-level-list", ("test", text_file("s.yaml", "- a\n- b\n")), "a mapping at the top level"),
    Row("spec-not-utf8", ("test", text_file("s.yaml", b"name: \xff\xfe\n")), "s.yaml"),
    Row("spec-no-name", ("test", spec(name=None)), "name: got None"),
    Row("spec-unknown-key", ("test", spec(workload=["queue"])), "did you mean"),
    Row("spec-two-controllers", ("test", spec(nodes={"controllers": 2, "broker_sets": {"count": 0}})),
        "--allow-weak-quorum"),
    Row("spec-no-workloads", ("test", spec(workloads=None)), "workloads: got None"),
    Row("spec-zero-controllers", ("test", spec(nodes={"controllers": 0})), "nodes.controllers"),
    Row("spec-unknown-backend", ("test", spec(backend="vm")), "backend: got 'vm'"),
    Row("spec-zero-concurrency", ("test", spec(concurrency=0)), "concurrency: got 0"),
    Row("spec-negative-rate", ("test", spec(rate=-1)), "rate: got -1"),
    Row("spec-time-limit-text", ("test", spec(time_limit_s="soon")), "time_limit_s: got 'soon'"),
    Row("spec-unknown-workload", ("test", spec(workloads=["no-such-workload"])), "workloads[0]"),
    Row("spec-cluster-option-range", ("test", spec(cluster={"lease_timeout_ms": 5})), "cluster.lease_timeout_ms"),
    Row("spec-cluster-unknown-option", ("test", spec(cluster={"lease_ms": 5})), "cluster.lease_ms"),
    Row("spec-unknown-nemesis", ("test", spec(nemesis={"packages": ["meteor"]})), "nemesis.packages"),
    Row("spec-too-many-broker-sets", ("test", spec(nodes={"broker_sets": {"count": 17}})),
        "nodes.broker_sets.count"),
    Row("spec-negative-seed", ("test", spec(seed=-1)), "seed: got -1"),
    Row("spec-duplicate-node", ("test", spec(nodes={"controllers": ["a1", "a1", "a2"]})), "each node name used once"),
    Row("cluster-up-two-controllers", ("cluster", "up", spec(nodes={"controllers": 2})), "nodes.controllers"),
    Row("test-all-one-bad-spec", ("test-all", spec(concurrency=0)), "concurrency: got 0"),
    # -- flags -------------------------------------------------------------------------------------------
    Row("serve-port-too-big", ("serve", "--port", "99999"), "--port: 99999 is outside 0..65535"),
    Row("serve-port-text", ("serve", "--port", "http"), "argument --port"),
    Row("serve-missing-results", ("serve", "--results", lambda t: str(t / "none")), "does not exist"),
    Row("test-results-unwritable", ("test", spec(), "--results", "/proc/splitbrain-x"), "--results /proc/splitbrain-x"),
    Row("test-concurrency-text", ("test", spec(), "--concurrency", "many"), "argument --concurrency"),
    Row("test-override-nemesis", ("test", spec(), "--nemesis", "meteor"), "nemesis.packages"),
    Row("test-override-nodes-count", ("test", spec(), "--nodes", "a,b"), "--nodes"),
    Row("unknown-command-flag", ("test", spec(), "--colour"), "unrecognized arguments: --colour"),
    Row("log-level", ("--log-level", "LOUD", "serve"), "argument --log-level"),
    Row("missing-spec-argument", ("test",), "required: spec"),
    Row("cluster-down-unknown-name", ("cluster", "down", "nobody", "--results", lambda t: str(t / "r")), "nobody"),
    # -- histories (analyze) -----------------------------------------------------------------------------
    Row("history-garbage-line", ("analyze", run_dir(OP + "\nthis is not json\n" + OP + "\n")), "history.jsonl:2"),
    Row("history-empty", ("analyze", run_dir("")), "empty history"),
    Row("history-missing-field", ("analyze", run_dir('{"index": 0}\n')), "missing field"),
    Row("history-not-utf8", ("analyze", run_dir(b"\xff\xfe\xfd\n")), "unreadable history"),
    Row("history-is-a-directory", ("analyze", run_dir(None)), "unreadable history"),
    Row("analyze-no-such-run", ("analyze", lambda t: str(t / "no-run")), "no-run"),
    # -- nodes files (ssh backend) -----------------------------------------------------------------------
    Row("ssh-without-nodes-file", ("test", ssh_spec), "--nodes-file"),
    Row("nodes-file-missing", ("test", ssh_spec, "--nodes-file", lambda t: str(t / "nodes.yaml")), "nodes.yaml"),
    Row("nodes-file-bad-yaml", ("test", ssh_spec, "--nodes-file", text_file("nodes.yaml", "nodes: [")), "YAML"),
    Row("nodes-file-missing-node", ("test", ssh_spec, "--nodes-file",
                                    text_file("nodes.yaml", yaml.safe_dump({"nodes": {"c1": "h1"}}))), "c2"),
    Row("nodes-file-unknown-key", ("test", ssh_spec, "--nodes-file",
                                   text_file("nodes.yaml", yaml.safe_dump({**NODES_OK, "hosts": 1}))), "hosts"),
    Row("nodes-file-bad-port", ("test", ssh_spec, "--nodes-file", text_file(
        "nodes.yaml", yaml.safe_dump({"nodes": {**NODES_OK["nodes"], "c1": {"host": "h", "port": 0}}}))), "port"),
    # nemesis schedules and package options (nemesis/schedule.py, nemesis/packages.py)
    Row("schedule-not-a-list", ("test", spec(nemesis={"schedule": {"at_s": 1}})), "nemesis.schedule:"),
    Row("schedule-unknown-f", ("test", spec(nemesis={"schedule": [{"at_s": 1, "f": "explode"}]})),
        "nemesis.schedule[0].f"),
    Row("schedule-negative-at", ("test", spec(nemesis={"schedule": [{"at_s": -1, "f": "kill"}]})),
        "nemesis.schedule[0].at_s"),
    Row("schedule-out-of-order", ("test", spec(nemesis={"schedule": [{"at_s": 5, "f": "kill"},
                                                                     {"at_s": 1, "f": "start"}]})), "time order"),
    Row("schedule-unknown-selector", ("test", spec(nemesis={"schedule": [{"at_s": 1, "f": "kill",
                                                                          "value": "leaders"}]})),
        "nemesis.schedule[0].value"),
    Row("schedule-role-the-topology-lacks", ("test", spec(nemesis={"schedule": [{"at_s": 1, "f": "kill",
                                                                                 "value": "masters"}]})),
        "needs broker sets"),
    Row("schedule-bad-partition-kind", ("test", spec(nemesis={"schedule": [
        {"at_s": 1, "f": "start-partition", "value": {"kind": "halves"}}]})), "nemesis.schedule[0].value.kind"),
    Row("schedule-crash-at-without-name", ("test", spec(nemesis={"schedule": [
        {"at_s": 1, "f": "crash-at", "value": {"targets": "controller-leader"}}]})), "value.name"),
    Row("schedule-unknown-step-key", ("test", spec(nemesis={"schedule": [{"at_s": 1, "f": "kill", "at": 2}]})),
        "nemesis.schedule[0].at"),
    Row("options-unknown-kind",
        ("test", spec(nemesis={"packages": ["kill"], "options": {"kill": {"kinds": ["nuke"]}}})),
        "nemesis.options.kill.kinds[0]"),
    Row("options-unknown-package", ("test", spec(nemesis={"packages": ["kill"], "options": {"chaos": {}}})),
        "nemesis.options.chaos"),
    Row("spec-cluster-version-number", ("test", spec(cluster={"version": 0.3})), "cluster.version: got 0.3"),
    Row("spec-cluster-version-spaces", ("test", spec(cluster={"version": "rc 1"})), "cluster.version"),
    # -- the release gate (spark gate): refused before Spark starts ------------------------------------------
    Row("gate-same-versions", ("spark", "gate", "--baseline", "1", "--candidate", "1", "--results", empty_dir),
        "--candidate: '1' is also the baseline"),
    Row("gate-alpha-range", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--alpha", "1.5",
                             "--results", empty_dir), "--alpha: 1.5"),
    Row("gate-alpha-text", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--alpha", "low"),
        "argument --alpha"),
    Row("gate-min-runs-dropped", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--min-runs", "20",
                                  "--results", empty_dir), "--min-runs: dropped"),
    Row("gate-power-range", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--power", "1",
                             "--results", empty_dir), "--power: 1.0"),
    Row("gate-min-rate-range", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--min-rate", "0",
                                "--results", empty_dir), "--min-rate: 0.0"),
    Row("gate-min-effect-negative", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--min-effect", "-1",
                                     "--results", empty_dir), "--min-effect: -1.0"),
    Row("gate-unknown-cell-kind", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--cell-kind", "x"),
        "argument --cell-kind"),
    Row("gate-no-source", ("spark", "gate", "--baseline", "1", "--candidate", "2"), "--results DIR... or --warehouse"),
    Row("gate-missing-results", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--results",
                                 lambda t: str(t / "none")), "does not exist"),
    Row("gate-missing-warehouse", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--warehouse",
                                   lambda t: str(t / "wh")), "no runs table"),
    Row("gate-no-candidate", ("spark", "gate", "--baseline", "1", "--results", empty_dir), "--candidate"),
    Row("gate-correction-dropped", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--correction", "holm",
                                    "--results", empty_dir), "--correction: dropped"),
    Row("gate-test-dropped", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--test", "fisher",
                              "--results", empty_dir), "--test: dropped"),
    Row("gate-junit-is-a-directory", ("spark", "gate", "--baseline", "1", "--candidate", "2", "--results", empty_dir,
                                      "--junit", empty_dir), "--junit"),
    # -- splitbrain gate: a system whose adapter builds no revisions is refused before any build -------------
    Row("gate-system-without-revision-builds",
        ("gate", "--baseline", "HEAD", "--candidate", "HEAD", "--dry-run",
         spec(system="counter", nodes={"members": 1}, workloads=[{"name": "counter"}],
              nemesis={"packages": ["pause"], "interval_s": 2, "targets": ["one"]})),
        "system 'counter' cannot run another git revision: it offers no revision builds"),
    Row("synth-bad-regression", ("spark", "synth", lambda t: str(t / "c"), "--regression", "0.3:queue"),
        "--regression"),
    Row("repro-runs-zero", ("repro", run_dir(OP), "--runs", "0"), "--runs"),
    Row("shrink-no-results", ("shrink", run_dir(OP)), "results.json"),
    Row("shrink-bad-budget", ("shrink", run_dir(OP), "--budget-min", "-1"), "--budget-min"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_exits_2_with_one_line(row: Row, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a default --results lands here, never in the checkout
    argv = [a(tmp_path) if callable(a) else a for a in row.argv]
    assert cli.main(argv) == row.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err
    assert len(lines) == 1, err
    assert row.fragment in lines[0], lines[0]


def test_the_table_is_big_enough() -> None:
    assert len(ROWS) >= 25 and len({r.id for r in ROWS}) == len(ROWS)
