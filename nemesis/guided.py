"""The guided nemesis's policy: which fault next, on whom, and when -- chosen from what the cluster did.

Theory of operation (after Mallory's feedback loop, applied to a broker with a controller).  The policy
sees the observed event stream (:mod:`harness.observe`) and the coverage it produces
(:mod:`nemesis.coverage`), and drives a small machine on the nemesis thread:

1. *Moments.*  With no fault active, it waits ``settle_s`` after the last undo and after the last trigger the
   cluster raised (it is still recovering from the last fault: restarts, elections, truncations; at most
   ``max_wait_s`` longer), forgetting the triggers it saw meanwhile, then strikes at the first
   *trigger* -- an event worth aiming at (:data:`TRIGGERS`: a SyncStateSet shrink or expansion, a master
   election, a new controller leader, a fencing, a failpoint armed, a truncation, a restart, clients
   starting to see ``info``/``fail``) -- or, if none comes, after ``quiet_wait_s`` (context ``quiet``): a
   settled cluster rarely raises one by itself, and every second waited for it is a second of the budget
   (waiting ``max_wait_s`` for one, runs sat 3.5-5 s after each undo for a trigger that never came).
   With faults active, each trigger the cluster itself raises (client outcomes do not count: any fault makes
   clients time out) is a moment too: undo the oldest now (heal the partition once the killed master's
   absence is seen, so an out-of-sync slave can be elected), *stack* a fault of another family (isolate
   the slaves, see the SyncStateSet shrink to the master, then kill the master; up to ``max_depth``), or hold
   on.  A fault nobody undoes is undone after its hold (drawn from ``holds_s``).
2. *Preconditions are kept.*  A fault is undone -- by a decision or at the end of its hold -- only after the
   cluster has *reacted* to it (a trigger the cluster raised after the fault began), or after the longest hold:
   a partition undone before the SyncStateSet had time to shrink, or a killed master restarted before the
   controller chose its successor, taught nothing.  A decision lifts a fault no sooner than the shortest hold
   either: any trigger counts as a reaction, and one fault has several (killing the primaries elects a new
   controller leader at once, but the master's successor only after its lease, which a restart 0.4 s in undid).
   And a *narrowing* trigger (:data:`NARROWING`: the SyncStateSet shrank, a broker was fenced) is a moment to stack
   or hold, never to undo: the fault that cut the redundancy is what makes the next fault dangerous; and one that
   leaves some redundancy is no moment at all: the narrowing is still under way (the slaves' leases expire before the
   master drops them from the SyncStateSet), and the decision waits for the state it leads to -- a hold that ends at
   such a trigger runs on (``max_wait_s``) so the trigger, not the clock, decides. A stack unwinds from the bottom:
   only the oldest fault is a candidate to undo, and a stacked fault's hold outlasts the one below, so the cluster
   recovers from the precondition while the aimed fault is still in force (the partition that cut the slaves off
   heals while the master is still dead: the out-of-sync slaves are what the controller finds).
3. *Choice.*  A move that names the node that raised the trigger (the master after a SyncStateSet shrink or a
   master election, the controller leader after a leader election: :data:`AIM`) gets a prior bonus -- and on the
   quiet, with nothing to aim at, a move that names a node holding authority (a master or the controller
   leader: :data:`QUIET_AIM`), since what a fault can break is what such a node holds alone (unreplicated
   acknowledged writes, a lease, the controller's latest decisions); when the
   master holds the only copy (a shrink to the master alone, :data:`nemesis.coverage.MASTER_ONLY`) only the
   moves aimed at it are candidates, if there are any (the optimism for untried moves outbid a mere bonus).
   The context of a decision is what is active plus the trigger (``partition:isolate-master|
   sync-state-set:shrink``).  Every (context, choice) pair keeps (tries, reward: log(1 + new coverage
   points) after it); the choice with the best upper confidence bound is taken -- a pair never tried in
   this context starts from what the choice earned in every context, a move never tried at all is tried
   before any is repeated -- ties broken by the seeded RNG.
4. *Credit.*  The coverage points reached between a choice and the next decision are credited to it.
5. *A system seen through its clients only* (``decide(..., clients_only=True)``: it neither reports events of its
   own nor says who leads -- RabbitMQ).  The clients' outcomes are then all there is of the cluster's reaction, so they
   stand for it everywhere a cluster trigger is asked for: a client outcome turning ``info``/``fail`` after a fault
   took effect is the fault's reaction (it may then be undone before the longest hold), a moment to undo, stack or
   hold while faults are active, and the aftermath a new fault waits out.  And once the clients reacted to the bottom
   fault and then said nothing new for ``max_wait_s`` (no sooner than the shortest hold), they have settled under
   it: that is a moment too (:data:`SETTLED`, once per quiet stretch), or a fault whose effect the clients stop
   reporting would be held to the end of its hold whatever happened.  Its moves are the packages' faults as
   for any system (validation has refused selectors the system cannot serve), and nothing is aimed: no trigger
   names a node, and no move hits a pool of :data:`QUIET_AIM`.  Otherwise (``clients_only`` False, the default)
   client outcomes open moments only with no fault active, as above.

Rules of this file: pure.  Time (``now_s``, seconds since the main phase started), the events and the RNG
are arguments; :func:`decide` returns the decision, when to ask again, and the new :class:`State`.
The shell that performs decisions and records them as an ordinary schedule is :mod:`nemesis.guided_run`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from nemesis.coverage import MASTER_ONLY, Coverage, label, next_coverage, points
from nemesis.schedule import PARTITION_AIMS, UNDO, Step, fault_label, selectors_of
from nemesis.targets import pools_of

__all__ = [
    "AIM", "NARROWING", "QUIET_AIM", "TRIGGERS", "TRIGGER_TABLE", "Config", "Decision", "Move", "Rng", "State",
    "Trigger", "aims_of", "decide", "memory_of", "moves_from_ops", "state_from_memory", "took_effect",
]

@dataclass(frozen=True)
class Trigger:
    """An observed event that opens a moment (see the module docstring), by the prefix of its label
    (:func:`nemesis.coverage.label`).

    Attributes:
        prefix: the label prefix; the first row whose prefix a label starts with is the label's row.
        aim: the pools (rows of :attr:`nemesis.targets.Topology.table`) a move must hit to aim at the node that
            raised it --
            what the move's selectors and partition kind draw from (:func:`aims_of`), never its spelling.
        narrowing: it says the active faults cut the cluster's redundancy: stack or hold, never undo.
    """

    prefix: str
    aim: tuple[str, ...] = ()
    narrowing: bool = False


_MASTER = ("masters", "primaries")
TRIGGER_TABLE: tuple[Trigger, ...] = (
    Trigger("sync-state-set:shrink", _MASTER, narrowing=True),
    Trigger("sync-state-set:", _MASTER),
    Trigger("apply:AlterSyncStateSet:shrink", _MASTER, narrowing=True),
    Trigger("apply:AlterSyncStateSet", _MASTER),
    Trigger("become-master", _MASTER),
    Trigger("apply:ElectMaster", _MASTER),
    Trigger("raft-leader", ("controller-leader", "primaries")),
    Trigger("fenced", narrowing=True),
    Trigger("failpoint-armed"),
    Trigger("truncate"),
    Trigger("node-restart"),
    Trigger("client-outcome:"),
    # all a system watched from outside raises itself (harness.observe.primary_events): a node gained or lost
    # leadership, the count of leaders changed
    Trigger("primary-change:gained", ("primaries",)),
    Trigger("primary-change:"),
    Trigger("primaries:"),
)
"""The one table of guided mode's triggers: right after a SyncStateSet shrink or a master election, hit the
master; right after a leader election, the leader.  :data:`TRIGGERS`, :data:`AIM` and :data:`NARROWING` derive
from it; tests/unit/nemesis/test_faults.py holds its aims to the pool table and to the moves the packages make."""
TRIGGERS = tuple(t.prefix for t in TRIGGER_TABLE)
"""Label prefixes of the events that open a moment."""

HOLD = "hold"
SETTLED = "settled"
"""The trigger of a system seen through its clients only whose clients reacted to the active faults and then fell
quiet (:func:`_settled_at`): without it, a fault whose effect the clients stop reporting (RabbitMQ's mirrored queues
each side confirming alone) has no moment left but the end of its hold."""
UNDO_PREFIX = "undo:"
AIM: tuple[tuple[str, tuple[str, ...]], ...] = tuple((t.prefix, t.aim) for t in TRIGGER_TABLE if t.aim)
"""Trigger label prefix -> the pools a move must hit to aim at the node that raised it."""
QUIET_AIM = ("masters", "primaries", "controller-leader")
"""The pools a move must hit to be aimed on the quiet (no trigger, no fault active): the nodes holding authority.
Untried moves are otherwise tried in random order, and with 20 moves a run spent its first minute on faults that
cannot lose anything (a slave killed, a follower cut off) before it reached the master."""
AIM_BONUS = 1.0
"""Added to an aimed move's score: a prior tilt (rewards are log(1 + new points), about 2-3 for a fault that
reaches something new), which learning can overrule."""
LAST_COPY_BONUS = 3.0
"""The aim bonus when the trigger left the master alone in the SyncStateSet (:data:`MASTER_ONLY`): the master
then holds the only copy of what it acknowledged, the moment a fault on it reaches furthest."""
NARROWING = tuple(t.prefix for t in TRIGGER_TABLE if t.narrowing)
"""Label prefixes of triggers that say the active faults cut the cluster's redundancy: stack or hold, not undo."""


