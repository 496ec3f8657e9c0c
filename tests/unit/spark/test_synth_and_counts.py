"""The corpus generator's truth and the built-in counts checker (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_analysis.recheck import check_run_local, counts_check
from spark_analysis.synth import Cell, generate, parse_regression

NOW = __import__("datetime").datetime(2026, 11, 22, tzinfo=__import__("datetime").UTC)


def test_generate_injects_exact_rates_and_damage(tmp_path: Path) -> None:
    cells = (Cell("queue", "partition", 0.5), Cell("queue", "none", 0.0))
    c = generate(tmp_path, runs=12, ops=80, seed=7, cells=cells, torn=1, no_results=1, bad_yaml=1)
    assert len(c.runs) == 12
    per_cell = {cell: [r for r in c.runs if r.cell == cell] for cell in cells}
    assert sum(r.anomalous for r in per_cell[cells[0]]) == 3 and not any(r.anomalous for r in per_cell[cells[1]])
    assert [c.expected_status(r) for r in c.runs[-3:]] == ["partial", "partial", "malformed"]
    torn = c.runs[-3]
    assert not (tmp_path / torn.run_id / "history.jsonl").read_text().endswith("\n")
    assert not (tmp_path / c.runs[-2].run_id / "results.json").exists()
    for r in c.runs[:9]:
        res = json.loads((tmp_path / r.run_id / "results.json").read_text())
        assert res["valid"] is (not r.anomalous)
        assert res["anomaly_counts"].get("lost-write", 0) == r.lost


def test_generate_is_deterministic_per_seed(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", runs=3, ops=60, seed=3)
    b = generate(tmp_path / "b", runs=3, ops=60, seed=3)
    for x, y in zip(a.runs, b.runs):
        assert (tmp_path / "a" / x.run_id / "history.jsonl").read_bytes() == (
            tmp_path / "b" / y.run_id / "history.jsonl").read_bytes()


@pytest.mark.parametrize("kwargs", [{"runs": 0, "ops": 50}, {"runs": 2, "ops": 50, "torn": 3}],
                         ids=["no-runs", "too-much-damage"])
def test_generate_rejects_bad_sizes(tmp_path: Path, kwargs: dict) -> None:
    with pytest.raises(ValueError, match="generate"):
        generate(tmp_path, seed=1, **kwargs)


def op(i: int, typ: str, f: str, value: object, process: object = 0) -> dict:
    return {"index": i, "time": i, "type": typ, "process": process, "f": f, "value": value}


def test_counts_check_hand_computed() -> None:
    h = [
        op(0, "invoke", "send", {"value": 1}), op(1, "ok", "send", {"value": 1, "offset": 0}),
        op(2, "invoke", "send", {"value": 2}), op(3, "ok", "send", {"value": 2, "offset": 1}),
        op(4, "invoke", "send", {"value": 3}), op(5, "info", "send", {"value": 3}),  # never lost
        op(6, "invoke", "send", {"value": 4}, 5), op(7, "fail", "send", {"value": 4}, 5),
        op(8, "info", "start-kill", None, "nemesis"),
        op(9, "invoke", "poll", {}, 5), op(10, "ok", "poll", {"records": [[0, 1]]}, 5),
    ]
    assert counts_check(h) == {"ok": 3, "fail": 1, "info": 1, "lost": 1, "valid": False}
    h.append(op(11, "ok", "drain", {"records": [[1, 2]]}, 5))
    assert counts_check(h)["lost"] == 0 and counts_check(h)["valid"] is True


def test_local_check_of_a_generated_run_finds_the_injected_loss(tmp_path: Path) -> None:
    c = generate(tmp_path, runs=2, ops=120, seed=5, cells=(Cell("queue", "kill", 1.0),))
    for r in c.runs:
        row = check_run_local(r.run_id, tmp_path / r.run_id, "counts", now=NOW)
        assert (row[2], row[6]) == ("false", r.lost) and r.lost >= 1


def test_versions_are_drawn_independently_of_cells(tmp_path: Path) -> None:
    """Every cell sees every version (the old generator tied version to cell: a cell had one version)."""
    c = generate(tmp_path, runs=80, ops=30, seed=4, versions=("0.1.0", "0.2.0", "0.3.0"))
    seen: dict[tuple[str, str], set[str]] = {}
    for r in c.runs:
        seen.setdefault((r.cell.workload, r.cell.nemesis), set()).add(r.version)
        res = json.loads((tmp_path / r.run_id / "results.json").read_text())
        assert res["cluster_version"] == res["provenance"]["sut"]["version"] == r.version
    assert all(v == {"0.1.0", "0.2.0", "0.3.0"} for v in seen.values()), seen


def test_a_regression_sets_one_cell_of_one_version_to_its_rate(tmp_path: Path) -> None:
    cells = (Cell("queue", "kill", 0.1), Cell("queue", "partition", 0.3))
    reg = parse_regression("0.3.0:queue:kill:0.6")
    c = generate(tmp_path, runs=120, ops=40, seed=9, cells=cells, versions=("0.2.0", "0.3.0"), regressions=(reg,))
    hit = [r for r in c.runs if r.cell == cells[0] and r.version == "0.3.0"]
    rest = [r for r in c.runs if r.cell == cells[0] and r.version != "0.3.0"]
    other = [r for r in c.runs if r.cell == cells[1]]
    assert sum(r.anomalous for r in hit) == round(0.6 * len(hit))
    assert sum(r.anomalous for r in rest) == round(0.1 * len(rest))
    assert sum(r.anomalous for r in other) == round(0.3 * len(other))


@pytest.mark.parametrize(("text", "fragment"), [
    ("0.3.0:queue:kill", "VERSION:WORKLOAD:NEMESIS:RATE"), ("0.3.0:queue:kill:lots", "not a number"),
    ("0.3.0:queue:kill:1.5", "anomaly_rate must be in"), (":queue:kill:0.5", "VERSION:WORKLOAD"),
], ids=["three-fields", "rate-text", "rate-above-one", "empty-version"])
def test_parse_regression_rejects_bad_text(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_regression(text)


def test_a_regression_outside_the_corpus_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lacks"):
        generate(tmp_path, runs=4, ops=30, seed=1, regressions=(parse_regression("9.9:queue:kill:0.5"),))


def test_backends_are_drawn_per_run_without_moving_anything_else(tmp_path: Path) -> None:
    one = generate(tmp_path / "a", runs=30, ops=30, seed=4)
    two = generate(tmp_path / "b", runs=30, ops=30, seed=4, backends=("local", "docker"))
    assert [(r.run_id, r.anomalous, r.version) for r in one.runs] == [(r.run_id, r.anomalous, r.version)
                                                                      for r in two.runs]
    assert {r.backend for r in one.runs} == {"local"} and {r.backend for r in two.runs} == {"local", "docker"}
    for r in two.runs:
        res = json.loads((tmp_path / "b" / r.run_id / "results.json").read_text())
        assert res["provenance"]["backend"] == r.backend
        assert f"backend: {r.backend}\n" in (tmp_path / "b" / r.run_id / "test.yaml").read_text()
    with pytest.raises(ValueError, match="distinct backends"):
        generate(tmp_path / "c", runs=2, ops=30, seed=1, backends=())
