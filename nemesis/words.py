"""Faults in words: the nemesis ops in effect, as the few words a person watching a run reads.

The live progress line (:mod:`harness.progress`) shows what the nemesis is doing to the cluster *now*, e.g.
``isolate b1-3, c2 | kill b1-2, c1`` -- never a Python repr of an op's value.  Two pure pieces:

* :data:`WORDS`, one entry per nemesis ``f`` (per row of the one fault table, :mod:`nemesis.faults`; a unit
  test holds it to the table, and the table to the nemeses' ``FS``): how an op's value reads as a
  :class:`Phrase` -- a verb, the nodes it touches, and any words after them.  ``start-partition`` reads its
  recorded grudge through :data:`PARTITION_WORDS`, one entry per generic partition kind
  (:data:`nemesis.schedule.PARTITION_KINDS`) and, still here, per kind our cluster's adapter adds (a recorded
  history is read without its system's topology).
* :func:`step` keeps the faults in effect as a history goes by.  Which ops start and end a fault is not a
  second list here but the fault table's rows (:mod:`nemesis.faults`): a fault with an ``undo``
  (``kill``, ``start-partition``...) is in effect from its successful completion -- whose value says what was
  really done, the resolved nodes and the grudge -- until the completion of its undo (``start``,
  ``stop-partition``...); a self-healing fault (``crash-at``, ``restart``, ``lose-unfsynced``...) crashes and
  restarts within the op, so it is in effect while the op runs, from its invocation.  A fault that failed
  (an ``error`` on its completion) never took effect; an undo that failed leaves its faults shown.

Every function here is total: an op value of an unexpected shape reads as its ``f`` alone, never as a repr,
and never raises (a progress line must not stop a run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nemesis.faults import FAULTS, ROWS
from nemesis.packet_behavior import DEFAULTS as PACKET_DEFAULTS

__all__ = ["PARTITION_WORDS", "WORDS", "Fault", "Phrase", "Say", "in_words", "phrase", "step"]


@dataclass(frozen=True)
class Phrase:
    """``verb nodes rest``: ``kill`` ``(b1-2, c1)`` reads "kill b1-2, c1"; ``crash`` ``(c1,)`` `` at
    raft.before_apply`` reads "crash c1 at raft.before_apply".  Phrases with the same verb and rest are one
    group on the line, their nodes merged (two kills read as one "kill b1-2, c1")."""

    verb: str
    nodes: tuple[str, ...] = ()
    rest: str = ""

    def text(self) -> str:
        return self.verb + (" " + ", ".join(self.nodes) if self.nodes else "") + self.rest


@dataclass(frozen=True)
class Say:
    """How one ``f`` reads.  ``words(value)`` is the phrase (None: the op touched nothing, e.g. a ``kill``
    whose selector resolved to no node).  ``replaces``: the fault replaces the earlier one of the same ``f``
    (a new partition heals the old one first; so does a new packet fault).  ``listed``: an undo that takes
    back only the nodes its completion lists (``start``, ``resume``, ``disarm-failpoint``), not all."""

    words: Callable[[Any], Phrase | None]
    replaces: bool = False
    listed: bool = False


@dataclass(frozen=True)
class Fault:
    """One fault in effect: the ``f`` that made it and how it reads."""

    f: str
    phrase: Phrase


# ---------------------------------------------------------------------------------------------
# Reading values: only strings and numbers ever reach the words (never a container's repr)


def _field(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _name(x: Any) -> str | None:
    if isinstance(x, str) and x.strip():
        return "".join(x.split())  # a node name is one token: whitespace would let the line cut inside it
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    return None


def _nodes(raw: Any) -> tuple[str, ...]:
    """Node names from a list of names, a mapping keyed by node, or one name."""
    if isinstance(raw, Mapping):
        raw = list(raw)
    if isinstance(raw, str | int):
        raw = [raw]
    if not isinstance(raw, Sequence):
        return ()
    out: list[str] = []
    for x in raw:
        n = _name(x)
        if n is not None and n not in out:
            out.append(n)
    return tuple(out)


def _ok_nodes(results: Any) -> tuple[str, ...]:
    """The nodes of a per-node result mapping whose result is "ok"."""
    if not isinstance(results, Mapping):
        return ()
    return _nodes([n for n, r in results.items() if r == "ok"])


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and x == x else None


def _ms(delta: float) -> str:
    """A clock shift in short words: +60s, -5s, +200ms."""
    sign = "-" if delta < 0 else "+"
    a = abs(delta)
    return f"{sign}{a / 1000:g}s" if a >= 1000 else f"{sign}{a:g}ms"


# ---------------------------------------------------------------------------------------------
# Partitions: the recorded grudge (node -> the nodes it drops) in words


Grudge = Mapping[str, frozenset[str]]


def _grudge(value: Any) -> dict[str, frozenset[str]]:
    raw = _field(value, "grudge")
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, frozenset[str]] = {}
    for k, v in raw.items():
        n = _name(k)
        drops = frozenset(_nodes(v)) - {n}
        if n is not None and drops:
            out[n] = drops
    return out


def _sides(g: Grudge) -> list[tuple[str, ...]] | None:
    """The sides of a grudge whose every node drops exactly the nodes outside its own side (smallest side
    first); None for any other grudge (one-way drops, a ring, a cut that spares some links)."""
    if not g:
        return None
    everyone = frozenset(g).union(*g.values())
    by_drops: dict[frozenset[str], list[str]] = {}
    for n, d in g.items():
        by_drops.setdefault(d, []).append(n)
    sides = []
    for d, members in by_drops.items():
        m = frozenset(members)
        if m & d or m | d != everyone:
            return None
        sides.append(tuple(sorted(m)))
    if sum(map(len, sides)) != len(everyone):
        return None
    return sorted(sides, key=lambda s: (len(s), s))


def _cut_from(g: Grudge) -> Phrase | None:
    """One node cut off from some others, the rest untouched (``isolate-master-from-slaves``)."""
    if not g:
        return None
    center = min(g, key=lambda n: (-len(g[n]), n))
    others = g[center]
    if set(g) - {center} != others or any(g[o] != {center} for o in others):
        return None
    return Phrase("cut", (center,), " from " + ", ".join(sorted(others)))


def _one_way(g: Grudge) -> Phrase | None:
    """Packets from some nodes dropped by others, not the other way."""
    senders = sorted(frozenset().union(*g.values())) if g else []
    if not senders or any(g.get(s, frozenset()) & set(g) for s in senders):
        return None
    return Phrase("one-way", tuple(senders), " -> " + ", ".join(sorted(g)))


def _generic(g: Grudge) -> Phrase:
    sides = _sides(g)
    if sides:
        return Phrase("split", sides[0], "".join(" / " + ", ".join(s) for s in sides[1:]))
    return _cut_from(g) or _one_way(g) or Phrase("partition", tuple(sorted(g)))


def _isolate(g: Grudge) -> Phrase:
    sides = _sides(g)
    return Phrase("isolate", sides[0]) if sides and len(sides) == 2 else _generic(g)


def _bridge(g: Grudge) -> Phrase:
    sides = _sides(g)  # the bridge node talks to both halves, so the grudge leaves it out
    if sides and len(sides) == 2:
        return Phrase("bridge", sides[0], " / " + ", ".join(sides[1]))
    return _generic(g)


def _cut(g: Grudge) -> Phrase:
    return _cut_from(g) or _generic(g)


def _ring(g: Grudge) -> Phrase:
    return Phrase("majorities ring", (), f" of {len(frozenset(g).union(*g.values()))} nodes") if g else _generic(g)


def _one_way_kind(g: Grudge) -> Phrase:
    return _one_way(g) or _generic(g)


PARTITION_WORDS: Mapping[str, Callable[[Grudge], Phrase]] = {
    "random-halves": _generic, "isolate": _isolate, "isolate-controller-leader": _isolate,
    "isolate-master": _isolate, "isolate-master-from-slaves": _cut, "isolate-master-from-controllers": _cut,
    "majorities-ring": _ring, "bridge": _bridge, "one-way": _one_way_kind, "grudge": _generic,
}
"""Partition kind -> its grudge in words (``isolate b1-3, c2``, ``cut b1-1 from b1-2, b1-3``, ``split c1 /
c2, c3``).  A grudge not of its kind's shape reads in the generic way."""