def aims_of(move: Move, partition_aims: Mapping[str, str | None] = PARTITION_AIMS) -> frozenset[str]:
    """The pools ``move`` hits nodes of: those of the selectors its value names where its fault-table row says,
    and of the role its partition kind aims at (``partition_aims``: the system's,
    :func:`nemesis.schedule.partition_aims`; :func:`nemesis.schedule.selectors_of`).  Pure; a move of an ``f``
    without a row hits none."""
    return frozenset(p for sel in selectors_of(move.f, move.value, partition_aims) for p in pools_of(sel))


class Rng(Protocol):
    """What the policy draws from (a seeded ``random.Random`` in the shell)."""

    def randrange(self, start: int, stop: int | None = ..., step: int = ...) -> int: ...


@dataclass(frozen=True)
class Move:
    """One fault the policy may inject: ``f`` with ``value``; ``family`` is what undoes it (two moves of one
    family are never active together: a second partition would replace the first)."""

    f: str
    value: Any = None

    @property
    def key(self) -> str:
        v = self.value if isinstance(self.value, Mapping) else {}
        target = v.get("targets") if isinstance(self.value, Mapping) else self.value
        return fault_label(self.f, self.value) + (f"@{target}" if target else "")

    @property
    def family(self) -> str:
        return UNDO.get(self.f, self.f)

    @property
    def undo(self) -> str | None:
        return UNDO.get(self.f)


