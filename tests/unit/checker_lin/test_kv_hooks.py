"""Property tests of kv's performance hooks: the stale-get pre-check (``KV.impossible``) never fires on a
linearizable history and fires on the stale reads it targets; a pre-check hit changes neither the verdict nor
the first failing op; and the look-ahead plans (``KV.reach_planner``) answer exactly as ``KV.could_reach``."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker.history import Op
from checker.linearizable import build_calls, check, partition_calls
from checker.models import FAILED, UNKNOWN, Inconsistent, OpInput, make_model
from checker.models._kv import KV

# One sequential kv run: (f, key, argument, output) per op, in linearization order.
Run = list[tuple[str, str, Any, Any]]


def _sequential_run(data: st.DataObject, *, n_max: int, keys: list[str], repeat_values: bool) -> Run:
    """Run the kv model sequentially; values are unique ("v<n>;", no value a prefix or suffix of another),
    or, with ``repeat_values``, drawn from a few short strings that do overlap."""
    draw = data.draw
    state: dict[str, str] = {}
    run: Run = []
    for n in range(draw(st.integers(1, n_max))):
        key = draw(st.sampled_from(keys))
        f = draw(st.sampled_from(["get", "get", "append", "append", "put"]))
        if f == "get":
            run.append((f, key, None, state.get(key, "")))
            continue
        arg = draw(st.sampled_from(["a", "b", "ab", ""])) if repeat_values else f"v{n};"
        state[key] = state.get(key, "") + arg if f == "append" else arg
        run.append((f, key, arg, arg))
    return run


def _widen(data: st.DataObject, run: Run, *, tight: frozenset[int] = frozenset(),
           crashes: bool = True) -> list[Op]:
    """Give op k an interval around its linearization point 100 * k (ops in ``tight`` get exactly that point),
    so the history is linearizable by construction; some completions become info or go missing."""
    events: list[tuple[int, int, int, str, str, Any]] = []
    for k, (f, key, arg, out) in enumerate(run):
        lp = 100 * k
        start, end = lp, lp
        if k not in tight:
            start -= data.draw(st.integers(0, 250))
            end += data.draw(st.integers(0, 250))
        kinds = ["ok", "ok", "ok", "info", "lost"] if crashes and k not in tight else ["ok"]
        kind = data.draw(st.sampled_from(kinds))
        events.append((start, 0, k, "invoke", f, {"key": key, "value": arg}))
        if kind != "lost":
            events.append((end, 1, k, kind, f, {"key": key, "value": out if kind == "ok" else arg}))
    events.sort()
    return [Op(i, t, typ, p, f, v) for i, (t, _, p, typ, f, v) in enumerate(events)]


def _precheck_hits(ops: list[Op]) -> dict[Any, int]:
    kv = make_model("kv")
    hits = {}
    for key, group in partition_calls(build_calls(ops, kv), kv):
        hit = kv.impossible([(c.input, c.output, c.call_time, c.ret_time) for c in group])
        if hit is not None:
            hits[key] = hit
    return hits


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), repeat_values=st.booleans())
def test_precheck_never_fires_on_widened_sequential_runs(data: st.DataObject, repeat_values: bool) -> None:
    run = _sequential_run(data, n_max=40, keys=["a", "b"], repeat_values=repeat_values)
    ops = _widen(data, run)
    assert _precheck_hits(ops) == {}, [o.describe() for o in ops]


def _inject_stale_get(data: st.DataObject) -> tuple[list[Op], int]:
    """A sequential single-key run with unique values in which one get reads the value from before the last
    write W ahead of it, where that value was produced by the write W' just before W.  W', W and the get get
    exact intervals in that real-time order (W' returns before W is invoked, W before the get is invoked), so
    every linearization orders them and none lets the get read that value: it is gone for good, because
    every value is unique and the value after W neither is nor begins with it again (the generated
    histories' anomaly, as in ``checker.linearizable.gen``).  Returns the ops and the stale get's process."""
    run = _sequential_run(data, n_max=30, keys=["a"], repeat_values=False)
    writes = [k for k, (f, *_) in enumerate(run) if f != "get"]
    w_at = data.draw(st.integers(0, len(writes) + 1))
    # make sure there is a write W (and possibly W' before it), then the stale get right after W
    if w_at >= len(writes):
        n = len(run)
        run.append(("append", "a", f"v{n};", f"v{n};"))
        writes.append(n)
        w_at = len(writes) - 1
    w = writes[w_at]
    w_prev = writes[w_at - 1] if w_at > 0 else None
    state = ""
    for f, _, arg, _ in run[:w]:
        if f != "get":
            state = state + arg if f == "append" else arg
    stale = state  # the value from before W (produced by W', or the initial value)
    g = w + 1
    run.insert(g, ("get", "a", None, stale))
    # the ops after the inserted get keep their own (now shifted) linearization points; re-run them so every
    # other output stays the sequential one
    fixed: Run = []
    cur = ""
    for k, (f, key, arg, out) in enumerate(run):
        if f == "get":
            fixed.append((f, key, arg, stale if k == g else cur))
        else:
            cur = cur + arg if f == "append" else arg
            fixed.append((f, key, arg, out))
    tight = frozenset(x for x in (w_prev, w, g) if x is not None)
    return _widen(data, fixed, tight=tight, crashes=False), g


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_precheck_fires_on_an_injected_stale_get_and_the_verdict_is_invalid(data: st.DataObject) -> None:
    ops, _ = _inject_stale_get(data)
    hits = _precheck_hits(ops)
    assert "a" in hits, [o.describe() for o in ops]
    result = check(ops, make_model("kv"))
    assert result.valid is False, result.describe()


class _NoPrecheck(KV):
    def impossible(self, ops: Any) -> int | None:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), inject=st.booleans())
def test_a_precheck_hit_changes_neither_verdict_nor_first_failing_op(data: st.DataObject, inject: bool) -> None:
    if inject:
        ops, _ = _inject_stale_get(data)
    else:  # a widened run with one get's output replaced: sometimes stale, sometimes still linearizable
        run = _sequential_run(data, n_max=30, keys=["a"], repeat_values=False)
        gets = [k for k, (f, *_) in enumerate(run) if f == "get"]
        if gets:
            k = data.draw(st.sampled_from(gets))
            f, key, arg, _ = run[k]
            earlier = [o for f2, key2, _, o in run[:k] if f2 == "get" and key2 == key] + [""]
            run[k] = (f, key, arg, data.draw(st.sampled_from(earlier)))
        ops = _widen(data, run)
    hinted = check(ops, make_model("kv"))
    plain = check(ops, _NoPrecheck())
    assert hinted.valid is plain.valid
    assert hinted.op == plain.op, (hinted.describe(), plain.describe())


class _WrongPrecheck(KV):
    """Flags the last determinate get of the partition, impossible or not."""

    def impossible(self, ops: Any) -> int | None:
        gets = [i for i, (op, out, _, _) in enumerate(ops) if op.f == "get" and out is not UNKNOWN]
        return gets[-1] if gets else None


def test_a_wrong_precheck_is_caught_where_the_flagged_get_is_legal() -> None:
    """The guard of rule 8: the flagged get is stepped where the frontier first reaches it; legal there, the
    search goes on without the hint.  (A guard, not a proof: were the get illegal at that node but legal
    at another, the wrong hint would stand, which is why ``impossible`` must be sound.)"""
    put, get = {"key": "a", "value": "p"}, {"key": "a", "value": None}
    ops = [Op(0, 0, "invoke", 0, "put", put), Op(1, 1, "ok", 0, "put", put), Op(2, 2, "invoke", 1, "get", get),
           Op(3, 3, "ok", 1, "get", put)]
    assert _precheck_hits(ops) == {}
    assert check(ops, _WrongPrecheck()).valid is True


# -- look-ahead plans ----------------------------------------------------------------------------------------

def _writer(data: st.DataObject) -> tuple[OpInput, Any]:
    f = data.draw(st.sampled_from(["append", "append", "put", "put", "cas"]))
    value: Any = data.draw(st.sampled_from(["a", "b", "ab", "ba", "", "c"]))
    if f == "cas" or data.draw(st.integers(0, 30)) == 0:
        value = 7  # an op could_reach has no opinion on
    out = data.draw(st.sampled_from(["ok", "ok", "ok", UNKNOWN]))
    return OpInput(f, {"key": data.draw(st.sampled_from(["k", "k", "k", "other"])), "value": value}), out


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_reach_plans_answer_as_could_reach(data: st.DataObject) -> None:
    kv = make_model("kv")
    items: list[tuple[OpInput, Any]] = []
    for _ in range(data.draw(st.integers(0, 8))):
        if data.draw(st.booleans()):
            items.append(_writer(data))
        else:
            out = data.draw(st.sampled_from(["", "a", "ab", "aab", "ba", "bab", "abc", FAILED, UNKNOWN]))
            items.append((OpInput("get", {"key": "k", "value": None}), {"key": "k", "value": out}))
    items.append((OpInput("get", {"key": "k", "value": None}),
                  {"key": "k", "value": data.draw(st.sampled_from(["", "a", "ab", "aab", "abab", "bab", "ca"]))}))
    goal = len(items) - 1
    planner = kv.reach_planner(items)
    assert planner is not None
    limit = data.draw(st.integers(0, len(items)))
    plan = planner(goal, limit)
    writers = [i for i in range(limit) if not kv.read_only(*items[i])]
    chosen = [i for i in writers if data.draw(st.booleans())]
    state = data.draw(st.sampled_from([(), (("k", "a"),), (("k", "ab"),), (("k", "b"),), (("k", "c"),),
                                       (("k", 5),), (("other", "x"),)]))
    op, out = items[goal]
    want = kv.could_reach(state, op, out, [items[i] for i in chosen])
    if plan is None:
        return  # the checker asks could_reach itself
    assert all(group and list(group) == sorted(group) and i in writers for alt in plan for group in alt for i in group)
    got = kv.could_reach(state, op, out, ()) or any(all(set(g) & set(chosen) for g in alt) for alt in plan)
    assert got == want, (items, limit, chosen, state, plan)


def test_reach_plan_of_a_unique_cut() -> None:
    kv = make_model("kv")
    g = OpInput("get", {"key": "k", "value": None})
    items = [(OpInput("put", {"key": "k", "value": "p"}), "ok"), (OpInput("append", {"key": "k", "value": "a"}), "ok"),
             (OpInput("append", {"key": "k", "value": "b"}), "ok"), (g, "pab"), (g, "x")]
    planner = kv.reach_planner(items)
    assert planner is not None
    assert planner(3, 4) == [((0,), (1,), (2,))]
    assert planner(3, 2) == []  # the append of "b" was invoked after the get returned
    assert planner(4, 5) == []  # nothing ever writes "x": only a state holding a prefix of it will do
    assert kv.could_reach((("k", "p"),), g, "pab", ()) and not kv.could_reach((("k", "q"),), g, "pab", ())


def test_reach_plan_groups_writers_of_equal_value() -> None:
    """Repeated values do not multiply alternatives: every append of "a" is one group, every put of "" another."""
    kv = make_model("kv")
    g = OpInput("get", {"key": "k", "value": None})
    put = (OpInput("put", {"key": "k", "value": ""}), "ok")
    app = (OpInput("append", {"key": "k", "value": "a"}), "ok")
    items = [put, app, app, put, app, (g, "aaa")]
    planner = kv.reach_planner(items)
    assert planner is not None
    assert planner(5, 5) == [((0, 3), (1, 2, 4))]
    assert planner(5, 3) == [((0,), (1, 2))]  # members invoked after the get returned are left out


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_canonical_rewrites_exactly_the_unobserved_values(data: st.DataObject) -> None:
    """An append's value is unobserved when no get of its key read a value containing it, a put's when no get
    read a value beginning with it (the definition, against the indexed implementation)."""
    kv = make_model("kv")
    text = st.text(alphabet="abc", max_size=4)
    ops: list[tuple[OpInput, Any]] = []
    for _ in range(data.draw(st.integers(0, 12))):
        key = data.draw(st.sampled_from(["k", "j"]))
        f = data.draw(st.sampled_from(["get", "put", "append"]))
        if f == "get":
            ops.append((OpInput(f, {"key": key, "value": None}),
                        data.draw(st.sampled_from([UNKNOWN, {"key": key, "value": data.draw(text)}]))))
        else:
            ops.append((OpInput(f, {"key": key, "value": data.draw(text)}), "ok"))
    read = [(op.value["key"], out["value"]) for op, out in ops if op.f == "get" and out is not UNKNOWN]
    want = []
    for op, _ in ops:
        k, v = op.value["key"], op.value["value"]
        dead = (op.f == "append" and v != "" and not any(v in w for key, w in read if key == k)) or (
            op.f == "put" and not any(w.startswith(v) for key, w in read if key == k))
        want.append("\x00" if dead else v)
    got = kv.canonical(ops)
    if got is None:
        assert want == [op.value["value"] for op, _ in ops]
    else:
        assert [op.value["value"] for op, _ in got] == want


def test_mismatch_reason_is_written_on_demand() -> None:
    kv = make_model("kv")
    res = kv.step((("k", "ab"),), OpInput("get", {"key": "k", "value": None}), "a")
    assert isinstance(res, Inconsistent)
    assert res.reason == "get 'k' returned 'a', but it holds 'ab'"
    assert res.describe() == "inconsistent: get 'k' returned 'a', but it holds 'ab'"
