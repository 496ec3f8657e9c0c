"""The whole cluster in a seeded simulation: replay by seed, safety on safe settings, planted bugs found.

The sweep runs the production cores (Raft, controller state machine and requests, leases, scan, registration,
role changes, the HA cores) under kills, pauses, partitions, packet faults and clock skew, and judges every
history with the checkers of a real run (queue, invariants, availability, restarts).  A failing seed prints the
command that replays it.  ``SPLITBRAIN_SOAK=1`` runs the long form.
"""

from __future__ import annotations

import json
import os

import pytest

from checker.compose import compose
from system_under_test.sim import SimConfig, SimRun, run
from systems.splitbrain.sim.check import check_run, replay_command

SOAK = os.environ.get("SPLITBRAIN_SOAK") == "1"


def _canonical(r: SimRun) -> bytes:
    return json.dumps([r.history, r.node_events, r.schedule], separators=(",", ":")).encode()


@pytest.mark.parametrize("seed", [3, 41])
def test_the_same_seed_replays_the_same_history_byte_for_byte(seed: int) -> None:
    a = run(SimConfig(seed=seed, seconds=15))
    b = run(SimConfig(seed=seed, seconds=15))
    assert _canonical(a) == _canonical(b)
    assert len(a.history) > 200 and a.schedule, "the run must do something for the comparison to mean anything"
    assert _canonical(run(SimConfig(seed=seed + 1, seconds=15))) != _canonical(a)


def _failures(seeds: range, seconds: float, **kw: object) -> list[str]:
    out = []
    for seed in seeds:
        r = run(SimConfig(seed=seed, seconds=seconds, **kw))  # type: ignore[arg-type]
        merged = compose(check_run(r))
        if merged.valid is not True:
            out.append(f"seed {seed}: valid={merged.valid} {dict(merged.counts)} {merged.error or ''}\n"
                       f"  replay: {replay_command(r)}")
    return out


@pytest.mark.soak
def test_a_sweep_of_seeds_on_safe_settings_is_valid() -> None:
    seeds = range(1000, 1500) if SOAK else range(0, 50)
    failures = _failures(seeds, 60.0 if SOAK else 30.0)
    assert not failures, "\n".join(failures[:5])


def test_the_sweep_exercises_the_protocol() -> None:
    """No anomaly means something only if the faults really forced failovers, truncations and restarts."""
    elections = truncations = faults = sends = 0
    for seed in range(8):
        r = run(SimConfig(seed=seed, seconds=30))
        elections += sum(1 for e in r.node_events if e["event"] == "became-master")
        truncations += sum(1 for e in r.node_events if e["event"] == "truncate")
        faults += sum(r.stats["faults"].values())
        sends += sum(1 for op in r.history if op["f"] == "send" and op["type"] == "ok")
    assert elections > 8 and faults >= 8 * 3 and sends > 8 * 200
    assert truncations >= 1


def _found(bug: str, seeds: range, seconds: float, kinds: set[str], **kw: object) -> int | None:
    for seed in seeds:
        r = run(SimConfig(seed=seed, seconds=seconds, bugs=frozenset({bug}), **kw))  # type: ignore[arg-type]
        merged = compose(check_run(r))
        if merged.valid is False and kinds & set(merged.counts):
            return seed
    return None


@pytest.mark.parametrize(("bug", "kinds", "max_seeds", "seconds"), [
    ("ack-before-replication", {"lost-write"}, 12, 30.0),
    ("slow-failover", {"unavailable"}, 12, 60.0),
])
def test_the_sweep_finds_a_planted_bug(bug: str, kinds: set[str], max_seeds: int, seconds: float) -> None:
    seed = _found(bug, range(max_seeds), seconds, kinds)
    assert seed is not None, f"--bug {bug} was not found in seeds 0..{max_seeds - 1}"
    # the correct cluster, same seed and schedule: valid
    assert not _failures(range(seed, seed + 1), seconds)


def test_non_atomic_meta_is_found_by_a_registration_crash() -> None:
    kinds = {"restart-refused"}
    seed = _found("non-atomic-meta", range(20), 30.0, kinds, faults=("registration-crash",))
    assert seed is not None
    assert not _failures(range(seed, seed + 1), 30.0, faults=("registration-crash",))