@dataclass(frozen=True)
class Config:
    """``moves``: the faults to choose from; ``settle_s``: quiet time after an undo before the next fault;
    ``max_wait_s``: the longest the cluster's aftermath delays a fault, and the longest a hold runs on at a
    narrowing trigger; ``quiet_wait_s``: once settled, strike on the quiet after this long without a trigger;
    ``holds_s``: longest holds to draw from
    (a fault is undone then unless a decision undid it earlier);
    ``max_depth``: faults active at once; ``explore``: weight of the exploration bonus."""

    moves: tuple[Move, ...]
    settle_s: float = 1.0
    max_wait_s: float = 4.0
    quiet_wait_s: float = 1.0
    holds_s: tuple[float, ...] = (4.0, 8.0, 12.0)
    max_depth: int = 2
    explore: float = 1.0

    partition_aims: Mapping[str, str | None] = field(default_factory=lambda: PARTITION_AIMS, repr=False,
                                                     compare=False)
    """The system's partition kinds -> what each aims at (:func:`nemesis.schedule.partition_aims`: the generic
    kinds and the adapter's, such as our cluster's ``isolate-master-from-slaves``)."""
    aims: Mapping[str, frozenset[str]] = field(init=False, repr=False, compare=False)
    """Move key -> the pools the move hits (:func:`aims_of`), computed once."""

    def __post_init__(self) -> None:
        if not self.moves:
            raise ValueError("guided nemesis: no fault moves to choose from (name nemesis packages)")
        object.__setattr__(self, "aims", {m.key: aims_of(m, self.partition_aims) for m in self.moves})