def _partition(value: Any) -> Phrase | None:
    g = _grudge(value)
    kind = _field(value, "kind")
    if not g:
        return None
    return PARTITION_WORDS.get(kind if isinstance(kind, str) else "grudge", _generic)(g)


# ---------------------------------------------------------------------------------------------
# The other fs


def _process(verb: str) -> Callable[[Any], Phrase | None]:
    """kill/terminate/pause/start/resume complete with the list of nodes they acted on."""
    def words(value: Any) -> Phrase | None:
        nodes = _nodes(value) if isinstance(value, list) else ()
        return Phrase(verb, nodes) if nodes else None
    return words


def _bump(value: Any) -> Phrase:
    d = _number(_field(value, "delta_ms"))
    return Phrase("clock " + _ms(d) if d is not None else "clock bump", _nodes(_field(value, "nodes")))


def _skew(value: Any) -> Phrase:
    r = _number(_field(value, "rate"))
    return Phrase(f"clock x{r:g}" if r is not None else "clock skew", _nodes(_field(value, "nodes")))


def _strobe(value: Any) -> Phrase:
    d = _number(_field(value, "delta_ms"))
    return Phrase("clock strobe" + (f" {abs(d):g}ms" if d is not None else ""), _nodes(_field(value, "nodes")))


PACKET_FAULTS = tuple(k for k in PACKET_DEFAULTS if k != "rate")
"""The behaviours a ``start-packet`` completion's netem arguments name, from the one table of behaviours
(:data:`nemesis.packet_behavior.DEFAULTS`; ``rate`` is a field of the completion of its own)."""
SHAPER_FLAGS = (("--delay-ms", "delay"), ("--loss", "loss"), ("--duplicate", "duplicate"))
"""The NFQUEUE shaper's flags (:func:`nemesis.packet_behavior.shaper_args`) and the behaviour each is; the
shaper is passed every flag, zero for the behaviours not asked for."""


