"""Spec loading: defaults, overrides, round trip through test.yaml, and errors that name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.spec import SpecError, load_spec, resolved_yaml, spec_from_dict

BASE: dict[str, Any] = {
    "name": "queue-partition",
    "backend": "local",
    "nodes": {"controllers": 3, "broker_sets": {"count": 2, "replicas": 3}},
    "cluster": {"flush": "sync"},
    "workloads": ["queue", {"name": "broker-ids", "options": {"keys": 4}}],
    "nemesis": {"packages": ["partition", "kill"], "interval_s": 5, "targets": ["one", "minority"]},
    "concurrency": 6,
    "rate": 50,
    "time_limit_s": 30,
    "phases": {"recovery_s": 5, "final_drain_s": 10},
    "seed": 42,
    "test_count": 2,
    "leave_running": False,
}


def write(tmp_path: Path, doc: Any) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_full_spec_loads(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, BASE))
    assert spec.nodes.controllers == ("c1", "c2", "c3")
    assert spec.nodes.broker_sets == (("b1-1", "b1-2", "b1-3"), ("b2-1", "b2-2", "b2-3"))
    assert [w.name for w in spec.workloads] == ["queue", "broker-ids"]
    assert spec.workloads[1].options == {"keys": 4}
    assert spec.nemesis.packages == ("partition", "kill") and spec.nemesis.interval_s == 5.0
    assert (spec.concurrency, spec.rate, spec.time_limit_s, spec.seed, spec.test_count) == (6, 50.0, 30.0, 42, 2)


def test_minimal_spec_gets_defaults_and_a_seed(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, {"name": "t"}))
    assert spec.backend == "local" and spec.concurrency == 5 and spec.nemesis.packages == ()
    assert isinstance(spec.seed, int) and 0 <= spec.seed < 2**31
    assert spec_from_dict({"name": "t"}, seed_source=lambda n: 1234).seed == 1234


def test_resolved_yaml_round_trips(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, {**BASE, "seed": None}))
    again = load_spec(write(tmp_path, yaml.safe_load(resolved_yaml(spec))))
    assert again == spec


def test_explicit_node_lists(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, {**BASE, "nodes": {"controllers": ["n1", "n2", "n3"],
                                                         "broker_sets": [["n4", "n5"], ["n6"]]}}))
    assert spec.nodes.all == ("n1", "n2", "n3", "n4", "n5", "n6")


def test_overrides(tmp_path: Path) -> None:
    p = write(tmp_path, BASE)
    spec = load_spec(p, {
        "time_limit": 7, "concurrency": 2, "rate": 9.5, "nemesis": "pause", "workload": "queue", "seed": 5,
        "test_count": 3, "leave_running": True, "backend": "docker", "nodes": None,
    })
    assert (spec.time_limit_s, spec.concurrency, spec.rate, spec.seed, spec.test_count) == (7.0, 2, 9.5, 5, 3)
    assert spec.nemesis.packages == ("pause",) and spec.nemesis.interval_s == 5.0
    assert [w.name for w in spec.workloads] == ["queue"] and spec.leave_running and spec.backend == "docker"
    spec = load_spec(p, {"workload": "broker-ids", "nemesis": "none"})
    assert spec.workloads[0].options == {"keys": 4} and spec.nemesis.packages == ()
    names = ",".join(f"h{i}" for i in range(9))
    spec = load_spec(p, {"nodes": names})
    assert spec.nodes.controllers == ("h0", "h1", "h2") and spec.nodes.broker_sets[1] == ("h6", "h7", "h8")


# (id, change to BASE as (dotted key, value), key named in the error)
BAD: list[tuple[str, str, Any, str]] = [
    ("name-missing", "name", "<delete>", "name"),
    ("name-bad-chars", "name", "a b/c", "name"),
    ("backend", "backend", "k8s", "backend"),
    ("controllers-zero", "nodes.controllers", 0, "nodes.controllers"),
    ("controllers-ten", "nodes.controllers", 10, "nodes.controllers"),
    ("replicas", "nodes.broker_sets.replicas", 6, "nodes.broker_sets.replicas"),
    ("broker-count", "nodes.broker_sets.count", -1, "nodes.broker_sets.count"),
    ("node-name", "nodes.controllers", ["ok", "Bad_Name"], "nodes.controllers[1]"),
    ("dup-node", "nodes.controllers", ["x", "x"], "nodes"),
    ("cluster-not-map", "cluster", [1, 2], "cluster"),
    ("workloads-empty", "workloads", [], "workloads"),
    ("workload-options", "workloads", [{"name": "q", "options": 3}], "workloads[0].options"),
    ("interval-zero", "nemesis.interval_s", 0, "nemesis.interval_s"),
    ("interval-string", "nemesis.interval_s", "10s", "nemesis.interval_s"),
    ("target-unknown", "nemesis.targets", ["everyone"], "nemesis.targets[0]"),
    ("package-name", "nemesis.packages", ["bad name"], "nemesis.packages[0]"),
    ("concurrency-zero", "concurrency", 0, "concurrency"),
    ("concurrency-float", "concurrency", 2.5, "concurrency"),
    ("rate-zero", "rate", 0, "rate"),
    ("time-limit-negative", "time_limit_s", -1, "time_limit_s"),
    ("recovery", "phases.recovery_s", 99999, "phases.recovery_s"),
    ("seed-negative", "seed", -3, "seed"),
    ("seed-bool", "seed", True, "seed"),
    ("test-count", "test_count", 0, "test_count"),
    ("leave-running", "leave_running", "yes", "leave_running"),
    ("unknown-top", "concurency", 3, "concurency"),
    ("unknown-nested", "nemesis.intervals", 3, "nemesis.intervals"),
]


def with_change(key: str, value: Any) -> dict[str, Any]:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    *path, last = key.split(".")
    d = doc
    for k in path:
        d = d[k]
    if value == "<delete>":
        del d[last]
    else:
        d[last] = value
    return doc


@pytest.mark.parametrize("key,value,named", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_spec_names_the_field(tmp_path: Path, key: str, value: Any, named: str) -> None:
    p = write(tmp_path, with_change(key, value))
    with pytest.raises(SpecError) as info:
        load_spec(p)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.key == named, str(err)
    assert str(p) in str(err) and named in str(err) and "expected" in str(err)


def test_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="did you mean 'concurrency'"):
        load_spec(write(tmp_path, with_change("concurency", 3)))
    with pytest.raises(SpecError, match="did you mean 'time_limit'"):
        load_spec(write(tmp_path, BASE), {"time_limt": 3})


def test_file_and_yaml_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="readable"):
        load_spec(tmp_path / "missing.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="valid YAML"):
        load_spec(p)
    p.write_text("- a list\n")
    with pytest.raises(SpecError, match="mapping at the top"):
        load_spec(p)
    with pytest.raises(SpecError, match="--nodes"):
        load_spec(write(tmp_path, BASE), {"nodes": "a,b"})


# Hypothesis: any numeric field set to a value outside its range (or of the wrong type) is a SpecError
# naming that field.
RANGES: dict[str, tuple[float, float, bool]] = {  # key -> (lo, hi, integer)
    "concurrency": (1, 1024, True),
    "test_count": (1, 10_000, True),
    "nodes.controllers": (1, 9, True),
    "nodes.broker_sets.count": (0, 16, True),
    "nodes.broker_sets.replicas": (1, 5, True),
    "nemesis.interval_s": (0.1, 3600, False),
    "nemesis.guided_load_max": (1, 10, False),
    "phases.recovery_s": (0, 3600, False),
    "phases.final_drain_s": (0, 3600, False),
    "time_limit_s": (0, 86_400, False),
    "rate": (0, 1_000_000, False),
}


@st.composite
def bad_field(draw: st.DrawFn) -> tuple[str, Any]:
    key = draw(st.sampled_from(sorted(RANGES)))
    lo, hi, integer = RANGES[key]
    value = draw(st.one_of(
        st.integers(max_value=int(lo) - 1) if lo == int(lo) else st.floats(max_value=lo - 1e-6, allow_nan=False),
        st.integers(min_value=int(hi) + 1),
        st.text(max_size=5),
        st.lists(st.integers(), max_size=2),
        st.booleans(),
        st.none(),
        *( [st.floats(min_value=lo + 0.1, max_value=hi - 0.1).filter(lambda x: x != int(x))] if integer else []),
    ))
    return key, value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change=bad_field())
def test_hypothesis_bad_values_name_the_field(tmp_path: Path, change: tuple[str, Any]) -> None:
    key, value = change
    doc = with_change(key, value)
    try:
        spec_from_dict(doc, file="gen.yaml")
    except SpecError as err:
        assert err.key.startswith(key.split("[")[0]), (key, value, str(err))
        assert err.file == "gen.yaml"
    else:
        raise AssertionError(f"{key}={value!r} was accepted")


def test_examples_load() -> None:
    examples = Path(__file__).resolve().parents[3] / "examples"
    spec = load_spec(examples / "queue-partition.yaml", {"seed": 3})
    assert spec.name == "queue-partition" and spec.seed == 3 and len(spec.nodes.all) == 6