@dataclass(frozen=True)
class Active:
    """A fault in force since ``at_s``; its hold ends at ``undo_at_s``; ``reacted``: the cluster raised a trigger
    after it began (until then it is kept, up to the longest hold)."""

    move: Move
    at_s: float
    undo_at_s: float
    reacted: bool = False
    effect_s: float | None = None
    """When the nemesis reported it done (None: not yet): what the cluster raised before is not its reaction."""


@dataclass(frozen=True)
class Decision:
    """Perform ``step`` now; ``context`` and ``move_key`` say why (None for an undo)."""

    step: Step
    context: str | None = None
    move_key: str | None = None


@dataclass(frozen=True)
class State:
    active: tuple[Active, ...] = ()
    quiet_since_s: float = 0.0
    cluster_at_s: float = 0.0
    """When the cluster last raised a trigger (main-phase seconds): a new fault waits for it to settle."""
    consumed: int = 0
    """Events already looked at for triggers."""
    trigger: str | None = None
    stats: Mapping[tuple[str, str], tuple[int, float]] = field(default_factory=dict)
    """(context, move key) -> (tries, reward): reward is log(1 + new coverage points) per try."""
    credit: tuple[str, str, int] | None = None
    """(context, choice, coverage count when chosen) of the last choice, credited at the next decision."""
    coverage: Coverage = field(default_factory=Coverage)
    steps: tuple[Step, ...] = ()
    covered_steps: int = 0
    k: int = 0
    settled_s: float | None = None
    """``cluster_at_s`` as of the last :data:`SETTLED` moment (one per quiet stretch of the clients)."""


def memory_of(st: State) -> dict[str, Any]:
    """What the policy learned, as JSON-ready data: its statistics and the coverage points it has reached."""
    return {"stats": [[c, k, n, r] for (c, k), (n, r) in sorted(st.stats.items())],
            "reached": sorted([f, role, list(labels)] for f, role, labels in st.coverage.reached)}


def state_from_memory(memory: Mapping[str, Any]) -> State:
    """A fresh state that starts from ``memory`` (:func:`memory_of`): a campaign of runs keeps learning, and a
    point already reached in an earlier run is not new again.

    Raises:
        ValueError: malformed memory (naming the entry).
    """
    try:
        stats = {(str(c), str(k)): (int(n), float(r)) for c, k, n, r in memory.get("stats") or []}
        reached = frozenset((str(f), str(role), tuple(map(str, labels))) for f, role, labels in
                            memory.get("reached") or [])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"guided memory: expected stats [[context, move, tries, reward]...] and reached "
                         f"[[fault, role, [labels]]...]; {exc}") from None
    return State(stats=stats, coverage=Coverage(reached, ()))


def moves_from_ops(ops: Sequence[Mapping[str, Any]]) -> tuple[Move, ...]:
    """Distinct moves from fault ops ``{f, value}`` (the packages' vocabulary), in first-seen order."""
    out: list[Move] = []
    for op in ops:
        m = Move(str(op["f"]), op.get("value"))
        if m not in out:
            out.append(m)
    return tuple(out)


def _of_cluster(e: Mapping[str, Any], clients_only: bool) -> bool:
    """Whether ``e`` counts as the cluster's own doing: any event but a client outcome -- or, for a system seen
    through its clients only, a client outcome too (it is all there is of the cluster's reaction)."""
    return clients_only or e.get("role") != "client"