def _packet(value: Any) -> Phrase:
    netem = _field(value, "netem")
    shaper = _field(value, "shaper")
    named = [k for k in PACKET_FAULTS if isinstance(netem, str) and k in netem.split()]
    args = shaper.split() if isinstance(shaper, str) else []
    for flag, name in SHAPER_FLAGS:
        i = args.index(flag) + 1 if flag in args else len(args)
        if i < len(args) and _number(_float(args[i])):
            named.append(name)
    if _field(value, "rate"):
        named.append("rate")
    return Phrase("net " + ("+".join(named) or "shaped"), _nodes(_field(value, "nodes")))


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _disk(value: Any) -> Phrase:
    fault = _name(_field(value, "fault")) or "fault"
    results = _field(value, "results")
    nodes = _ok_nodes(results) if isinstance(results, Mapping) else _nodes(_field(value, "nodes"))
    return Phrase(f"disk {fault}", nodes)


def _targets(value: Any) -> tuple[str, ...]:
    """What a self-healing fault acts on, shown while it runs: its selector as the spec wrote it."""
    return _nodes(_field(value, "targets") if isinstance(value, Mapping) else value)


def _arm(value: Any) -> Phrase | None:
    nodes = _ok_nodes(_field(value, "results"))
    return Phrase("arm", nodes, f" at {_name(_field(value, 'name')) or '?'}") if nodes else None


def _crash_at(value: Any) -> Phrase:
    return Phrase("crash", _targets(value) or ("one",), f" at {_name(_field(value, 'name')) or '?'}")


def _registration_crash(value: Any) -> Phrase:
    fp = _name(_field(value, "failpoint"))
    return Phrase("registration crash", (), f" at {fp}" if fp else "")


def _corrupt(value: Any) -> Phrase:
    mode = _name(_field(value, "mode"))
    return Phrase("corrupt", _targets(value), f" ({mode})" if mode else "")


def _fixed(verb: str) -> Callable[[Any], Phrase]:
    return lambda value: Phrase(verb)


