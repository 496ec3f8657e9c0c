"""bench/mutants.py: the catalogue matches the tree at HEAD, each mutant compiles and differs, every component class
of issue 31 is covered, the git plumbing touches neither work tree nor index, the report's figures, bad flags."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "mutants.py"
_spec = importlib.util.spec_from_file_location("mutants", BENCH)
assert _spec is not None and _spec.loader is not None
mb: Any = importlib.util.module_from_spec(_spec)
sys.modules["mutants"] = mb
_spec.loader.exec_module(mb)


def _at_head(path: str) -> str:
    out = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"{path} is not in HEAD: {out.stderr}"
    return out.stdout


@pytest.mark.parametrize("name", sorted(mb.CATALOGUE))
def test_every_mutant_matches_once_at_head_and_still_compiles(name: str) -> None:
    m = mb.CATALOGUE[name]
    source = _at_head(m.file)
    assert source.count(m.old) == 1
    mutated = mb.apply_mutant(source, m)  # compile()s the result
    assert mutated != source and mutated.count(m.new) >= 1


def test_mutated_files_name_nothing_undefined(tmp_path: Path) -> None:
    # compile() accepts a name that does not exist; ruff's F821 does not
    for m in mb.MUTANTS:
        (tmp_path / f"{m.name}.py").write_text(mb.apply_mutant(_at_head(m.file), m))
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "F821",
                          str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout


def test_mutants_are_distinct() -> None:
    assert len(mb.CATALOGUE) == len(mb.MUTANTS) >= 20
    assert len({(m.file, m.old) for m in mb.MUTANTS}) == len(mb.MUTANTS)
    results = {hashlib.sha256(mb.apply_mutant(_at_head(m.file), m).encode()).hexdigest() for m in mb.MUTANTS}
    assert len(results) == len(mb.MUTANTS)
    assert len({m.models for m in mb.MUTANTS}) == len(mb.MUTANTS)


def test_every_component_class_of_the_issue_is_covered_and_every_class_used() -> None:
    used = {m.component for m in mb.MUTANTS}
    assert used >= mb.ISSUE_COMPONENTS
    assert used == set(mb.COMPONENTS)
    assert {"controller/state-machine", "controller/requests", "controller/scan", "controller/elect-policy",
            "controller/heartbeat", "broker/confirm-ack", "broker/ha-transfer", "broker/truncation",
            "broker/role-change", "broker/registration", "broker/store-recovery", "raft"} <= mb.ISSUE_COMPONENTS


@pytest.mark.parametrize(("field", "value", "message"), [
    ("name", "Bad_Name", "lower-case"), ("name", "control", "lower-case"), ("component", "broker/x", "component"),
    ("file", "harness/cluster.py", "system_under_test"), ("file", "system_under_test/../x.py", "system_under_test"),
    ("old", "", "non-empty"), ("new", "x = 1", "differ"), ("models", " ", "models"),
], ids=["case", "reserved", "component", "outside", "dotdot", "empty-old", "same", "no-models"])
def test_a_malformed_row_is_refused_naming_the_field(field: str, value: str, message: str) -> None:
    good = {"name": "ok-row", "component": "raft", "file": "system_under_test/raft/log.py", "old": "x = 1",
            "new": "x = 2", "models": "m", "symptom": "s"}
    with pytest.raises(ValueError, match=message):
        mb.Mutant(**{**good, field: value})


def test_apply_refuses_text_that_is_missing_twice_or_does_not_compile() -> None:
    m = mb.Mutant("ok-row", "raft", "system_under_test/raft/log.py", "a = 1\n", "a = (\n", "m", "s")
    with pytest.raises(mb.MutantError, match="occurs 0 times"):
        mb.apply_mutant("b = 2\n", m)
    with pytest.raises(mb.MutantError, match="occurs 2 times"):
        mb.apply_mutant("a = 1\na = 1\n", m)
    with pytest.raises(mb.MutantError, match="does not compile"):
        mb.apply_mutant("a = 1\n", m)


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A tiny repository of its own: one commit with a cluster file, a second file staged but not committed, and an
    edit in the work tree -- what the plumbing must leave as it found it."""
    r = tmp_path / "repo"
    (r / "system_under_test").mkdir(parents=True)
    _git(r, "init", "-q")
    _git(r, "config", "user.email", "t@example.invalid")
    _git(r, "config", "user.name", "t")
    (r / "system_under_test" / "core.py").write_text("LIMIT = 3\n\n\ndef ok(n):\n    return n <= LIMIT\n")
    (r / "system_under_test" / "other.py").write_text("X = 1\n")
    _git(r, "add", ".")
    _git(r, "commit", "-q", "-m", "base")
    (r / "system_under_test" / "staged.py").write_text("Y = 2\n")
    _git(r, "add", "system_under_test/staged.py")
    (r / "system_under_test" / "core.py").write_text("LIMIT = 4  # an edit nobody committed\n")
    return r


