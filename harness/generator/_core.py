"""Generator core: the context, PENDING, the Gen protocol, plain values as generators (see the package docstring)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol, TypeAlias

NEMESIS_THREAD: Final = "nemesis"
NS_PER_S: Final = 1_000_000_000
Thread: TypeAlias = int | str
Process: TypeAlias = int | str
OpDict: TypeAlias = dict[str, Any]


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


PENDING: Final = _Pending()


def next_process(process: Process, client_threads: int) -> Process:
    """The process id a worker continues under after an ``info`` completion (old + thread count)."""
    if isinstance(process, int):
        return process + client_threads
    return process


class Context(NamedTuple):
    """What a generator may know: time, its threads, which are free, their processes, an RNG.

    A NamedTuple rather than a frozen dataclass: one is built for every op and every event, and
    tuple construction is several times cheaper."""

    time_ns: int
    threads: tuple[Thread, ...]
    free: frozenset[Thread]
    workers: Mapping[Thread, Process]
    rng: random.Random
    client_threads: int

    def free_thread(self) -> Thread | None:
        """The lowest free thread among this context's threads (deterministic), or None."""
        for t in self.threads:
            if t in self.free:
                return t
        return None

    def all_free(self) -> bool:
        return all(t in self.free for t in self.threads)

    def thread_of(self, process: Process) -> Thread | None:
        """The thread running ``process`` (threads keep ``process % client_threads``), if in this context."""
        if isinstance(process, int):
            if self.client_threads <= 0:
                return None
            t: Thread = process % self.client_threads
        else:
            t = process
        return t if t in self.threads and self.workers.get(t) == process else None

    def restrict(self, keep: Callable[[Thread], bool]) -> Context:
        return Context(self.time_ns, tuple(t for t in self.threads if keep(t)), self.free, self.workers, self.rng,
                       self.client_threads)


def make_context(client_threads: int, *, seed: int, time_ns: int = 0, nemesis: bool = True) -> Context:
    threads: tuple[Thread, ...] = tuple(range(client_threads)) + ((NEMESIS_THREAD,) if nemesis else ())
    return Context(time_ns, threads, frozenset(threads), {t: t for t in threads}, random.Random(seed), client_threads)


OpResult: TypeAlias = "tuple[OpDict | _Pending, Gen | None] | None"


class Gen(Protocol):
    def op(self, ctx: Context) -> OpResult: ...
    def update(self, ctx: Context, event: OpDict) -> Gen | None: ...


def _update(gen: Gen | None, ctx: Context, event: OpDict) -> Gen | None:
    return None if gen is None else gen.update(ctx, event)


def _fill(ctx: Context, template: Mapping[str, Any]) -> OpDict | _Pending:
    """Turn an op template into an invocation on a free thread (or PENDING if none is free)."""
    if template.get("type") == "sleep":
        return {"time": ctx.time_ns, **template}
    thread = ctx.free_thread()
    if thread is None:
        return PENDING
    return {"type": "invoke", "process": ctx.workers[thread], "time": ctx.time_ns, "value": None, **template}


# ---------------------------------------------------------------------------------------------
# Basic generators


@dataclass(frozen=True, slots=True)
class _Once:
    template: Mapping[str, Any]

    def op(self, ctx: Context) -> OpResult:
        filled = _fill(ctx, self.template)
        return (filled, self) if filled is PENDING else (filled, None)

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return self


@dataclass(frozen=True, slots=True)
class _Fn:
    fn: Callable[[Context], Mapping[str, Any] | None]

    def op(self, ctx: Context) -> OpResult:
        if ctx.free_thread() is None:
            return (PENDING, self)
        template = self.fn(ctx)
        if template is None:
            return None
        return (_fill(ctx, template), self)

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        return self


@dataclass(frozen=True, slots=True)
class _Seq:
    gens: tuple[Gen, ...]

    def op(self, ctx: Context) -> OpResult:
        gens = self.gens
        while gens:
            res = gens[0].op(ctx)
            if res is not None:
                value, nxt = res
                rest = gens[1:]
                return (value, _Seq(((nxt,) if nxt is not None else ()) + rest))
            gens = gens[1:]
        return None

    def update(self, ctx: Context, event: OpDict) -> Gen | None:
        if not self.gens:
            return self
        first = self.gens[0].update(ctx, event)
        return _Seq(((first,) if first is not None else ()) + self.gens[1:])


def as_gen(x: Any) -> Gen | None:
    """Coerce a generator-like value: Gen, dict (one op), list/tuple (each in turn), callable, None."""
    if x is None:
        return None
    if isinstance(x, Mapping):
        return _Once(dict(x))
    if isinstance(x, list | tuple):
        gens = tuple(g for g in (as_gen(e) for e in x) if g is not None)
        return _Seq(gens)
    if hasattr(x, "op") and hasattr(x, "update"):
        return x
    if callable(x):
        return _Fn(x)
    raise TypeError(f"not a generator: expected Gen, dict, list, callable or None, got {type(x).__name__} {x!r:.80}")



def _advance(
    gens: tuple[Gen | None, ...], cands: list[tuple[int, OpDict | _Pending, Gen | None]], best: int | None
) -> tuple[Gen | None, ...]:
    """Members after one op call: the chosen member and every PENDING member move on; members that
    offered a later op stay as they were (their op was not taken)."""
    out = list(gens)
    for j, (i, value, nxt) in enumerate(cands):
        if j == best or value is PENDING:
            out[i] = nxt
    return tuple(out)


def _soonest(candidates: list[tuple[int, OpDict | _Pending, Gen | None]]) -> int | None:
    """Index of the candidate op with the smallest time (PENDING never wins; ties -> lowest index)."""
    best: int | None = None
    for i, (_, value, _) in enumerate(candidates):
        if value is PENDING:
            continue
        if best is None or value["time"] < candidates[best][1]["time"]:  # type: ignore[index]
            best = i
    return best