WORDS: Mapping[str, Say] = {
    # partition
    "start-partition": Say(_partition, replaces=True), "stop-partition": Say(_fixed("heal partition")),
    # process
    "kill": Say(_process("kill")), "terminate": Say(_process("terminate")), "pause": Say(_process("pause")),
    "start": Say(_process("start"), listed=True), "resume": Say(_process("resume"), listed=True),
    "restart": Say(lambda v: Phrase("restart", _targets(v) or ("controllers:all",))),
    # clock
    "bump-clock": Say(_bump), "skew-clock": Say(_skew), "strobe-clock": Say(_strobe),
    "reset-clock": Say(_fixed("reset clocks")), "check-clock-offsets": Say(_fixed("check clocks")),
    # packet
    "start-packet": Say(_packet, replaces=True), "stop-packet": Say(_fixed("heal net")),
    # failpoints
    "arm-failpoint": Say(_arm), "crash-at": Say(_crash_at),
    "disarm-failpoint": Say(lambda v: Phrase("disarm", _nodes(_field(v, "results"))), listed=True),
    # disk
    "start-disk": Say(_disk), "stop-disk": Say(_fixed("heal disks")),
    "lose-unfsynced": Say(lambda v: Phrase("lose-unfsynced", _targets(v) or ("brokers:one",))),
    "corrupt-file": Say(_corrupt),
    # registration
    "registration-crash": Say(_registration_crash),
}
"""Every nemesis ``f`` -> how its value reads.  For a fault the value is its completion's (what was done)
or, self-healing, its invocation's (what it is about to do); an undo's phrase names what it took back."""


def phrase(f: str, value: Any) -> Phrase:
    """``f`` with ``value`` in words; ``f`` alone when the value has no words (or an unexpected shape)."""
    say = WORDS.get(f)
    try:
        p = say.words(value) if say is not None else None
    except Exception:  # a value of an unexpected shape: the f still says what happened
        p = None
    return p if p is not None else Phrase(f)


# ---------------------------------------------------------------------------------------------
# The faults in effect


_UNDONE_BY: Mapping[str, frozenset[str]] = {
    u.f: frozenset(r.f for r in ROWS if r.undo == u.f) for u in ROWS if not u.fault
}
"""Undo f (or read) -> the faults it takes back, from the fault table."""


def step(effect: tuple[Fault, ...], op_type: str, f: str, value: Any, error: Any = None) -> tuple[Fault, ...]:
    """The faults in effect after one nemesis history record (an ``invoke`` or a completion); see the
    module docstring for when a fault starts and ends."""
    say, r = WORDS.get(f), FAULTS.get(f)
    if say is None or r is None:  # a progress line never raises: an f with no row is the tests' to catch
        return effect
    if r.self_healing:
        if op_type == "invoke":
            return (*effect, Fault(f, phrase(f, value)))
        i = next((i for i, x in enumerate(effect) if x.f == f), None)  # one op of an f runs at a time
        return effect if i is None else effect[:i] + effect[i + 1:]
    if op_type == "invoke" or error:
        return effect
    if r.undo is not None:
        try:
            p = say.words(value)
        except Exception:
            p = Phrase(f)
        kept = tuple(x for x in effect if x.f != f) if say.replaces else effect  # replaced even by a no-op
        return kept if p is None else (*kept, Fault(f, p))
    undone = _UNDONE_BY.get(f, frozenset())
    if not say.listed:
        return tuple(x for x in effect if x.f not in undone)
    back = set(phrase(f, value).nodes)
    out = []
    for x in effect:
        if x.f in undone:
            left = tuple(n for n in x.phrase.nodes if n not in back)
            if not left:
                continue
            x = replace(x, phrase=replace(x.phrase, nodes=left))
        out.append(x)
    return tuple(out)


def in_words(effect: Iterable[Fault]) -> list[str]:
    """The faults in effect as groups of words, oldest first: phrases with the same verb and rest merge
    their nodes (``kill b1-2, c1``)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for x in effect:
        nodes = groups.setdefault((x.phrase.verb, x.phrase.rest), [])
        nodes.extend(n for n in x.phrase.nodes if n not in nodes)
    return [Phrase(verb, tuple(nodes), rest).text() for (verb, rest), nodes in groups.items()]
