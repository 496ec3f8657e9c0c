"""A drawn schedule replays exactly with ``--schedule``; a failing seed shrinks to a smaller schedule that still
fails in simulation, and to a spec the harness accepts for a real-process run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from checker.compose import results_to_json
from harness import cli
from harness.commands._parts import validate_spec
from harness.spec import load_spec, spec_from_dict
from nemesis.schedule import parse, units
from nemesis.targets import Topology
from system_under_test.sim import FAULT_KINDS, SIM_BUGS, SIM_WORKLOADS, SimConfig, SimRun, run
from systems.splitbrain.selectors import SELECTORS
from systems.splitbrain.sim.check import check_run
from systems.splitbrain.sim.shrink import load_schedule, plan_steps, repro_spec

TOPO = Topology(("c1", "c2", "c3"), (("b1-1", "b1-2", "b1-3"),), selectors=SELECTORS)
BUG = "ack-before-replication"


def _bytes(r: SimRun) -> bytes:
    return json.dumps([r.history, r.node_events, r.schedule], separators=(",", ":")).encode()


@pytest.mark.parametrize(("seed", "kw"), [
    (0, {}), (1, {"bugs": frozenset({BUG})}), (4, {"bugs": frozenset({BUG})}), (5, {}),
    (2, {"faults": FAULT_KINDS, "bugs": frozenset({"non-atomic-meta"})}),
    (3, {"faults": FAULT_KINDS}),
])
def test_a_drawn_schedule_played_back_replays_the_run_byte_for_byte(seed: int, kw: dict[str, Any]) -> None:
    cfg = SimConfig(seed=seed, seconds=30, **kw)
    drawn = run(cfg)
    assert drawn.schedule, "a run without faults would prove nothing"
    played = run(cfg, plan_steps(drawn.schedule, cfg.seconds))
    assert played.schedule == drawn.schedule
    assert _bytes(played) == _bytes(drawn)
    a, b = results_to_json(check_run(drawn)), results_to_json(check_run(played))
    assert (a["valid"], a["anomaly_counts"]) == (b["valid"], b["anomaly_counts"])
    assert _bytes(run(cfg, plan_steps(drawn.schedule, cfg.seconds))) == _bytes(played)  # seed + schedule: exact


def test_a_given_schedule_is_what_the_run_executes_and_records() -> None:
    cfg = SimConfig(seed=9, seconds=12)
    steps: list[dict[str, Any]] = [{"at_s": 2, "f": "kill", "value": "b1-1"}, {"at_s": 3, "f": "pause", "value": "c1"},
             {"at_s": 4, "f": "start-packet", "value": {"targets": "all", "behavior": {"loss": {"percent": 20}}}},
             {"at_s": 6, "f": "start"}, {"at_s": 6, "f": "stop-packet"},
             {"at_s": 7, "f": "start-partition", "value": {"kind": "grudge", "grudge": {"c2": ["c3"]}}}]
    r = run(cfg, plan_steps(steps, cfg.seconds))
    # what was given, in order, then the final heal of what was still in effect (c1 paused, the partition)
    assert r.schedule == [{**s, "at_s": float(s["at_s"])} for s in steps[:4]] + [
        {"at_s": 6.0, "f": "stop-packet"}, steps[5] | {"at_s": 7.0},
        {"at_s": 12.0, "f": "resume", "value": "c1"}, {"at_s": 12.0, "f": "stop-partition"}]
    nemesis = [op for op in r.history if op["process"] == "nemesis" and op["type"] == "info"]
    assert [op["f"] for op in nemesis][:4] == ["kill", "pause", "start-packet", "start"]
    assert nemesis[0]["value"] == ["b1-1"] and nemesis[0]["time"] == (3000 + 2000) * 1_000_000
    assert r.stats["faults"] == {"kill": 1, "packet": 1, "partition": 1, "pause": 1}


def test_a_step_records_only_what_it_did() -> None:
    """A kill of a node that is down already and a start of nodes that are up change nothing: the executed
    schedule says which nodes a step acted on, and leaves out a step that did nothing."""
    cfg = SimConfig(seed=2, seconds=8)
    steps = [{"at_s": 1, "f": "kill", "value": "c1"}, {"at_s": 2, "f": "kill", "value": "c1,b1-2"},
             {"at_s": 3, "f": "start", "value": "c3"}, {"at_s": 4, "f": "start", "value": "dead"}]
    r = run(cfg, plan_steps(steps, cfg.seconds))
    assert r.schedule == [{"at_s": 1.0, "f": "kill", "value": "c1"}, {"at_s": 2.0, "f": "kill", "value": "b1-2"},
                          {"at_s": 4.0, "f": "start", "value": "dead"}]
    starts = [op for op in r.history if op["process"] == "nemesis" and op["f"] == "start" and op["type"] == "info"]
    assert [sorted(op["value"]) for op in starts] == [["b1-2", "c1"]]


def test_sim_schedule_flag_refuses_what_the_simulator_cannot_play(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "x", "nemesis": {"schedule": [
        {"at_s": 1, "f": "kill", "value": "b1-1"}, {"at_s": 2, "f": "kill", "value": "slaves:one"}]}}))
    assert cli.main(["sim", "--seconds", "10", "--schedule", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "schedule[1].value" in err[0], err
    assert cli.main(["sim", "--schedule", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_shrink_of_a_valid_seed_has_nothing_to_shrink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["sim", "--seed", "0", "--seconds", "20", "--shrink", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nothing to shrink" in err[0]


def test_shrink_finds_a_smaller_schedule_that_still_fails_and_a_valid_real_spec(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "shrink"
    code = cli.main(["sim", "--seed", "1", "--seconds", "30", "--bug", BUG, "--shrink", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    original = yaml.safe_load((out / "schedule.yaml").read_text())
    shrunk = yaml.safe_load((out / "shrunk-schedule.yaml").read_text())
    n_orig, n_shrunk = len(units(parse(original, TOPO))), len(units(parse(shrunk, TOPO)))
    assert 1 <= n_shrunk <= n_orig and f"{n_orig} fault unit(s) -> {n_shrunk} in" in text
    assert "[shrink] candidate 1: 0 unit(s) [] -> passes" in text  # no fault at all: no loss
    # the shrunk schedule still fails in simulation, through the original anomaly kinds
    assert f"--schedule {out / 'shrunk-schedule.yaml'}" in text
    assert cli.main(["sim", "--seed", "1", "--seconds", "30", "--bug", BUG, "--schedule",
                     str(out / "shrunk-schedule.yaml"), "--out", str(tmp_path / "replay")]) == 1
    doc = json.loads((tmp_path / "replay" / "results.json").read_text())
    assert doc["anomaly_counts"].get("lost-write", 0) > 0
    # the spec for a real run passes the harness's own validation, with the bug and the shrunk schedule
    spec = load_spec(out / "repro-spec.yaml")
    validate_spec(spec)
    assert spec.cluster["bugs"] == [BUG] and [w.name for w in spec.workloads] == list(SIM_WORKLOADS)
    assert spec.nemesis.schedule == parse(shrunk, TOPO) and spec.seed == 1
    assert f"splitbrain test {out / 'repro-spec.yaml'}" in text
    # and the same spec's schedule plays in simulation (a spec file is a valid --schedule)
    steps, _ = load_schedule(out / "repro-spec.yaml", 30.0)
    assert steps == shrunk


def test_the_shrink_budget_stops_the_search_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["sim", "--seed", "1", "--seconds", "30", "--bug", BUG, "--shrink", "--shrink-budget", "1",
                     "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert code == 0 and "in 1 candidate runs (stopped by --shrink-budget 1: may not be minimal)" in text, text
    shrunk = yaml.safe_load((tmp_path / "shrunk-schedule.yaml").read_text())
    original = yaml.safe_load((tmp_path / "schedule.yaml").read_text())
    assert len(units(parse(shrunk, TOPO))) == len(units(parse(original, TOPO)))  # only [] was tried: all kept


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), seconds=st.sampled_from((5.0, 30.0, 600.0)),
       bugs=st.frozensets(st.sampled_from(sorted(SIM_BUGS))), threads=st.integers(1, 16),
       no_all_ack=st.booleans(), unclean=st.booleans(), lease=st.integers(400, 10_000),
       extra=st.frozensets(st.sampled_from(sorted(set(SIM_WORKLOADS) - {"queue"}))))
def test_repro_spec_is_a_valid_spec_for_any_simulated_config(seed: int, seconds: float, bugs: frozenset[str],
                                                             threads: int, no_all_ack: bool, unclean: bool,
                                                             lease: int, extra: frozenset[str]) -> None:
    workloads = tuple(w for w in SIM_WORKLOADS if w == "queue" or w in extra)
    cfg = SimConfig(seed=seed, seconds=seconds, bugs=bugs, threads=threads, lease_timeout_ms=lease,
                    all_ack_in_sync_state_set=not no_all_ack, enable_elect_unclean_master=unclean,
                    workloads=workloads)
    steps = [{"at_s": 1.0, "f": "kill", "value": "b1-2"}, {"at_s": 2.0, "f": "start", "value": "b1-2"}]
    doc = repro_spec(cfg, steps, name="x")
    spec = spec_from_dict(yaml.safe_load(yaml.safe_dump(doc)), file="repro-spec.yaml")
    opts = validate_spec(spec)
    assert opts.bugs == tuple(sorted(bugs)) and opts.lease_timeout_ms == lease
    assert opts.all_ack_in_sync_state_set is not no_all_ack and spec.time_limit_s == seconds
    assert spec.seed == seed and spec.concurrency == threads and len(spec.nemesis.schedule or ()) == 2
    assert [w.name for w in spec.workloads] == list(workloads)  # every simulated workload runs for real too
