"""Faults in words (pure): every f has words, grudges read as what was cut, faults come and go with their undo,
and no value of any shape ever reads as a repr."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis import grudge as gr
from nemesis.faults import FAULTS
from nemesis.packages import KINDS
from nemesis.packet_behavior import PRESETS, netem_args, rate_of, shaper_args
from nemesis.schedule import KNOWN_FS, PARTITION_KINDS
from nemesis.words import PARTITION_WORDS, WORDS, Fault, in_words, phrase, step
from systems.splitbrain.selectors import SELECTORS

NODES = ["b1-1", "b1-2", "b1-3", "c1", "c2", "c3"]
REPR = set("{}[]'\"")


def run(*records: tuple[Any, ...]) -> list[str]:
    """The words after a sequence of (type, f, value[, error]) nemesis records."""
    effect: tuple[Fault, ...] = ()
    for r in records:
        effect = step(effect, *r)
    return in_words(effect)


def partition(kind: str, grudge: gr.Grudge) -> tuple[str, str, dict[str, Any]]:
    return ("info", "start-partition", {"kind": kind, "grudge": gr.describe(grudge)})


# -- the tables cover the vocabulary --------------------------------------------------------------


def test_every_f_a_nemesis_handles_has_words() -> None:
    nemeses = {k.nemesis for k in KINDS.values()}  # every nemesis class a package builds
    handled = set().union(*(n.FS for n in nemeses))  # type: ignore[attr-defined]
    assert len(nemeses) == 7 and not handled - set(WORDS), sorted(handled - set(WORDS))
    assert set(WORDS) == set(FAULTS) == KNOWN_FS  # one entry per row of the fault table, no more (test_faults.py
    # holds the table to every nemesis)


def test_every_partition_kind_has_words() -> None:
    assert set(PARTITION_WORDS) == set(PARTITION_KINDS) | {c.name for c in SELECTORS.cuts}


# -- what the words say ---------------------------------------------------------------------------


def test_the_issue_example() -> None:
    assert run(partition("isolate", gr.isolate(["b1-3", "c2"], NODES)), ("info", "kill", ["b1-2"]),
               ("info", "kill", ["c1"])) == ["isolate b1-3, c2", "kill b1-2, c1"]


@pytest.mark.parametrize("kind,grudge,words", [
    ("isolate-controller-leader", gr.isolate(["c2"], NODES), "isolate c2"),
    ("isolate-master-from-slaves", gr.isolate_from("b1-1", ["b1-2", "b1-3"]), "cut b1-1 from b1-2, b1-3"),
    ("isolate-master-from-controllers", gr.isolate_from("b1-1", ["c1", "c2", "c3"]), "cut b1-1 from c1, c2, c3"),
    ("random-halves", gr.complete_grudge([["b1-1", "c1", "c3"], ["b1-2", "b1-3", "c2"]]),
     "split b1-1, c1, c3 / b1-2, b1-3, c2"),
    ("bridge", gr.complete_grudge([["b1-1", "c1"], ["b1-3", "c2", "c3"]]), "bridge b1-1, c1 / b1-3, c2, c3"),
    ("majorities-ring", gr.majorities_ring(NODES, random.Random(1)), "majorities ring of 6 nodes"),
    ("one-way", gr.one_way(["c1"], NODES), "one-way c1 -> b1-1, b1-2, b1-3, c2, c3"),
    ("grudge", {"c1": frozenset({"c2"})}, "one-way c2 -> c1"),
])
def test_partition_kinds_read_as_what_was_cut(kind: str, grudge: gr.Grudge, words: str) -> None:
    assert run(partition(kind, grudge)) == [words]


@pytest.mark.parametrize("f,value,words", [
    ("bump-clock", {"targets": "one", "delta_ms": -60000, "nodes": ["c3"], "offsets": {"c3": {"offset_ms": 1}}},
     "clock -60s c3"),
    ("skew-clock", {"targets": "one", "rate": 2.0, "nodes": ["c1"], "offsets": {}}, "clock x2 c1"),
    ("strobe-clock", {"delta_ms": 200, "period_ms": 50, "nodes": ["b1-1"]}, "clock strobe 200ms b1-1"),
    ("start-packet", {"nodes": ["b1-1"], "mechanism": "netem", "netem": "delay 50ms 10ms distribution normal"},
     "net delay b1-1"),
    ("start-packet", {"nodes": ["c1"], "mechanism": "nfqueue", "shaper": "--delay-ms 0 --jitter-ms 0 --loss 0.2 "
                      "--duplicate 0", "rate": "1mbit"}, "net loss+rate c1"),
    ("start-disk", {"fault": "slow-fsync", "action": "delay(100)", "nodes": ["b1-2", "c1"],
                    "results": {"b1-2": "ok", "c1": "skipped: brokers only"}}, "disk slow-fsync b1-2"),
    ("arm-failpoint", {"name": "store.write", "results": {"b1-1": "ok"}}, "arm b1-1 at store.write"),
    ("pause", ["c3"], "pause c3"),
])
def test_lasting_faults_read_in_short_words(f: str, value: Any, words: str) -> None:
    assert run(("info", f, value)) == [words]


# -- when a fault is in effect --------------------------------------------------------------------


def test_a_fault_shows_from_its_completion_until_its_undo_completes() -> None:
    kill = [("invoke", "kill", "minority"), ("info", "kill", ["b1-2", "c1"])]
    assert run(kill[0]) == []  # invoked: not yet done, its nodes not yet resolved
    assert run(*kill) == ["kill b1-2, c1"]
    assert run(*kill, ("invoke", "start", None)) == ["kill b1-2, c1"]
    assert run(*kill, ("invoke", "start", None), ("info", "start", ["c1"])) == ["kill b1-2"]  # only what started
    assert run(*kill, ("info", "start", ["b1-2", "c1"])) == []
    assert run(*kill, ("info", "start", "dead", "ControlError: boom")) == ["kill b1-2, c1"]  # failed: still down


def test_a_fault_that_failed_never_shows() -> None:
    assert run(("info", "start-partition", {"kind": "isolate", "targets": "one"}, "RuntimeError: no iptables")) == []
    assert run(("info", "kill", [])) == []  # resolved to no node


def test_a_new_partition_replaces_the_old_one_and_a_heal_takes_all() -> None:
    first, second = partition("isolate", gr.isolate(["c1"], NODES)), partition("isolate", gr.isolate(["c2"], NODES))
    assert run(first, second, ("info", "kill", ["b1-1"])) == ["isolate c2", "kill b1-1"]
    assert run(first, ("info", "kill", ["b1-1"]), ("info", "stop-partition", "healed")) == ["kill b1-1"]
    assert run(first, ("info", "start-partition", {"kind": "isolate", "grudge": {}})) == []  # healed, cut no one
    clock = ("info", "bump-clock", {"delta_ms": 5000, "nodes": ["c1"]})
    assert run(clock, ("info", "skew-clock", {"rate": 0.5, "nodes": ["c2"]}), ("info", "check-clock-offsets", {})) == [
        "clock +5s c1", "clock x0.5 c2"]
    assert run(clock, ("info", "reset-clock", {"reset": ["c1"], "unreachable": {}})) == []


def test_a_self_healing_fault_shows_while_it_runs() -> None:
    crash = ("invoke", "crash-at", {"name": "raft.before_apply", "targets": "controllers:one", "timeout_s": 5})
    assert run(crash) == ["crash controllers:one at raft.before_apply"]
    assert run(crash, ("info", "crash-at", {"name": "raft.before_apply", "nodes": {}})) == []
    reg = ("invoke", "registration-crash", {"failpoint": "registration.after_meta_write"})
    assert run(reg) == ["registration crash at registration.after_meta_write"]
    assert run(reg, ("info", "registration-crash", {}, "TimeoutError: x")) == []  # over, failed or not


# -- never a repr ---------------------------------------------------------------------------------

name = st.sampled_from([*NODES, "controllers:one", "masters", "one"])
safe_text = st.text(alphabet=st.characters(blacklist_characters="{}[]'\"", blacklist_categories=("Cs",)),
                    max_size=12)
garbage = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | safe_text,
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(safe_text, inner, max_size=4),
                       max_leaves=12)
grudges = st.dictionaries(name, st.lists(name, max_size=4), max_size=6)
shaped = st.fixed_dictionaries({}, optional={
    "kind": st.sampled_from(PARTITION_KINDS) | safe_text, "grudge": grudges | garbage,
    "nodes": st.lists(name) | garbage,
    "targets": name | garbage, "delta_ms": st.integers(-10**6, 10**6) | garbage, "rate": st.floats() | garbage,
    "results": st.dictionaries(name, st.sampled_from(["ok", "error: x"])) | garbage, "name": safe_text | garbage,
    "netem": safe_text, "shaper": safe_text, "fault": safe_text | garbage, "failpoint": safe_text | garbage,
    "mode": safe_text | garbage})
records = st.tuples(st.sampled_from(["invoke", "info"]), st.sampled_from(sorted(WORDS)),
                    shaped | st.lists(name) | garbage, st.none() | safe_text)


@given(st.lists(records, max_size=30))
def test_any_records_read_without_a_repr_and_without_raising(rs: list[tuple[str, str, Any, Any]]) -> None:
    words = run(*rs)
    assert not REPR & set("".join(words)), words
    assert all(w.strip() == w and w for w in words)


@given(st.sampled_from(sorted(WORDS)), garbage)
def test_a_value_of_any_shape_reads_as_words(f: str, value: Any) -> None:
    text = phrase(f, value).text()
    assert text and not REPR & set(text)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("mechanism", ["netem", "shaper"])
def test_every_packet_preset_reads_as_its_behaviours(preset: str, mechanism: str) -> None:
    behavior = PRESETS[preset]
    shaping = {k: v for k, v in behavior.items() if k != "rate"}
    args = (netem_args if mechanism == "netem" else shaper_args)(shaping) if shaping else []
    rate = {"rate": rate_of(behavior)} if "rate" in behavior else {}
    value = {"nodes": ["b1-1"], mechanism: " ".join(args), **rate}  # as the packet nemesis completes
    [words] = run(("info", "start-packet", value))
    verb, _, node = words.rpartition(" ")
    assert node == "b1-1" and verb.startswith("net ")
    named = set(verb.removeprefix("net ").split("+"))
    # the shaper has no reorder of its own: it reorders by jitter, so it reads as the delay it is
    assert named == set(behavior) - ({"reorder"} if mechanism == "shaper" else set()), (preset, mechanism, words)
