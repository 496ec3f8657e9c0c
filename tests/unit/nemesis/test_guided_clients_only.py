"""Guided mode on a system seen through its clients only (RabbitMQ: neither event reports nor ``primaries``): the
policy's ``clients_only`` (nemesis/guided.py, 5), the observer's sources (harness/observe.py ``SOURCES``), what
validation asks of guided mode (``faults.GUIDED_NEEDS``), and that nothing changed for systems that raise events."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.observe import SOURCES, clients_only, sources_of
from harness.protocols import CAPABILITIES
from nemesis import faults, packages
from nemesis.guided import SETTLED, Config, Decision, Move, State, decide, took_effect
from nemesis.guided_run import moves
from nemesis.schedule import UNDO, parse, partition_aims, selectors_of
from nemesis.targets import Topology, unserved
from systems.splitbrain.selectors import SELECTORS

NS = 1_000_000_000
RABBIT_OFFERED = frozenset({"kill", "pause", "network", "log-files", "queue-client"})  # systems/rabbitmq/system.py
MEMBERS = Topology((), (), ("m1", "m2", "m3"))


def _client(t_s: float, f: str, outcome: str) -> dict[str, Any]:
    return {"time": int(t_s * NS), "node": None, "role": "client", "kind": "client-outcome", "f": f,
            "outcome": outcome}


# ---------------------------------------------------------------------------------------------
# Systems that raise events: the same choices for the same seed and observations as before clients_only existed.

ETCD_KINDS: list[dict[str, Any]] = [{"kind": "primary-change", "change": "gained", "node": "m1", "role": "member"},
              {"kind": "primary-change", "change": "lost", "node": "m2", "role": "member"},
              {"kind": "primaries", "count": "several", "node": None, "role": "member"},
              {"kind": "primaries", "count": "one", "node": None, "role": "member"},
              {"kind": "client-outcome", "f": "read", "outcome": "info", "role": "client", "node": None},
              {"kind": "client-outcome", "f": "read", "outcome": "ok", "role": "client", "node": None},
              {"kind": "client-outcome", "f": "write", "outcome": "fail", "role": "client", "node": None}]
OUR_KINDS: list[dict[str, Any]] = [{"kind": "sync-state-set", "change": "shrink", "members": [1], "role": "broker"},
             {"kind": "sync-state-set", "change": "expand", "members": [1, 2], "role": "broker"},
             {"kind": "become-master", "role": "broker"}, {"kind": "raft-leader", "role": "controller"},
             {"kind": "fenced", "role": "broker"}, {"kind": "truncate", "role": "broker"},
             {"kind": "client-outcome", "f": "send", "outcome": "info", "role": "client", "node": None}]
ETCD_MOVES = (Move("start-partition", {"kind": "isolate", "targets": "one"}),
              Move("start-partition", {"kind": "isolate", "targets": "primaries"}),
              Move("start-partition", {"kind": "random-halves"}), Move("kill", "one"), Move("kill", "primaries"),
              Move("pause", "one"), Move("pause", "primaries"))
OUR_MOVES = (Move("start-partition", {"kind": "isolate-master-from-slaves"}), Move("kill", "masters"),
             Move("kill", "controller-leader"), Move("pause", "slaves:one"),
             Move("start-partition", {"kind": "random-halves"}))


def _stream(seed: int, kinds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = random.Random(f"pin:{seed}")
    out = []
    for _ in range(120):
        t = r.uniform(0, 60)
        out.append({"time": int(t * NS), **kinds[r.randrange(len(kinds))]})
    return sorted(out, key=lambda e: e["time"])


def _run(cfg: Config, events: list[dict[str, Any]], seed: int, *, clients_only: bool = False,
         limit_s: float = 60.0) -> tuple[list[list[Any]], State]:
    """Every decision over ``events`` (shown as their time comes), asked every 0.1 s, and each settled moment that
    held (``[t, "settled"]``); a step takes effect 50 ms after it is taken."""
    s, t, out = State(), 0.0, []
    settled: float | None = None
    while t < limit_s:
        visible = [e for e in events if e["time"] <= t * NS]
        d, _wake, s = decide(s, cfg, visible, now_s=t, start_ns=0, clients_only=clients_only,
                             rng=random.Random(f"{seed}:guided:{s.k}:{len(s.steps)}"))
        if d is not None:
            out.append([d.step.at_s, d.step.f, d.step.value, d.context, d.move_key])
            s = took_effect(s, t + 0.05)
        elif s.settled_s is not None and s.settled_s != settled:  # a settled moment that chose to hold
            out.append([t, SETTLED])
        settled = s.settled_s
        t = round(t + 0.1, 3)
    return out, s


PINNED = [  # (system, seed, decisions, sha256 of their JSON): recorded before clients_only existed (commit e45b98c)
    ("etcd", 1, 29, "5cac7dfdf6e01873"), ("etcd", 2, 40, "c0e77205c6821aa4"), ("etcd", 3, 34, "9b2d1cce9648921f"),
    ("ours", 1, 39, "1aab0cf97b05e4c7"), ("ours", 2, 45, "57e69db29991aca8"), ("ours", 3, 40, "96d9b79aa4bbfb72"),
]


@pytest.mark.parametrize(("system", "seed", "count", "digest"), PINNED, ids=[f"{p[0]}-{p[1]}" for p in PINNED])
def test_systems_that_raise_events_get_the_same_choices_as_before(system: str, seed: int, count: int,
                                                                  digest: str) -> None:
    """etcd and Redis (leadership watched from outside) and our cluster (its own events): ``clients_only`` is
    False for them, and their decisions for a seed and an event stream are the ones pinned before it existed."""
    moves_, kinds = (ETCD_MOVES, ETCD_KINDS) if system == "etcd" else (OUR_MOVES, OUR_KINDS)
    aims = partition_aims(Topology(selectors=SELECTORS) if system == "ours" else MEMBERS)
    cfg = Config(moves_, settle_s=1.0, max_wait_s=2.5, quiet_wait_s=1.0, holds_s=(3.0, 6.0, 10.0),
                 partition_aims=aims)
    out, _ = _run(cfg, _stream(seed, kinds), seed)
    assert len(out) == count
    assert hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()[:16] == digest


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.tuples(st.floats(0, 30), st.sampled_from(OUR_KINDS[:-1] + ETCD_KINDS[:4])),
                                        max_size=25))
def test_without_client_outcomes_clients_only_adds_only_the_settled_moment(seed: int,
                                                              raw: list[tuple[float, dict[str, Any]]]) -> None:
    """The flag lets client outcomes stand for the cluster and adds the settled moment, nothing else: on a stream
    without client outcomes both ways decide alike up to the first settled moment."""
    events = sorted(({"time": int(t * NS), **k} for t, k in raw), key=lambda e: e["time"])
    cfg = Config(OUR_MOVES, settle_s=1.0, max_wait_s=2.5, quiet_wait_s=1.0, holds_s=(3.0, 6.0),
                 partition_aims=partition_aims(Topology(selectors=SELECTORS)))
    outside, inside = _run(cfg, events, seed, limit_s=30)[0], _run(cfg, events, seed, clients_only=True, limit_s=30)[0]
    first = next((i for i, d in enumerate(inside) if d[1] == SETTLED or str(d[3]).endswith(f"|{SETTLED}")),
                 len(inside))
    assert inside[:first] == outside[:first]


# ---------------------------------------------------------------------------------------------
# A system seen through its clients only.

RABBIT_MOVES = (Move("start-partition", {"kind": "isolate", "targets": "one"}),
                Move("start-partition", {"kind": "random-halves"}), Move("kill", "one"), Move("pause", "minority"))
RABBIT_CFG = Config(RABBIT_MOVES, settle_s=1.0, max_wait_s=4.0, quiet_wait_s=1.0, holds_s=(3.0, 6.0, 10.0))


def _step(s: State, events: list[dict[str, Any]], now_s: float, *, clients_only: bool,
          seed: int = 0) -> tuple[Decision | None, float, State]:
    d, wake, s2 = decide(s, RABBIT_CFG, events, now_s=now_s, start_ns=0, clients_only=clients_only,
                         rng=random.Random(f"{seed}:{s.k}:{len(s.steps)}"))
    return d, wake, (took_effect(s2, now_s) if d is not None else s2)


def test_client_outcomes_after_a_fault_are_its_reaction_and_a_moment_only_when_clients_only() -> None:
    d, _, s = _step(State(), [], 5.0, clients_only=True)
    assert d is not None and s.active
    late = [_client(5.5, "send", "info")]
    d_out, wake_out, s_out = _step(s, late, 5.6, clients_only=False)
    assert d_out is None and wake_out == 5.0 + 10.0 and not s_out.active[0].reacted  # held to the longest hold
    for seed in range(10):
        d_in, _, s_in = _step(s, late, 5.6, clients_only=True, seed=seed)
        assert s_in.active[0].reacted  # the clients' reaction counts
        context = d_in.context if d_in is not None else s_in.credit[0] if s_in.credit else None
        assert context == f"{s.active[0].move.key.split('@')[0]}|client-outcome:send:info"  # a moment: stack or hold


def test_under_clients_only_a_fault_is_undone_after_the_shortest_hold_once_clients_reacted() -> None:
    """Without clients_only the fault is held to the longest hold (10 s); with it, the clients' reaction lets its
    hold end (3, 6 or 10 s) or a later client outcome undo it, not before the shortest hold."""
    for seed in range(20):
        ends: dict[bool, float] = {}
        for flag in (False, True):
            d, _, s = _step(State(), [], 5.0, clients_only=flag, seed=seed)
            assert d is not None and d.step.f in UNDO
            events = [_client(5.5, "send", "info"), _client(6.0, "send", "ok"), _client(8.5, "poll", "fail")]
            t, end = 5.1, 99.0
            while t < 20 and end == 99.0:
                visible = [e for e in events if e["time"] <= t * NS]
                d2, _, s = _step(s, visible, t, clients_only=flag, seed=seed)
                if d2 is not None and d2.step.f == UNDO[d.step.f]:
                    end = t
                t = round(t + 0.1, 3)
            ends[flag] = end
        assert 15.0 - 1e-9 <= ends[False] < 99.0
        assert 8.0 - 1e-9 <= ends[True] <= ends[False]


def test_clients_settled_under_a_fault_is_a_moment_once_per_quiet_stretch() -> None:
    """The clients reacted (5.5 s) and said nothing new after 6.0 s: at max(fault + shortest hold, 6.0 + max_wait)
    = 9.0 s the policy decides (undo, stack or hold), once; a later client outcome opens the next stretch."""
    cfg = Config(RABBIT_MOVES[:2], settle_s=1.0, max_wait_s=2.0, quiet_wait_s=1.0, holds_s=(4.0, 12.0))
    events = [_client(5.5, "send", "info"), _client(6.0, "send", "ok")]
    seen = 0
    for seed in range(20):
        d, _, s = decide(State(), cfg, [], now_s=5.0, start_ns=0, clients_only=True, rng=random.Random(seed))
        assert d is not None
        s = took_effect(s, 5.0)
        if s.active[0].undo_at_s <= 9.0:
            continue  # its hold ends first
        seen += 1
        # the reaction is a moment (one family of moves, before the shortest hold: hold), then the clients are quiet
        d0, _, s = decide(s, cfg, events, now_s=6.1, start_ns=0, clients_only=True, rng=random.Random(seed))
        assert d0 is None and s.active[0].reacted and s.cluster_at_s == 6.0
        d1, wake, s1 = decide(s, cfg, events, now_s=8.9, start_ns=0, clients_only=True, rng=random.Random(seed))
        assert d1 is None and wake == 9.0 and s1.settled_s is None
        d2, _, s2 = decide(s1, cfg, events, now_s=9.0, start_ns=0, clients_only=True, rng=random.Random(seed))
        assert s2.settled_s == 6.0
        context = d2.context if d2 is not None else s2.credit[0] if s2.credit else ""
        assert context.endswith(f"|{SETTLED}")
        if d2 is None:  # held: no second moment in this quiet stretch...
            d3, _, s3 = decide(s2, cfg, events, now_s=12.0, start_ns=0, clients_only=True, rng=random.Random(seed))
            assert d3 is None and s3.credit == s2.credit
        _d4, _, s4 = decide(s2, cfg, events, now_s=9.0, start_ns=0, rng=random.Random(seed))
        assert s4.settled_s == 6.0  # and without clients_only there is none at all:
        assert decide(s1, cfg, events, now_s=9.0, start_ns=0, rng=random.Random(seed))[2].settled_s is None
    assert seen >= 5


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.tuples(st.floats(0, 60), st.sampled_from(["send", "poll"]),
                                                  st.sampled_from(["ok", "info", "fail"])), max_size=40))
@example(1, [(3.0, "send", "info")])  # a settled moment that held (found by Hypothesis)
def test_clients_only_schedules_are_valid_bounded_and_use_only_the_moves(
        seed: int, raw: list[tuple[float, str, str]]) -> None:
    """Whatever the clients report: steps in time order, a schedule that parses, never beyond the depth nor a
    family twice, every fault undone or still active, only the configured moves -- and the same again."""
    events = sorted((_client(t, f, o) for t, f, o in raw), key=lambda e: e["time"])
    out, s = _run(RABBIT_CFG, events, seed, clients_only=True)
    steps = s.steps
    assert [x.at_s for x in steps] == sorted(x.at_s for x in steps)
    assert len(parse([{"at_s": x.at_s, "f": x.f, **({"value": x.value} if x.value is not None else {})}
                      for x in steps], MEMBERS)) == len(steps)
    keys = {m.key for m in RABBIT_MOVES}
    chosen = [row[4] for row in out if row[1] != SETTLED and row[4] is not None]  # a settled hold is [t, settled]
    assert all(k in keys or k == "hold" or k.startswith("undo:") for k in chosen)
    assert all(Move(x.f, x.value) in RABBIT_MOVES for x in steps if x.f in UNDO)
    assert sum(1 for x in steps if x.f in UNDO) - sum(1 for x in steps if x.f in UNDO.values()) == len(s.active)
    families = [a.move.family for a in s.active]
    assert len(families) == len(set(families)) <= RABBIT_CFG.max_depth
    assert _run(RABBIT_CFG, events, seed, clients_only=True)[0] == out


# ---------------------------------------------------------------------------------------------
# The observer's sources and what validation asks of guided mode.


class _Plain:
    """A DB that neither reports events nor says who leads (as RabbitMQ's)."""


class _Leads(_Plain):
    async def primaries(self, test: dict[str, Any]) -> list[str]:
        return []


class _Reports(_Leads):
    def role(self, node: str) -> str:
        return "broker"

    async def node_events(self, test: Any, node: str, since: int) -> dict[str, Any]:
        return {}

    def close_observation(self) -> None:
        pass


def test_sources_a_system_is_observed_through() -> None:
    assert sources_of(_Reports()) == ("node-events", "client-outcomes")  # its own leadership events say more
    assert sources_of(_Leads()) == ("leadership", "client-outcomes")
    assert sources_of(_Plain()) == ("client-outcomes",)
    assert [clients_only(db) for db in (_Reports(), _Leads(), _Plain())] == [False, False, True]
    assert {s.capability for s in SOURCES} - {None} <= set(CAPABILITIES)
    assert [s.name for s in SOURCES if s.capability is None] == ["client-outcomes"]  # every system has those


def test_guided_mode_needs_nothing_of_a_system_but_its_selectors_are_still_checked() -> None:
    assert faults.GUIDED_NEEDS == ()
    assert packages.missing_capabilities(["partition", "kill", "pause"], RABBIT_OFFERED, guided=True,
                                         targets=["one", "minority", "members:one"], roles=("members",),
                                         topo=MEMBERS) == []
    refused = packages.missing_capabilities(["partition"], RABBIT_OFFERED, guided=True, targets=["primaries"],
                                            roles=("members",), topo=MEMBERS)
    assert [(m.key, m.capability) for m in refused] == [("nemesis.targets[0]", "primaries")]


@pytest.mark.parametrize("targets", [["one"], ["one", "minority", "members:one"]])
def test_guided_moves_on_rabbitmq_hit_only_what_it_can_serve(targets: list[str]) -> None:
    """The moves guided mode draws for examples/rabbitmq-unsafe.yaml's packages (and with its default partition
    kinds) hit no pool RabbitMQ cannot serve: no role pool, no role it lacks."""
    for options in ({"partition": {"kinds": ["isolate", "random-halves"], "targets": ["one"]}}, None):
        defs = packages.definitions(["partition", "kill", "pause"], targets=targets, options=options,
                                    interval_s=30, topo=MEMBERS)
        drawn = moves(defs, seed=1)
        assert drawn
        for m in drawn:
            for sel in selectors_of(m.f, m.value):
                assert unserved(sel, MEMBERS, ("members",), RABBIT_OFFERED) == (), (m, sel)
