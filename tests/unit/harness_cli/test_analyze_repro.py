"""`analyze` re-checks a stored run (also a crashed one); `repro --print-only` prints the exact command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.spec import load_spec, resolved_yaml
from harness.store import create_run_dir


def _ops(leaders: list[Any]) -> list[dict[str, Any]]:
    ops, i = [], 0
    for p, leader in enumerate(leaders):
        ops.append({"index": i, "time": i * 10, "type": "invoke", "process": p, "f": "read-meta", "value": None})
        ops.append({"index": i + 1, "time": i * 10 + 5, "type": "ok", "process": p, "f": "read-meta",
                    "value": {"leader": leader}})
        i += 2
    return ops


def _stored_run(tmp_path: Path, spec_path: Path, ops: list[dict[str, Any]], *, results: dict[str, Any] | None,
                torn: bool = False) -> Path:
    spec = load_spec(spec_path)
    run = create_run_dir(tmp_path / "results", spec.name)
    run.test_yaml.write_text(resolved_yaml(spec))
    text = "".join(json.dumps(o) + "\n" for o in ops) + ('{"index": 99, "ti' if torn else "")
    run.history.write_text(text)
    if results is not None:
        run.results_json.write_text(json.dumps(results))
    return run.path


@pytest.mark.parametrize("leaders, stored, code, valid", [
    (["c1", "c2", None], {"valid": "unknown", "seed": 42, "duration_s": 3.0}, 0, True),
    (["c1", "zz"], {"valid": True, "seed": 42}, 1, False),
    ([], {"valid": True, "seed": 42}, 2, "unknown"),
], ids=["valid", "stranger-leader", "no-reads"])
def test_analyze_rewrites_results(tmp_path: Path, write_spec: Any, capsys: pytest.CaptureFixture[str],
                                  leaders: list[Any], stored: dict[str, Any], code: int, valid: Any) -> None:
    run = _stored_run(tmp_path, write_spec(), _ops(leaders), results=stored)
    assert cli.main(["analyze", str(run), "--no-plots"]) == code
    doc = json.loads((run / "results.json").read_text())
    assert doc["valid"] == valid
    assert doc["seed"] == 42 and "analyzed_at" in doc
    if not leaders:  # an empty history is no evidence: unknown with the reason, the checkers are not asked
        assert "empty history" in doc["error"] and "checkers" not in doc
        assert "empty history" in capsys.readouterr().err
    else:
        assert set(doc["checkers"]) == {"cli-probe/leader"}
        assert f"valid={valid}" in capsys.readouterr().out
    assert (run / "junit.xml").exists()


def test_analyze_on_crashed_run_with_torn_history(tmp_path: Path, write_spec: Any) -> None:
    run = _stored_run(tmp_path, write_spec(), _ops(["c1", "c3"]), results=None, torn=True)
    assert cli.main(["analyze", "--results", str(tmp_path / "results"), "--no-plots"]) == 2  # latest
    doc = json.loads((run / "results.json").read_text())
    assert doc["valid"] == "unknown"  # a crashed run is never reported valid
    assert doc["checkers"]["cli-probe/leader"]["valid"] is True
    assert doc["history_ops"] == 4 and "crashed" in doc


def test_analyze_writes_plots_and_timeline(tmp_path: Path, write_spec: Any) -> None:
    run = _stored_run(tmp_path, write_spec(), _ops(["c1"] * 5), results={"valid": True})
    assert cli.main(["analyze", str(run)]) == 0
    for f in ("latency.png", "rate.png", "timeline.html"):
        assert (run / f).stat().st_size > 0, f
    assert "perf" in json.loads((run / "results.json").read_text())


def test_analyze_missing_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["analyze", "nothing", "--results", str(tmp_path)]) == 2
    assert "nothing" in capsys.readouterr().err


def test_repro_print_only(tmp_path: Path, write_spec: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run = _stored_run(tmp_path, write_spec(seed=1234), _ops(["c1"]), results={"valid": False})
    assert cli.main(["repro", "probe", "--results", str(tmp_path / "results"), "--print-only"]) == 0
    cmd = capsys.readouterr().out.strip().splitlines()[-1]
    argv = shlex.split(cmd)
    assert argv[:3] == ["splitbrain", "test", str(run / "repro.yaml")]  # the spec with the executed schedule
    assert argv[argv.index("--seed") + 1] == "1234"
    replay = load_spec(argv[2])
    assert replay.test_count == 1 and replay.nemesis.schedule is not None


def _with_unknown_nemesis_op(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    i = len(ops)
    return [*ops, {"index": i, "time": i * 10, "type": "invoke", "process": "nemesis", "f": "bitflip", "value": None},
            {"index": i + 1, "time": i * 10 + 5, "type": "info", "process": "nemesis", "f": "bitflip", "value": None}]


def test_repro_refuses_a_history_with_an_f_the_fault_table_lacks(tmp_path: Path, write_spec: Any,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _stored_run(tmp_path, write_spec(), _with_unknown_nemesis_op(_ops(["c1"])), results={"valid": False})
    assert cli.main(["repro", "probe", "--results", str(tmp_path / "results"), "--print-only"]) == 2
    err = capsys.readouterr().err  # a replay without that step would be another run
    assert "history.jsonl: history op 2: nemesis op f 'bitflip' has no row" in err and "Traceback" not in err


def test_analyze_says_why_a_history_with_an_f_the_fault_table_lacks_has_no_accounting(tmp_path: Path,
                                                                                        write_spec: Any) -> None:
    run = _stored_run(tmp_path, write_spec(), _with_unknown_nemesis_op(_ops(["c1"])), results={"valid": True})
    assert cli.main(["analyze", str(run), "--no-plots"]) == 0  # the verdict is not lost to the bookkeeping
    doc = json.loads((run / "results.json").read_text())
    assert doc["faults"] == {} and "'bitflip' has no row" in doc["fault_warnings"][0]
