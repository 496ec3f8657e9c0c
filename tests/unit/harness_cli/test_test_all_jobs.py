"""`test-all --jobs N`: cells run as concurrent `splitbrain test` children, rows come back in spec order.

The children here are a stand-in script (no cluster): each writes a run directory like a real run would and
lists it in the ``--run-dirs-file``.  Concurrency is shown by a rendezvous, not by timing: with ``--jobs 2``
each child waits (bounded) until its partner has started, which can only happen if both run at once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import cli, fleet

FAKE = r'''
import json, sys, time, pathlib, yaml
argv = sys.argv[1:]
spec = yaml.safe_load(open(argv[1]))
results = pathlib.Path(argv[argv.index("--results") + 1])
dirs_file = argv[argv.index("--run-dirs-file") + 1]
meet = results / "meet"
meet.mkdir(parents=True, exist_ok=True)
(meet / str(spec["seed"])).touch()
want = int(spec.get("concurrency", 1))  # the test says how many partners to wait for
deadline = time.monotonic() + 30
while len(list(meet.iterdir())) < want:
    if time.monotonic() > deadline:
        print("partner never started"); sys.exit(255)
    time.sleep(0.02)
if spec["seed"] == 13:
    print("backend not available here"); sys.exit(2)
run = results / spec["name"] / f"2026010{spec['seed'] % 10}T000000.000Z-{spec['seed']}"
run.mkdir(parents=True)
(run / "results.json").write_text(json.dumps({"valid": spec["seed"] != 12, "seed": spec["seed"]}))
open(dirs_file, "a").write(f"{run}\n")
sys.exit(0 if spec["seed"] != 12 else 1)
'''


def _specs(tmp_path: Path, seeds: list[int], partners: int) -> list[str]:
    out = []
    for seed in seeds:
        doc: dict[str, Any] = {"name": f"jobs-{seed}", "backend": "local", "nodes": {"controllers": 1,
                               "broker_sets": {"count": 0}}, "workloads": ["cli-probe"], "nemesis": None,
                               "seed": seed, "concurrency": partners, "time_limit_s": 1}
        path = tmp_path / f"s{seed}.yaml"
        path.write_text(yaml.safe_dump(doc))
        out.append(str(path))
    return out


@pytest.fixture
def fake_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "fake_child.py"
    script.write_text(FAKE)
    monkeypatch.setattr(fleet, "CHILD_COMMAND", (sys.executable, str(script)))


@pytest.mark.timeout(120)
def test_jobs_run_cells_at_once_and_keep_spec_order(tmp_path: Path, fake_child: None,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    specs = _specs(tmp_path, [11, 12, 13, 14], partners=2)  # pairs meet: needs two at once
    junit = tmp_path / "all.xml"
    code = cli.main(["test-all", *specs, "--jobs", "2", "--results", str(tmp_path / "r"), "--junit", str(junit)])
    out = capsys.readouterr().out
    assert code == 1, out  # worst of valid, invalid, unknown (no run dir), valid
    assert "4 runs: 2 valid, 1 invalid, 1 unknown, 0 crashed" in out
    rows = [line for line in out.splitlines() if "s1" in line and ".yaml" in line and "│" in line]
    assert [r.split("s1")[1][0] for r in rows] == ["1", "2", "3", "4"]  # spec order, whatever finished first
    assert "backend not available here" in out
    assert junit.read_text().count("<testsuite ") == 4
    assert json.loads((tmp_path / "r" / "jobs-11").glob("*/results.json").__next__().read_text())["seed"] == 11


def test_jobs_flag_is_checked() -> None:
    assert cli.main(["test-all", "x.yaml", "--jobs", "0"]) == 2
    assert cli.main(["test-all", "x.yaml", "--jobs", "many"]) == 2