OFF_BY_ONE = mb.Mutant("limit-off-by-one", "raft", "system_under_test/core.py", "return n <= LIMIT",
                       "return n < LIMIT", "m", "s")


def _snapshot(repo: Path) -> tuple[bytes, str, str, str]:
    return ((repo / ".git" / "index").read_bytes(), _git(repo, "status", "--porcelain"),
            (repo / "system_under_test" / "core.py").read_text(), _git(repo, "rev-parse", "HEAD"))


def test_the_mutant_commit_is_made_without_touching_work_tree_or_index(repo: Path) -> None:
    before = _snapshot(repo)
    base = _git(repo, "rev-parse", "HEAD")
    commit = mb.mutant_commit(repo, "HEAD", OFF_BY_ONE)
    assert _snapshot(repo) == before
    assert _git(repo, "rev-parse", f"{commit}^") == base
    assert _git(repo, "rev-parse", mb.REF_PREFIX + OFF_BY_ONE.name) == commit
    assert _git(repo, "diff", "--name-only", base, commit) == "system_under_test/core.py"
    assert _git(repo, "show", f"{commit}:system_under_test/core.py").endswith("return n < LIMIT")
    assert _git(repo, "show", f"{commit}:system_under_test/other.py") == "X = 1"
    assert "staged.py" not in _git(repo, "ls-tree", "-r", "--name-only", commit)  # the base, not the index
    assert mb.mutant_commit(repo, base, OFF_BY_ONE, update_ref=False) == commit  # same mutant, same base: same sha


def test_a_mutant_that_does_not_apply_makes_no_commit_and_no_ref(repo: Path) -> None:
    before = _snapshot(repo)
    stale = mb.Mutant("stale-row", "raft", "system_under_test/core.py", "return n >= LIMIT", "return n > LIMIT",
                      "m", "s")
    with pytest.raises(mb.MutantError, match=r"stale-row.*0 times"):
        mb.mutant_commit(repo, "HEAD", stale)
    missing = mb.Mutant("missing-file", "raft", "system_under_test/gone.py", "a", "b", "m", "s")
    with pytest.raises(mb.MutantError, match="does not exist"):
        mb.mutant_commit(repo, "HEAD", missing)
    with pytest.raises(mb.MutantError):
        mb.resolve_base(repo, "no-such-revision")
    assert _snapshot(repo) == before
    assert subprocess.run(["git", "for-each-ref", "refs/splitbrain"], cwd=repo, capture_output=True,
                          text=True).stdout == ""


