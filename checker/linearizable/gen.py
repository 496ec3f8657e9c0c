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
