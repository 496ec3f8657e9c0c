"""The ``counter`` workload: adds and reads on one counter, on any system that offers a counter client.

Written against a client protocol, not one system: the system's DB makes the client
(:class:`harness.protocols.CounterClients`, the capability ``counter-client``).  The self-test's counter service
(:mod:`systems.counter`, ``splitbrain selftest``) is the system that offers it, so ``system: counter`` with
``workloads: [counter]`` runs through ``splitbrain test`` like any other spec (examples/counter.yaml).

Ops: ``add`` (value: a delta in 1..5; ok = applied) and ``read`` (ok value = the total), half each; after the
heal every client thread reads once more (:func:`final_reads`).  The checker is Jepsen's counter rule
(:class:`CounterChecker`): an ``ok`` read must lie between the sum of ``ok`` adds that completed before the read was
invoked and the sum of all adds (``ok`` or ``info``) invoked before the read completed.  ``fail`` adds never count;
``info`` adds may or may not.

The rule assumes one counter.  A system whose nodes each keep their own (the counter service is not replicated)
is valid with one node; with several, a read on one node misses the adds acknowledged by another, and the checker
says so -- which is what a lost acknowledged add looks like.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checker.history import Op
from harness import generator as g
from harness.protocols import CounterClients
from workloads.common import option, parse_options, unserved
from workloads.registry import Workload, WorkloadContext, register

__all__ = ["COUNTER_FS", "CounterChecker", "CounterWorkloadOptions", "build_counter", "counter_generator",
           "final_reads"]

COUNTER_FS = frozenset({"add", "read"})
"""The op fs a counter client handles."""


@dataclass(frozen=True)
class CounterWorkloadOptions:
    """Options of the counter workload."""

    timeout_s: float = option(2.0, 0.1, 30.0, allowed="seconds in [0.1, 30] (one request's bound in the client)")


def _add(ctx: g.Context) -> dict[str, Any]:
    return {"f": "add", "value": ctx.rng.randint(1, 5)}


def _read(ctx: g.Context) -> dict[str, Any]:
    return {"f": "read"}


def counter_generator() -> g.Gen:
    """Adds (delta 1..5) and reads, half each, unpaced: the test paces them at the spec's ``rate``
    (:func:`harness.generator.pace`)."""
    return g.mix([_add, _read])


def final_reads() -> g.Gen:
    """One read per client thread."""
    return g.each_thread(g.once({"f": "read"}))


class CounterChecker:
    """Jepsen's counter rule over the client ops of a history (see the module docstring)."""

    def check(self, test: dict[str, Any], history: Sequence[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        lower = 0  # sum of ok adds completed so far
        upper = 0  # sum of adds invoked so far (ok, info or still open)
        invoked_at: dict[Any, Op] = {}
        read_bounds: dict[Any, int] = {}  # process -> lower bound at the read's invocation
        failed_adds: dict[int, int] = {}  # index of invoke -> delta to take back on fail
        errors, reads = [], 0
        for op in history:
            if not op.is_client:
                continue
            if op.type == "invoke":
                invoked_at[op.process] = op
                if op.f == "add":
                    upper += int(op.value)
                    failed_adds[op.index] = int(op.value)
                elif op.f == "read":
                    read_bounds[op.process] = lower
                continue
            inv = invoked_at.pop(op.process, None)
            if inv is None:
                continue
            if op.f == "add":
                if op.type == "ok":
                    lower += int(inv.value)
                elif op.type == "fail":
                    upper -= failed_adds.get(inv.index, 0)
            elif op.f == "read" and op.type == "ok":
                reads += 1
                lo = read_bounds.pop(op.process, 0)
                if not lo <= int(op.value) <= upper:
                    errors.append({"read": op.index, "value": op.value, "expected": [lo, upper],
                                   "why": "read outside [ok adds before invoke, all adds before completion]"})
        return {"valid": not errors, "reads": reads, "errors": errors[:20], "final_lower": lower, "final_upper": upper}


@register("counter", needs=("counter-client",))
def build_counter(ctx: WorkloadContext) -> Workload:
    """The counter workload for ``ctx``; the client is the system's (``ctx.db.counter_client``).

    Raises:
        SpecError: a bad option (``workloads[i].options.<key>``), or a DB that makes no counter client
            (``workloads[i].name``; validation normally refuses that earlier, by capability).
    """
    o = parse_options(ctx, CounterWorkloadOptions)
    if not isinstance(ctx.db, CounterClients):
        raise unserved(ctx, "counter", "counter-client")
    return Workload(name="counter", client=ctx.db.counter_client(timeout_s=o.timeout_s),
                    generator=counter_generator(), checkers={"counter": CounterChecker()}, fs=COUNTER_FS,
                    final_generator=final_reads(), op_timeouts={f: o.timeout_s + 2.0 for f in COUNTER_FS})