def _trigger(events: Sequence[Mapping[str, Any]], *, cluster_only: bool = False,
             clients_only: bool = False) -> str | None:
    """The latest trigger among ``events``; with ``cluster_only`` client outcomes do not count (a fault makes
    clients time out at once; the moment to undo or stack is when the cluster itself reacted) -- unless
    ``clients_only``: the system raises nothing else."""
    found = None
    for e in events:
        lab = label(e)
        if lab.startswith(TRIGGERS) and not lab.endswith(":ok") and not (cluster_only
                                                                        and not _of_cluster(e, clients_only)):
            found = lab
    return found


def _reacted(active: Sequence[Active], events: Sequence[Mapping[str, Any]], start_ns: int,
             clients_only: bool = False) -> tuple[Active, ...]:
    """``active`` with ``reacted`` set on each fault some cluster trigger among ``events`` came after (a client
    outcome counts when ``clients_only``)."""
    times = [int(e.get("time", 0)) for e in events
             if _of_cluster(e, clients_only) and label(e).startswith(TRIGGERS) and not label(e).endswith(":ok")]
    last = max(times, default=None)
    return tuple(a if a.reacted or last is None or a.effect_s is None or last < start_ns + int(a.effect_s * 1e9)
                 else replace(a, reacted=True) for a in active)


def _settled_at(st: State, cfg: Config) -> float | None:
    """When the clients will have settled under the active faults (a system seen through its clients only): the
    bottom fault's clients reacted, they have said nothing new for ``max_wait_s`` and it has been held for the
    shortest hold -- the fault has done what it will do, a moment to undo, stack or hold (:data:`SETTLED`).  None
    when the bottom fault has no reaction yet, or this quiet stretch already had its moment."""
    bottom = st.active[0]
    if not bottom.reacted or st.settled_s == st.cluster_at_s:
        return None
    return max(bottom.at_s + min(cfg.holds_s), st.cluster_at_s + cfg.max_wait_s)


def took_effect(st: State, at_s: float) -> State:
    """``st`` once the nemesis has reported its latest step done at ``at_s`` (main-phase seconds)."""
    return replace(st, active=tuple(a if a.effect_s is not None else replace(a, effect_s=max(at_s, a.at_s))
                                    for a in st.active))


def _releasable(a: Active, cfg: Config, now_s: float) -> bool:
    """Whether ``a`` may be undone now: the cluster reacted to it, or it has been held for the longest hold."""
    return a.reacted or now_s >= a.at_s + max(cfg.holds_s)


def _context(active: Sequence[Active], trigger: str | None) -> str:
    now = "+".join(a.move.key.split("@")[0] for a in active) or "none"
    return f"{now}|{trigger or 'quiet'}"


PSEUDO = 0.5
"""Pseudo-tries of a (context, move) pair's prior: a pair never tried in this context starts from what the move
earned in every context (for a move never tried at all: the best earning plus ``explore``, so every move is
tried once before any is repeated), so one learned context informs the next."""


def _priors(stats: Mapping[tuple[str, str], tuple[int, float]]) -> dict[str, float]:
    tries: dict[str, int] = {}
    reward: dict[str, float] = {}
    for (_, key), (n, r) in stats.items():
        tries[key] = tries.get(key, 0) + n
        reward[key] = reward.get(key, 0.0) + r
    return {k: reward[k] / tries[k] for k in tries if tries[k]}


def _score(stats: Mapping[tuple[str, str], tuple[int, float]], context: str, key: str, total: int, explore: float,
           prior: float) -> float:
    tries, reward = stats.get((context, key), (0, 0.0))
    mean = (reward + prior * PSEUDO) / (tries + PSEUDO)
    return mean + explore * math.sqrt(math.log(total + 2) / (tries + PSEUDO))


