"""The guided nemesis's shell: the generator that asks :mod:`nemesis.guided` what to do, and its feed.

``nemesis.mode: guided`` (or ``--nemesis-mode guided``) replaces the packages' planned random schedule
with decisions taken during the run from the observed events (:mod:`harness.observe`).  The fault
vocabulary is the same as random mode's: :func:`moves` samples each package's fault ops (its kinds and
targets, with the spec's options), so a guided and a random run of one spec choose among the same faults.

Every decision becomes an ordinary nemesis op in the history, so the run's executed schedule is read back
like any other (``schedule.yaml`` is written from it at the end of the run) and ``splitbrain repro``
replays it as a fixed schedule.

Duties of the shell (everything else is the pure policy):

1. :class:`Feed` gives the policy the observer's events, and whether they are the clients' outcomes only;
   :class:`GuidedNemesis` binds it to the run's observer at setup (the runner puts it in ``test["observer"]``).
   With no observer the policy still runs, on timing alone (context ``quiet``).
2. :class:`GuidedGen` anchors the main phase's start, asks :func:`nemesis.guided.decide` with the
   decision's RNG (seeded by the run's seed and the decision number) and emits the step on the nemesis
   thread; between decisions it is PENDING, so it is asked again after the next event.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness import generator as g
from nemesis.guided import Config, Move, State, decide, memory_of, moves_from_ops, state_from_memory, took_effect
from nemesis.schedule import PARTITION_AIMS

__all__ = ["Feed", "GuidedGen", "GuidedNemesis", "guided", "load_memory", "load_scale", "moves", "save_memory"]

SAMPLES_PER_PACKAGE = 256
"""Draws of each package's fault op: enough that every kind and selector combination of a package is among the
moves (32 draws missed a one-in-28 combination such as isolating the slaves about a third of the time)."""


def moves(defs: Sequence[Any], *, seed: int) -> tuple[Move, ...]:
    """The distinct fault ops the packages can draw (each package's ``start`` sampled with seeded RNGs)."""
    ops = []
    for d in defs:
        for k in range(SAMPLES_PER_PACKAGE):
            ops.append(d.start(random.Random(f"{seed}:{d.name}:guided:{k}"), k))
    return moves_from_ops(ops)


class Observed(Protocol):
    """What the feed reads of the run's observer (:class:`harness.observe.Observer`)."""

    @property
    def events(self) -> Sequence[dict[str, Any]]: ...

    @property
    def clients_only(self) -> bool: ...


class Feed:
    """The observed events the policy reads (the run's observer, once bound; empty before), and the latest
    policy state the generator reached (so what it learned can be saved at teardown)."""

    def __init__(self) -> None:
        self.observer: Observed | None = None
        self.latest: State | None = None
        self.load: g.LoadDial | None = None  # the clients' rate dial, when nemesis.guided_load_max > 1
        self.load_max = 1.0

    @property
    def events(self) -> Sequence[dict[str, Any]]:
        obs = self.observer
        return obs.events if obs is not None else ()

    @property
    def clients_only(self) -> bool:
        """Whether the observer sees the system through its clients' outcomes only
        (:func:`harness.observe.clients_only`: RabbitMQ), so they stand for its reactions
        (:func:`nemesis.guided.decide`); False with no observer."""
        return self.observer is not None and self.observer.clients_only


def load_scale(active: int, max_depth: int, load_max: float) -> float:
    """The client-rate multiplier with ``active`` faults in force: 1 with none, rising linearly to ``load_max``
    at ``max_depth`` (the most the policy stacks).  Pure."""
    if load_max <= 1.0 or max_depth < 1:
        return 1.0
    return 1.0 + (load_max - 1.0) * min(max(active, 0), max_depth) / max_depth


@dataclass(frozen=True)
class GuidedGen:
    """Performs guided decisions on the nemesis thread (see the module docstring)."""

    cfg: Config
    feed: Feed
    seed: int
    state: State = field(default_factory=State)
    start_ns: int | None = None

    def op(self, ctx: g.Context) -> Any:
        if self.start_ns is None:
            return ({"type": "sleep", "time": ctx.time_ns},
                    GuidedGen(self.cfg, self.feed, self.seed, self.state, ctx.time_ns))
        thread = ctx.free_thread()
        if thread is None:
            return (g.PENDING, self)
        now_s = (ctx.time_ns - self.start_ns) / g.NS_PER_S
        rng = random.Random(f"{self.seed}:guided:{self.state.k}:{len(self.state.steps)}")
        decision, _wake_s, state = decide(self.state, self.cfg, self.feed.events, now_s=now_s,
                                          start_ns=self.start_ns, rng=rng, clients_only=self.feed.clients_only)
        nxt = GuidedGen(self.cfg, self.feed, self.seed, state, self.start_ns)
        if self.feed.load is not None:  # raise the load as the faults stack up, lower it as they are undone
            self.feed.load.scale = load_scale(len(state.active), self.cfg.max_depth, self.feed.load_max)
        if self.feed.latest is None or len(state.steps) >= len(self.feed.latest.steps):
            self.feed.latest = state
        if decision is None:
            return (g.PENDING, nxt)
        step = decision.step
        op = {"type": "invoke", "process": ctx.workers[thread], "time": ctx.time_ns, "f": step.f,
              "value": step.value}
        return (op, nxt)

    def update(self, ctx: g.Context, event: g.OpDict) -> Any:
        """A nemesis completion: the fault took effect then (the policy counts reactions from there)."""
        if self.start_ns is None or event.get("type") == "invoke" or event.get("process") != "nemesis":
            return self
        at_s = (int(event.get("time", ctx.time_ns)) - self.start_ns) / g.NS_PER_S
        return GuidedGen(self.cfg, self.feed, self.seed, took_effect(self.state, at_s), self.start_ns)


class GuidedNemesis:
    """Wraps the composed nemesis: binds the feed to the run's observer at setup, delegates the rest."""

    def __init__(self, inner: Any, feed: Feed, memory_path: str | None = None) -> None:
        self.inner, self.feed, self.memory_path = inner, feed, memory_path

    def fs(self) -> frozenset[str]:
        result: frozenset[str] = self.inner.fs()
        return result

    async def setup(self, test: dict[str, Any]) -> GuidedNemesis:
        self.feed.observer = test.get("observer")
        self.inner = await self.inner.setup(test)
        return self

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.inner.invoke(test, op)
        return result

    async def teardown(self, test: dict[str, Any]) -> None:
        try:
            await self.inner.teardown(test)
        finally:
            if self.memory_path and self.feed.latest is not None:
                save_memory(self.memory_path, self.feed.latest)


def load_memory(path: str | None) -> State:
    """The starting state from a memory file (a fresh one when ``path`` is None or does not exist yet).

    Raises:
        ValueError: the file is unreadable or malformed (the message names the file).
    """
    if not path or not Path(path).exists():
        return State()
    try:
        return state_from_memory(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a guided memory file ({exc}); delete it to start learning afresh") from None


def save_memory(path: str, state: State) -> None:
    """Write what the policy learned (atomically: a crashed run leaves the previous memory)."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(memory_of(state)) + "\n", encoding="utf-8")
    os.replace(tmp, target)


def guided(defs: Sequence[Any], *, seed: int, interval_s: float, start: State | None = None,
           partition_aims: Mapping[str, str | None] = PARTITION_AIMS) -> tuple[GuidedGen, Feed, tuple[Move, ...]]:
    """The guided generator for packages ``defs``: moves from their vocabulary, letting the cluster settle at
    most about half an ``interval_s`` after a fault, then waiting a quarter of one (at most 1 s) for a trigger
    before striking on the quiet, holding a fault 0.6, 1.2 or 2.0 intervals (drawn) unless a decision undoes it
    earlier (not before the shortest hold) -- but never undoing it before the cluster reacted to it, up to the
    longest hold; ``start`` is what earlier runs taught it (:func:`load_memory`); ``partition_aims`` the system's
    partition kinds and what each aims at (:func:`nemesis.schedule.partition_aims`).

    The holds are shorter than random mode's longest because the reaction gate keeps the precondition: a fault is
    not lifted before the cluster showed its effect, so a long hold only spends time once it has (with 0.8-2.4
    intervals a run held faults 8-12 s past their effect).  The shortest (3 s at the default interval of 5) still
    outlasts a broker's lease (2 s), so a killed master's successor can be elected before it returns."""
    ms = moves(defs, seed=seed)
    settle = min(1.0, interval_s / 4)
    cfg = Config(ms, settle_s=settle, max_wait_s=max(0.5, interval_s / 2), quiet_wait_s=settle,
                 holds_s=tuple(round(interval_s * f, 3) for f in (0.6, 1.2, 2.0)), partition_aims=partition_aims)
    feed = Feed()
    return GuidedGen(cfg, feed, seed, start or State()), feed, ms
