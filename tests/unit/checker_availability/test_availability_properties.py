"""Property tests of the availability checker: the wait search against a naive one, monotonicity in the bound,
no claim while an unmodelled fault is in effect, a cluster that never stops writing is never unavailable,
the reachability rules' symmetry, and the pieces' shape."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checker.availability import (
    ANOMALY,
    Call,
    FaultState,
    Topology,
    Wait,
    check_availability,
    fault_pieces,
    longest_wait,
    reach,
    resolve,
)

TOPO = Topology(("c1", "c2", "c3"), (("b1", "b2", "b3"),))
NODES = TOPO.controllers + TOPO.broker_sets[0]
QUEUE = "t/broker-0/0"

# ---------------------------------------------------------------------------------------------
# The wait search against a brute force


calls_st = st.lists(st.tuples(st.integers(0, 400), st.integers(0, 120),
                              st.sampled_from(["ok", "fail", "info", "none"])), max_size=25)


def _calls(raw: list[tuple[int, int, str]]) -> list[Call]:
    out = []
    for i, (start, took, typ) in enumerate(sorted(raw)):
        done = float("inf") if typ == "none" else (start + took) / 10
        out.append(Call("send", "queue", 0, start / 10, done, "info" if typ == "none" else typ, 2 * i,
                        None if typ == "none" else 2 * i + 1, None if typ == "ok" else "boom"))
    return out


def _naive(calls: list[Call], start_s: float, end_s: float) -> float | None:
    """The longest wait by brute force: every stretch between consecutive ok completions (and the ends), every
    call checked for overlap, no pruning."""
    oks = (c.complete_s for c in calls if c.type == "ok" and start_s < c.complete_s <= end_s)
    cuts = sorted({start_s, end_s, *oks})
    best: float | None = None
    for a, b in pairwise(cuts):
        attempts = [c for c in calls if c.invoke_s < b and c.complete_s > a]
        if not attempts:
            continue
        begin = max(a, min(c.invoke_s for c in attempts))
        resumed = b != end_s or any(c.type == "ok" and c.complete_s == end_s for c in calls)
        if resumed:
            finish = b
        elif any(c.complete_s > end_s for c in attempts):
            finish = end_s
        else:
            finish = max(c.complete_s for c in attempts)
        if finish - begin > 0 and (best is None or finish - begin > best):
            best = finish - begin
    return best


@given(calls_st, st.integers(0, 200), st.integers(0, 300))
@settings(max_examples=300)
def test_longest_wait_agrees_with_brute_force(raw: list[tuple[int, int, str]], start: int, length: int) -> None:
    calls = _calls(raw)
    start_s, end_s = start / 10, (start + length) / 10
    got: Wait | None = longest_wait(calls, start_s, end_s)
    want = _naive(calls, start_s, end_s)
    assert (None if got is None else round(got.waited_s, 6)) == (None if want is None else round(want, 6))


# ---------------------------------------------------------------------------------------------
# Whole histories


@st.composite
def histories(draw: Any, *, families: tuple[str, ...] = ("kill", "pause", "partition", "clock"),
              dense_ok: bool = False) -> list[dict[str, Any]]:
    """Writes (random outcomes, or all ok every 0.5 s) and a random sequence of nemesis faults and heals."""
    events: list[tuple[int, int, dict[str, Any]]] = []

    def add(t_ms: int, op: dict[str, Any]) -> None:
        events.append((t_ms, len(events), {**op, "time": t_ms * 1_000_000}))

    t = 0
    for n in range(draw(st.integers(0, 8))):
        t += draw(st.integers(500, 9000))
        family = draw(st.sampled_from(families))
        nodes = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True))
        f, undo, value = {
            "kill": ("kill", "start", nodes), "pause": ("pause", "resume", nodes),
            "partition": ("start-partition", "stop-partition",
                          {"kind": "isolate", "grudge": {a: [b for b in NODES if b not in nodes] for a in nodes}}),
            "clock": ("bump-clock", "reset-clock", {"delta_ms": 60000}),
        }[family]
        add(t, {"type": "invoke", "process": "nemesis", "f": f, "value": None})
        add(t + 50, {"type": "info", "process": "nemesis", "f": f, "value": value, "effective": True})
        if draw(st.booleans()):
            t += draw(st.integers(100, 9000))
            add(t, {"type": "invoke", "process": "nemesis", "f": undo, "value": None})
            add(t + 50, {"type": "info", "process": "nemesis", "f": undo, "value": nodes if family in ("kill", "pause")
                         else "healed", "effective": True})
        del n
    horizon = t + 10_000
    if dense_ok:
        slots = [(s, 10, "ok") for s in range(0, horizon, 500)]
    else:
        slots = draw(st.lists(st.tuples(st.integers(0, horizon), st.integers(1, 6000),
                                        st.sampled_from(["ok", "ok", "fail", "info"])), max_size=60))
    for process, (start, took, typ) in enumerate(slots, 1):
        value = {"queue": QUEUE, "value": process}
        add(start, {"type": "invoke", "process": process, "f": "send", "value": value})
        add(start + took, {"type": typ, "process": process, "f": "send", "value": value, "error": "x"})
    ordered = sorted(events, key=lambda e: (e[0], e[1]))
    return [{**op, "index": i} for i, (_, _, op) in enumerate(ordered)]


@given(histories(), st.floats(1.0, 20.0), st.floats(0.0, 20.0))
@settings(max_examples=150)
def test_a_larger_bound_never_finds_more(history: list[dict[str, Any]], bound: float, more: float) -> None:
    def count(b: float) -> int:
        exp = resolve({"write_resume_s": b, "final_resume_s": b, "settle_s": 4.0}, lease_timeout_ms=2000)
        assert exp is not None
        return len(check_availability(history, TOPO, ["queue"], exp).anomalies.get(ANOMALY, []))

    assert count(bound + more) <= count(bound)


EXP = resolve({}, lease_timeout_ms=2000)


@given(histories())
@settings(max_examples=150)
def test_no_claim_is_made_in_a_window_opened_under_an_unmodelled_fault(history: list[dict[str, Any]]) -> None:
    assert EXP is not None
    r = check_availability(history, TOPO, ["queue"], EXP)
    for a in r.anomalies.get(ANOMALY, []):
        window = a.observed.get("window")
        assert window is None or "unmodelled" not in window["faults"]
    assert r.valid is (not r.anomalies)


@given(histories(dense_ok=True))
@settings(max_examples=100)
def test_a_cluster_that_never_stops_writing_is_never_unavailable(history: list[dict[str, Any]]) -> None:
    assert EXP is not None
    assert check_availability(history, TOPO, ["queue"], EXP).valid is True


@given(histories())
@settings(max_examples=100)
def test_pieces_are_ordered_and_disjoint(history: list[dict[str, Any]]) -> None:
    pieces = fault_pieces(history)
    assert pieces[0].start_s == 0 and pieces[0].state.clean
    for a, b in pairwise(pieces):
        assert a.start_s <= a.end_s <= b.start_s


# ---------------------------------------------------------------------------------------------
# Reachability


state_st = st.builds(
    lambda killed, paused, cuts: FaultState(frozenset(killed), frozenset(paused),
                                            frozenset(frozenset(c) for c in cuts if c[0] != c[1])),
    st.lists(st.sampled_from(NODES), max_size=3), st.lists(st.sampled_from(NODES), max_size=2),
    st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(NODES)), max_size=6))


@given(state_st, st.permutations(NODES[:3]), st.permutations(NODES[3:]), st.booleans())
@settings(max_examples=300)
def test_reach_does_not_depend_on_node_names(state: FaultState, ctl: list[str], rep: list[str],
                                             broker_path: bool) -> None:
    rename = dict(zip(NODES, [*ctl, *rep], strict=True))
    renamed = FaultState(frozenset(rename[n] for n in state.killed), frozenset(rename[n] for n in state.paused),
                         frozenset(frozenset(rename[n] for n in c) for c in state.cuts))
    in_sync = frozenset(TOPO.broker_sets[0]) if broker_path else None
    bs = 0 if broker_path else None
    assert (reach(state, TOPO, broker_set=bs, in_sync=in_sync).holds
            == reach(renamed, TOPO, broker_set=bs, in_sync=in_sync).holds)


@given(state_st, st.lists(st.sampled_from(NODES[:3]), min_size=2, max_size=3, unique=True))
def test_without_a_majority_of_controllers_there_is_no_quorum(state: FaultState, down: list[str]) -> None:
    dead = FaultState(state.killed | frozenset(down), state.paused, state.cuts)
    assert reach(dead, TOPO, broker_set=None, in_sync=None).holds is False