def _aim(cfg: Config, trigger: str | None, key: str) -> float:
    """The prior bonus of move ``key`` at ``trigger``: it hits the pool of the node that raised it (:data:`AIM`),
    more when the master was left alone in the SyncStateSet; on the quiet (``trigger`` None) a pool holding
    authority (:data:`QUIET_AIM`); undo and hold are never aimed."""
    if key == HOLD or key.startswith(UNDO_PREFIX):
        return 0.0
    hits = cfg.aims.get(key, frozenset())
    if trigger is None:
        return AIM_BONUS if hits & set(QUIET_AIM) else 0.0
    pools = next((w for prefix, w in AIM if trigger.startswith(prefix)), ())
    if not hits & set(pools):
        return 0.0
    return LAST_COPY_BONUS if trigger.endswith(MASTER_ONLY) else AIM_BONUS


def _choose(cfg: Config, st: State, context: str, candidates: Sequence[str], rng: Rng,
            trigger: str | None = None) -> str:
    total = sum(st.stats.get((context, c), (0, 0.0))[0] for c in candidates)
    priors = _priors(st.stats)
    optimistic = max(priors.values(), default=0.0) + cfg.explore  # never tried anywhere: before any repeat
    scored = [(_score(st.stats, context, c, total, cfg.explore, priors.get(c, optimistic))
               + _aim(cfg, trigger, c), c) for c in candidates]
    best = max(sc for sc, _ in scored)
    tied = [c for sc, c in scored if sc >= best - 1e-12]
    return tied[rng.randrange(len(tied))]


def _credited(st: State) -> State:
    if st.credit is None:
        return st
    context, key, before = st.credit
    tries, reward = st.stats.get((context, key), (0, 0.0))
    gained = max(0, st.coverage.count - before)
    stats = {**st.stats, (context, key): (tries + 1, reward + math.log1p(gained))}
    return replace(st, stats=stats, credit=None)


def _undo(st: State, a: Active, now_s: float, context: str | None, key: str | None) -> tuple[Decision, State]:
    active = tuple(x for x in st.active if x is not a)
    step = Step(round(now_s, 3), a.move.undo or "start", None)
    credit = (context, key, st.coverage.count) if context is not None and key is not None else st.credit
    st = replace(st, active=active, quiet_since_s=now_s if not active else st.quiet_since_s,
                 steps=(*st.steps, step), trigger=None, credit=credit)
    return Decision(step, context, key), st