def test_a_real_mutant_builds_in_a_clone_of_this_repository(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--no-hardlinks", str(ROOT), str(clone))
    before = _snapshot_plain(clone)
    m = mb.CATALOGUE["confirm-max-not-min"]
    commit = mb.mutant_commit(clone, "HEAD", m)
    assert _snapshot_plain(clone) == before
    assert _git(clone, "diff", "--name-only", "HEAD", commit) == m.file
    assert m.new in _git(clone, "show", f"{commit}:{m.file}")


def _snapshot_plain(repo: Path) -> tuple[bytes, str]:
    return (repo / ".git" / "index").read_bytes(), _git(repo, "status", "--porcelain")


@pytest.mark.parametrize("mode", ["random", "guided"])
def test_the_search_spec_is_a_valid_spec(mode: str) -> None:
    from harness.commands._parts import validate_spec
    from harness.spec import spec_from_dict

    raw = mb.search_spec(run_s=60, interval_s=8)
    validate_spec(spec_from_dict({**raw, "nemesis": {**raw["nemesis"], "mode": mode}, "seed": 1}, file="mutants"))
    assert raw["cluster"]["all_ack_in_sync_state_set"] is True
    assert raw["cluster"]["enable_elect_unclean_master"] is False
    assert "schedule" not in raw["nemesis"]


def test_the_lazyfs_search_spec_differs_only_in_store_fs() -> None:
    from harness.commands._parts import validate_spec
    from harness.spec import spec_from_dict

    plain = mb.search_spec(run_s=60, interval_s=8)
    lazy = mb.search_spec(run_s=60, interval_s=8, store_fs="lazyfs")
    assert "store_fs" not in plain["cluster"]  # searches recorded before the flag keep their key
    assert lazy == {**plain, "cluster": {**plain["cluster"], "store_fs": "lazyfs"}}
    validate_spec(spec_from_dict({**lazy, "seed": 1}, file="mutants"))


def _search(found: bool, at: float | None = None, kinds: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"seed": 1, "found": found, "detect_s": at, "anomalies": list(kinds), "attempts": []}


def _config(**kw: Any) -> dict[str, Any]:
    return {"base": "abc", "methods": ["random", "guided"], "seeds": 1, "budget_s": 180.0, "run_s": 60.0, **kw}


CAT = {n: mb.CATALOGUE[n] for n in ("ack-any-member", "hb-half-lease", "raft-vote-ignores-log")}


def test_report_kill_rates_one_method_kills_and_anomaly_kinds() -> None:
    raw = {"control": {"random": [_search(False)], "guided": [_search(False)]},
           "ack-any-member": {"random": [_search(True, 20.0, ("lost-write",))],
                              "guided": [_search(True, 5.0, ("lost-write", "unseen"))]},
           "hb-half-lease": {"random": [_search(False)], "guided": [_search(True, 70.0, ("inconsistent-offsets",))]},
           "raft-vote-ignores-log": {"random": [_search(False)], "guided": [_search(False)]}}
    doc = mb.build_report(raw, _config(), minutes=3.0, catalogue=CAT)
    assert doc["mutants"] == 3 and doc["killed"] == ["ack-any-member", "hb-half-lease"]
    assert doc["kill_rate"] == 0.667 and doc["kill_rate_per_method"] == {"random": 0.333, "guided": 0.667}
    assert doc["killed_by_one_method_only"] == {"random": [], "guided": ["hb-half-lease"]}
    assert doc["not_killed"] == ["raft-vote-ignores-log"] and doc["control_found"] is False
    assert doc["rows"]["ack-any-member"]["guided"]["anomalies"] == ["lost-write", "unseen"]
    assert doc["rows"]["ack-any-member"]["simulation"] is None and doc["simulation"] == "not run"
    assert doc["kill_rate_without_simulation"] == 0.667 and doc["kill_rate_with_simulation"] is None
    assert doc["target"]["verdict"] == "missed with random, guided only"
    text = "\n".join(mb.table(doc))
    assert "found 1/1 5.0s [lost-write,unseen]" in text and "simulation" not in text.splitlines()[1]
    assert "killed by guided only: hb-half-lease" in text and "control: not found" in text


def test_a_found_control_voids_the_kill_rate() -> None:
    raw = {"control": {"random": [_search(True, 3.0, ("lost-write",))]},
           "ack-any-member": {"random": [_search(True, 3.0, ("lost-write",))]}}
    doc = mb.build_report(raw, _config(methods=["random"]), minutes=1.0, catalogue=CAT)
    assert doc["control_found"] is True and doc["target"]["verdict"].startswith("void")
    assert "CONTROL FOUND" in "\n".join(mb.table(doc))
    subset = mb.build_report({"ack-any-member": raw["ack-any-member"]}, _config(methods=["random"]), minutes=1.0,
                             catalogue=CAT)
    assert subset["control_found"] is None and "on this subset" in subset["target"]["verdict"]
    assert "control: not run" in "\n".join(mb.table(subset))


@given(st.dictionaries(st.sampled_from(sorted(CAT)),
                       st.tuples(st.booleans(), st.booleans()), min_size=1))
def test_report_figures_agree_with_the_searches(outcomes: dict[str, tuple[bool, bool]]) -> None:
    raw = {n: {"random": [_search(r, 1.0 if r else None)], "guided": [_search(g, 2.0 if g else None)]}
           for n, (r, g) in outcomes.items()}
    doc = mb.build_report(raw, _config(), minutes=0.0, catalogue=CAT)
    killed = {n for n, (r, g) in outcomes.items() if r or g}
    assert set(doc["killed"]) == killed and set(doc["not_killed"]) == set(outcomes) - killed
    assert doc["kill_rate"] == round(len(killed) / len(outcomes), 3)
    assert set(doc["killed_by_one_method_only"]["random"]) == {n for n, (r, g) in outcomes.items() if r and not g}
    assert set(doc["killed_by_one_method_only"]["guided"]) == {n for n, (r, g) in outcomes.items() if g and not r}


@pytest.mark.parametrize("argv", [["--mutants", "nope"], ["--mutants", "ack-any-member,ack-any-member"],
                                  ["--methods", "random,simulator"], ["--methods", ""], ["--seeds", "0"],
                                  ["--budget-s", "10", "--run-s", "30"], ["--run-s", "0"], ["--interval-s", "0"],
                                  ["--budget-s", "many"], ["--no-such-flag"], ["--base", "no-such-revision"],
                                  ["--ignore-kinds", "Lost Write"], ["--sim-seconds", "0"],
                                  ["--methods", "simulation", "--budget-s", "0"]],
                         ids=["mutant", "twice", "unknown-method", "no-method", "seeds", "budget", "run", "interval",
                              "not-a-number", "unknown-flag", "base", "ignore-kinds", "sim-seconds", "sim-budget"])
def test_bad_flags_exit_2_with_one_line(argv: list[str]) -> None:
    out = subprocess.run([sys.executable, str(BENCH), *argv], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("mutants: ")


def test_list_names_every_mutant(capsys: pytest.CaptureFixture[str]) -> None:
    assert mb.main(["--list"]) == 0
    text = capsys.readouterr().out
    assert all(f"{n} [{m.component}]" in text for n, m in mb.CATALOGUE.items())


def test_a_finished_search_is_reused_only_for_the_same_spec_and_mutant_commit(tmp_path: Path) -> None:
    settings = {"budget_s": 180.0, "run_s": 60.0, "interval_s": 8.0, "coverage_s": 30.0}
    spec = mb.search_spec(run_s=60.0, interval_s=8.0)
    done = _search(True, 12.0, ("lost-write",))
    mb.Progress(tmp_path / "progress.jsonl", settings).add("ack-any-member", "guided", {"spec": spec,
                                                                                         "revision": "aaa"}, done)
    again = mb.Progress(tmp_path / "progress.jsonl", settings)
    assert again.get("ack-any-member", "guided", 1, {"spec": spec, "revision": "aaa"}) == done
    assert again.get("ack-any-member", "guided", 1, {"spec": spec, "revision": "bbb"}) is None
    other = mb.search_spec(run_s=60.0, interval_s=5.0)
    assert again.get("ack-any-member", "guided", 1, {"spec": other, "revision": "aaa"}) is None
    assert mb.Progress(tmp_path / "progress.jsonl", {**settings, "budget_s": 60.0}).get(
        "ack-any-member", "guided", 1, {"spec": spec, "revision": "aaa"}) is None


def test_runs_invalid_only_through_ignored_kinds_are_shown_beside_a_miss() -> None:
    miss = {"seed": 1, "found": False, "detect_s": None, "anomalies": [],
            "attempts": [{"anomalies": ["unavailable"]}, {"anomalies": []}]}
    raw = {"elect-designate-unchecked": {"random": [miss]}}
    cat = {"elect-designate-unchecked": mb.CATALOGUE["elect-designate-unchecked"]}
    doc = mb.build_report(raw, _config(methods=["random"], ignore_kinds=["unavailable"]), minutes=0.0, catalogue=cat)
    assert doc["rows"]["elect-designate-unchecked"]["random"]["ignored_runs"] == 1 and doc["killed"] == []
    text = "\n".join(mb.table(doc))
    assert "1 run(s) with ignored kinds" in text and "kinds not counted as kills: unavailable" in text


def _sim(found: bool, cpu: float | None = None, *, kinds: tuple[str, ...] = (), probe: dict[str, Any] | None = None,
         status: str = "searched") -> dict[str, Any]:
    out: dict[str, Any] = {"seed": 1, "found": found, "detect_s": cpu, "anomalies": list(kinds), "status": status,
                           "budget_unit": "cpu_s", "seeds_run": 7, "simulated_s": 420.0, "cpu_s": cpu or 180.0,
                           "ignored_seeds": [], "unknown_seeds": []}
    if found:
        out.update({"sim_seed": 1003, "detect_sim_s": 41.5, "simulated_s_to_detect": 221.5,
                    "replay": "splitbrain sim --seed 1003"})
    if probe is not None:
        out["exercised"] = probe
    return out


def test_report_simulation_column_rates_with_and_without_it_and_probe_readings() -> None:
    cat = {**CAT, "confirm-max-not-min": mb.CATALOGUE["confirm-max-not-min"]}
    raw = {"control": {"random": [_search(False)], "simulation": [_sim(False, probe=None)]},
           "ack-any-member": {"random": [_search(True, 20.0, ("lost-write",))],
                              "simulation": [_sim(True, 3.2, kinds=("lost-write",))]},
           "hb-half-lease": {"random": [_search(False)], "simulation": [_sim(True, 9.0, kinds=("unseen",))]},
           "raft-vote-ignores-log": {"random": [_search(False)],
                                     "simulation": [_sim(False, probe={"loaded": True, "hit_lines": []})]},
           "confirm-max-not-min": {"random": [_search(True, 50.0, ("lost-write",))],
                                   "simulation": [_sim(False, status="not-in-revision")]}}
    doc = mb.build_report(raw, _config(methods=["random", "simulation"]), minutes=1.0, catalogue=cat)
    assert doc["killed"] == ["ack-any-member", "hb-half-lease", "confirm-max-not-min"]
    assert doc["kill_rate"] == 0.75 and doc["kill_rate_with_simulation"] == 0.75
    assert doc["kill_rate_without_simulation"] == 0.5
    # the simulator's rate is over what it could search: the revision without it is not a miss
    assert doc["kill_rate_per_method"] == {"random": 0.5, "simulation": 0.667}
    assert doc["killed_only_by_simulation"] == ["hb-half-lease"]
    assert doc["killed_only_by_chaos"] == ["confirm-max-not-min"]
    assert doc["rows"]["confirm-max-not-min"]["simulation"] == mb.NOT_IN_REVISION
    sim = doc["simulation"]
    assert sim["not_in_revision"] == ["confirm-max-not-min"]
    assert sim["not_simulated"] == {"raft-vote-ignores-log": "not reached"} and sim["ran_not_found"] == []
    cell = doc["rows"]["ack-any-member"]["simulation"]
    assert cell["sim_seed"] == 1003 and cell["replay"] == "splitbrain sim --seed 1003" and cell["coverage"] == "ran"
    text = "\n".join(mb.table(doc))
    assert "found 1/1 3.2 cpu-s, seed 1003 @41.5 sim-s" in text and "code not reached" in text
    assert "without the simulator (chaos only): 50%; with it (chaos or simulation): 75%" in text


@given(st.text(alphabet="ab\n", max_size=30), st.text(alphabet="xy\n", min_size=1, max_size=12),
       st.text(alphabet="ab\n", max_size=30))
def test_mutated_lines_are_the_lines_the_replacement_occupies(before: str, new: str, after: str) -> None:
    old = "OLD"
    mutant = mb.Mutant(name="x", component="raft", file="system_under_test/f.py", old=old, new=new, models="m",
                       symptom="s")
    first, last = mb.mutated_lines(before + old + after, mutant)
    mutated = (before + new + after).split("\n")
    assert first == before.count("\n") + 1 and first <= last
    body = new[:-1] if new.endswith("\n") else new
    assert "\n".join(mutated[first - 1:last]).find(body) >= 0


@pytest.mark.parametrize(("probe", "reading"), [(None, None), ({"error": "x"}, "probe failed"),
                                                ({"loaded": False, "hit_lines": []}, "not loaded"),
                                                ({"loaded": True, "hit_lines": []}, "not reached"),
                                                ({"loaded": True, "hit_lines": [12]}, "ran")])
def test_probe_readings(probe: dict[str, Any] | None, reading: str | None) -> None:
    assert mb.coverage_of(probe) == reading


def test_sim_args_name_every_fault_kind_the_simulator_makes() -> None:
    from system_under_test.sim.faults import FAULT_KINDS

    args = mb.sim_args(seconds=60)
    assert set(args[args.index("--faults") + 1].split(",")) == set(FAULT_KINDS)
    assert "--unsafe" not in args and "--swarm" not in args
    assert mb.sim_args(seconds=60, swarm=True) == [*args, "--swarm"]  # the kinds stay the pool a seed draws from
