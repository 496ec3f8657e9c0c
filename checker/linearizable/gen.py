"""Seeded generators of concurrent histories with known verdicts (benchmarks and property tests).

``kv_history(rng, clients=50, ops=2000)`` simulates clients of a linearizable key-value store: each op
gets an interval, takes effect at a random point inside it, and its output comes from applying the ops
in effect order.  With ``linearizable=False`` one get is made stale: it returns the value from before a
write that completed before the get was invoked, where the write that produced that value completed
before the later write was invoked -- so every linearization orders them, and no linearization allows it.
The ``rng`` is injected (``random.Random(seed)``): this module never creates randomness itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checker.history import Op

if TYPE_CHECKING:
    from random import Random


@dataclass(slots=True)
class _Sim:
    process: int
    f: str
    key: str
    arg: str | None
    call: int
    lin: int
    ret: int
    out: Any = None


def kv_history(
    rng: Random, *, clients: int = 50, ops: int = 2000, keys: int = 10, linearizable: bool = True,
) -> list[Op]:
    """A kv history (get / put / append, string values, initial "") in our ``Op`` schema.

    Args:
        rng: seeded randomness.
        clients: concurrent client processes; ops: total operations; keys: distinct keys "0".."keys-1".
        linearizable: False makes exactly one get stale (see the module docstring).

    Raises:
        ValueError: ``linearizable=False`` but no get could be made stale (use more ops).
    """
    sims: list[_Sim] = []
    clock = [rng.randrange(0, 50) for _ in range(clients)]
    counters = [0] * clients
    for _ in range(ops):
        c = rng.randrange(clients)
        call = clock[c] + rng.randrange(1, 20)
        dur = rng.randrange(5, 200)
        r = rng.random()
        f = "get" if r < 0.47 else ("append" if r < 0.94 else "put")
        arg = None if f == "get" else f"x {c} {counters[c]} y"
        counters[c] += 1
        sims.append(_Sim(c, f, str(rng.randrange(keys)), arg, call, call + rng.randrange(0, dur + 1), call + dur))
        clock[c] = call + dur
    store: dict[str, str] = {}
    history_of: dict[str, list[tuple[_Sim, str]]] = {}
    for s in sorted(sims, key=lambda s: s.lin):
        before = store.get(s.key, "")
        if s.f == "get":
            s.out = before
        else:
            arg = s.arg or ""
            store[s.key] = (before + arg) if s.f == "append" else arg
            s.out = s.arg
            history_of.setdefault(s.key, []).append((s, before))
    if not linearizable:
        _make_stale(rng, sims, history_of)
    events: list[tuple[int, int, _Sim, str]] = []
    for s in sims:
        events.append((s.call, 0, s, "invoke"))
        events.append((s.ret, 1, s, "ok"))
    events.sort(key=lambda e: (e[0], e[1], e[2].process))
    out: list[Op] = []
    for t, _, s, typ in events:
        value = {"key": s.key, "value": s.arg if typ == "invoke" else s.out}
        out.append(Op(index=len(out), time=t, type=typ, process=s.process, f=s.f, value=value))
    return out


def _make_stale(rng: Random, sims: list[_Sim], history_of: dict[str, list[tuple[_Sim, str]]]) -> None:
    gets = [s for s in sims if s.f == "get"]
    rng.shuffle(gets)
    for g in gets:
        writes = [(w, before) for w, before in history_of.get(g.key, []) if w.lin < g.lin]
        if not writes:
            continue
        last, before = writes[-1]
        # The stale value is impossible only if the write that produced it must precede `last` (it returned
        # before `last` was invoked) and `last` must precede the get; values are unique, so it never recurs.
        produced_before_last = len(writes) == 1 or writes[-2][0].ret < last.call
        if last.ret < g.call and produced_before_last and before != g.out:
            g.out = before
            return
    raise ValueError("kv_history: no get could be made stale; generate more ops")


def small_alphabet_history(
    rng: Random, *, model: str = "kv", clients: int = 3, ops: int = 120, info_rate: float = 0.25,
    alphabet: tuple[str, ...] = ("a", "b", "ab"), values: int = 3, corrupt: bool = False,
) -> list[Op]:
    """A one-key history with a tiny value alphabet and many indeterminate ops (issue 19's hard family).

    Values repeat and (for kv) are substrings of each other, so many orders reach the same state, and a
    quarter of the writes end ``info``: each info op takes effect (at a random point after its invoke) or
    not, with even odds, and its process retires (a fresh process id takes over, as in Jepsen).

    Args:
        rng: seeded randomness.
        model: ``"kv"`` (get / put / append of ``alphabet`` values, key "k", initial "") or ``"register"``
            (read / write / cas of ints ``0..values-1``, initial None, for the ``cas-register`` model).
        clients: concurrent workers; ops: total operations; info_rate: share of writes that end ``info``.
        corrupt: replace one ok read's value by another alphabet value (the history is then usually, not
            always, non-linearizable: the verdict must come from a checker).

    Raises:
        ValueError: an unknown ``model``.
    """
    if model not in ("kv", "register"):
        raise ValueError(f"small_alphabet_history: model must be 'kv' or 'register', got {model!r}")
    procs = list(range(clients))
    next_proc = clients
    clock = [rng.randrange(0, 10) for _ in range(clients)]
    sims: list[_Sim] = []
    info: list[bool] = []
    for _ in range(ops):
        w = rng.randrange(clients)
        call = clock[w] + rng.randrange(1, 6)
        dur = rng.randrange(1, 30)
        r = rng.random()
        if model == "kv":
            f = "get" if r < 0.4 else ("append" if r < 0.85 else "put")
            arg: Any = None if f == "get" else rng.choice(alphabet)
        else:
            f = "read" if r < 0.4 else ("write" if r < 0.75 else "cas")
            arg = None if f == "read" else (rng.randrange(values) if f == "write" else
                                            [rng.randrange(values), rng.randrange(values)])
        is_info = f not in ("get", "read") and rng.random() < info_rate
        lin = call + rng.randrange(0, dur + 1)
        if is_info and rng.random() < 0.5:
            lin = -1  # never took effect
        elif is_info:
            lin = call + rng.randrange(0, 4 * dur + 1)
        sims.append(_Sim(procs[w], f, "k", arg, call, lin, call + dur))
        info.append(is_info)
        clock[w] = call + dur
        if is_info:
            procs[w] = next_proc
            next_proc += 1
    state: Any = "" if model == "kv" else None
    failed: set[int] = set()
    order = sorted((i for i, s in enumerate(sims) if s.lin >= 0), key=lambda i: (sims[i].lin, i))
    for i in order:
        s = sims[i]
        if s.f in ("get", "read"):
            s.out = state
        elif s.f == "append":
            state, s.out = state + s.arg, s.arg
        elif s.f == "cas":
            pair: Any = s.arg
            if state == pair[0]:
                state = pair[1]
            else:
                failed.add(i)
            s.out = s.arg
        else:
            state, s.out = s.arg, s.arg
    if corrupt:
        reads = [s for s in sims if s.f in ("get", "read")]
        if reads:
            g = rng.choice(reads)
            pool = ["", *alphabet] if model == "kv" else [None, *range(values)]
            g.out = rng.choice([v for v in pool if v != g.out])
    events: list[tuple[int, int, int, str]] = []
    for i, s in enumerate(sims):
        events.append((s.call, 0, i, "invoke"))
        events.append((s.ret, 1, i, "info" if info[i] else ("fail" if i in failed else "ok")))
    events.sort()
    out: list[Op] = []
    for t, _, i, typ in events:
        s = sims[i]
        if model == "kv":
            value: Any = {"key": s.key, "value": s.out if typ == "ok" and s.f == "get" else s.arg}
        else:
            value = s.out if typ == "ok" and s.f == "read" else s.arg
        out.append(Op(index=len(out), time=t, type=typ, process=s.process, f=s.f, value=value))
    return out


def register_history(rng: Random, *, clients: int = 5, ops: int = 1000, values: int = 5) -> list[Op]:
    """A linearizable single-register history (read / write / cas of ints ``0..values-1``, initial None).

    Each op takes effect at a random point inside its interval; a cas whose compare does not match at that
    point completes ``fail``.  For the ``cas-register`` model (default ``drop`` fail policy).
    """
    sims: list[_Sim] = []
    clock = [rng.randrange(0, 50) for _ in range(clients)]
    for _ in range(ops):
        c = rng.randrange(clients)
        call = clock[c] + rng.randrange(1, 20)
        dur = rng.randrange(5, 200)
        r = rng.random()
        f = "read" if r < 0.5 else ("write" if r < 0.8 else "cas")
        arg: Any = None if f == "read" else (rng.randrange(values) if f == "write" else
                                            [rng.randrange(values), rng.randrange(values)])
        sims.append(_Sim(c, f, "r", arg, call, call + rng.randrange(0, dur + 1), call + dur))
        clock[c] = call + dur
    state: Any = None
    failed: set[int] = set()
    for s in sorted(sims, key=lambda s: s.lin):
        if s.f == "read":
            s.out = state
        elif s.f == "write":
            state = s.out = s.arg
        else:
            pair: Any = s.arg
            if state == pair[0]:
                state = pair[1]
            else:
                failed.add(id(s))
            s.out = s.arg
    events: list[tuple[int, int, int, _Sim]] = [(s.call, 0, s.process, s) for s in sims]
    events += [(s.ret, 1, s.process, s) for s in sims]
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    out: list[Op] = []
    for t, kind, _, s in events:
        typ = "invoke" if kind == 0 else ("fail" if id(s) in failed else "ok")
        out.append(Op(index=len(out), time=t, type=typ, process=s.process, f=s.f,
                      value=s.out if typ == "ok" else s.arg))
    return out