def decide(st: State, cfg: Config, events: Sequence[Mapping[str, Any]], *, now_s: float, start_ns: int,
           rng: Rng, clients_only: bool = False) -> tuple[Decision | None, float, State]:
    """One decision (see the module docstring).

    Args:
        st: the policy's state after the previous decision.
        cfg: moves and timing.
        events: every observed event so far (times in run ns; the policy reads the ones it has not seen).
        now_s: seconds since the main phase started.
        start_ns: the run time (ns) the main phase started at, to place steps and events on one axis.
        rng: the decision's seeded RNG.
        clients_only: the events are the clients' outcomes only (the observer sees nothing the system raises
            itself: :func:`harness.observe.clients_only`), so they stand for its reactions (module docstring, 5).
    Returns:
        ``(decision or None, ask again at (s), new state)``.  The caller performs the decision's step now.
    """
    new = events[st.consumed:]
    cov = st.coverage
    if new or st.covered_steps != len(st.steps):  # points are recomputed; only new ones count
        faults = [{"time": start_ns + int(s.at_s * 1e9), "process": "nemesis", "type": "invoke", "f": s.f,
                   "value": s.value} for s in st.steps]
        cov = next_coverage(cov, points(events, faults))
    trig = _trigger(new, cluster_only=bool(st.active), clients_only=clients_only) or st.trigger
    active = _reacted(st.active, new, start_ns, clients_only)
    settled_from = max(st.quiet_since_s, st.cluster_at_s)  # as of the events before this batch
    cluster_at = max([st.cluster_at_s] + [(int(e.get("time", 0)) - start_ns) / 1e9 for e in new
                                          if _of_cluster(e, clients_only) and label(e).startswith(TRIGGERS)])
    st = replace(st, consumed=len(events), coverage=cov, trigger=trig, covered_steps=len(st.steps), active=active,
                 cluster_at_s=cluster_at)
    due = [a for a in st.active if a.undo_at_s <= now_s and _releasable(a, cfg, now_s)]
    if due and trig is not None and trig.startswith(NARROWING):
        # The hold ended just as the fault's effect arrived: the moment is the trigger's (strike at the master
        # left alone, or wait for the narrowing to complete), so the hold runs on a little instead of healing it.
        later = now_s + cfg.max_wait_s
        st = replace(st, active=tuple(replace(a, undo_at_s=max(a.undo_at_s, later)) if any(a is d for d in due)
                                      else a for a in st.active))
        due = []
    if due:  # a fault held for its time: undo it (the oldest first: the stack unwinds from the bottom)
        decision, st = _undo(st, due[0], now_s, None, None)
        return decision, now_s, st
    if st.active:
        wake = min(max(a.undo_at_s, a.at_s + max(cfg.holds_s)) if not a.reacted else a.undo_at_s for a in st.active)
        if trig is None and clients_only:  # the clients have nothing new to say: maybe they settled under the faults
            settled_at = _settled_at(st, cfg)
            if settled_at is not None and now_s >= settled_at:
                trig, st = SETTLED, replace(st, settled_s=st.cluster_at_s)
            elif settled_at is not None:
                wake = min(wake, settled_at)
        if trig is None:
            return None, wake, st
        narrowing = trig.startswith(NARROWING)
        if narrowing and not trig.endswith(MASTER_ONLY):  # still narrowing: wait for where it leads
            return None, wake, replace(st, trigger=None)
        families = {a.move.family for a in st.active}
        bottom = st.active[0]
        early_undo = not narrowing and _releasable(bottom, cfg, now_s) and now_s >= bottom.at_s + min(cfg.holds_s)
        candidates = ([f"{UNDO_PREFIX}{bottom.move.key}"] if early_undo else []) + [HOLD]
        if len(st.active) < cfg.max_depth:
            candidates += [m.key for m in cfg.moves if m.family not in families]
    else:
        ready_at = min(settled_from, st.quiet_since_s + cfg.max_wait_s) + cfg.settle_s
        if now_s < ready_at:  # still settling: what it raises meanwhile is the last fault's aftermath
            return None, max(now_s, ready_at), replace(st, trigger=None)
        if trig is None and now_s < ready_at + cfg.quiet_wait_s:
            return None, ready_at + cfg.quiet_wait_s, st
        candidates = [m.key for m in cfg.moves]
    if trig is not None and trig.endswith(MASTER_ONLY):  # the master holds the only copy: the moment is for it
        candidates = [c for c in candidates if _aim(cfg, trig, c)] or candidates
    st = _credited(st)
    context = _context(st.active, trig)
    choice = _choose(cfg, st, context, candidates, rng, trig)
    if choice == HOLD:
        st = replace(st, trigger=None, credit=(context, HOLD, st.coverage.count))
        return None, wake, st
    if choice.startswith(UNDO_PREFIX):
        target = next(a for a in st.active if f"{UNDO_PREFIX}{a.move.key}" == choice)
        decision, st = _undo(st, target, now_s, context, choice)
        return decision, now_s, st
    move = next(m for m in cfg.moves if m.key == choice)
    hold = cfg.holds_s[rng.randrange(len(cfg.holds_s))]
    step = Step(round(now_s, 3), move.f, move.value)
    undo_at = max([now_s + hold] + [a.undo_at_s + cfg.settle_s for a in st.active])  # outlasts the faults below
    active = (*st.active, Active(move, now_s, undo_at)) if move.undo else st.active
    st = replace(st, active=active, trigger=None, credit=(context, choice, st.coverage.count),
                 steps=(*st.steps, step), k=st.k + 1, quiet_since_s=now_s if not move.undo else st.quiet_since_s)
    return Decision(step, context, choice), now_s, st
