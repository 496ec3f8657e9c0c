"""The ``register`` workload: independent read / write / cas registers on any system that offers a register client.

It is written against a small client protocol, not against one system: the system's DB makes the client
(:class:`harness.protocols.RegisterClients`, the capability ``register-client``), so a system adapter that offers
it (etcd: :mod:`systems.etcd`) gets this workload, its generator and its checker for free, and a spec naming it for
a system that does not is refused when the spec loads (:mod:`harness.spec`, on ``workloads[i].name``).

Ops have the ``cas-register`` model's shape (:mod:`checker.models`) plus the register's name in ``key``: ``read``
(value ``None``; ok value = the value read, ``None`` for a key nobody wrote), ``write v``, ``cas [expected, new]``
(a compare that does not match is ``fail``).  Values are drawn from a small range (``values``) so cas ops often
match, as in Jepsen's register tests.  The history is judged one key at a time by the linearizability checker
(:mod:`checker.per_key`).

``read_mode`` chooses the system's strongest read (``linearizable``) or its weakest (``serializable``: a node may
answer from its own state without asking a quorum).  Under partitions and kills the second is expected to return
stale values, and the checker to say so (Jepsen's 2020 etcd analysis).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from checker.compose import Result
from checker.history import Op
from checker.linearizable import Result as LinResult
from checker.per_key import REGISTER_FS, check_keys, first_failing_key, verdict
from harness import generator as g
from harness.errors import SpecError
from harness.protocols import RegisterClients
from workloads.common import StatsChecker, linearizability_result, option, parse_options, unserved
from workloads.registry import Workload, WorkloadContext, register

__all__ = ["READ_MODES", "PerKeyLinearizable", "RegisterWorkloadOptions", "build_register", "evidence",
           "explained", "register_generator"]

READ_MODES = ("linearizable", "serializable")
"""The read modes a register client must support: the system's strongest read and its weakest."""


@dataclass(frozen=True)
class RegisterWorkloadOptions:
    """Options of the register workload (see the module docstring)."""

    read_mode: str = option("linearizable", allowed="linearizable or serializable",
                            pattern="|".join(READ_MODES))
    keys: int = option(3, 1, 100, allowed="an integer in [1, 100] (how many independent registers)")
    values: int = option(5, 2, 1000, allowed="an integer in [2, 1000] (values written are 0..values-1)")
    read_weight: int = option(1, 0, 100, allowed="an integer in [0, 100]")
    write_weight: int = option(1, 0, 100, allowed="an integer in [0, 100]")
    cas_weight: int = option(1, 0, 100, allowed="an integer in [0, 100]")
    timeout_s: float = option(2.0, 0.1, 30.0, allowed="seconds in [0.1, 30] (one request's bound in the client)")
    check_time_limit_s: float = option(60.0, 1.0, 3600.0, allowed="seconds in [1, 3600] (search budget per key)")


def register_generator(o: RegisterWorkloadOptions) -> g.Gen:
    """Reads, writes and cas ops in the proportion of the weights, each on a random key ``r0`` .. ``r<keys-1>``."""
    names = [f"r{i}" for i in range(o.keys)]

    def read(ctx: g.Context) -> dict[str, Any]:
        return {"f": "read", "key": ctx.rng.choice(names), "value": None}

    def write(ctx: g.Context) -> dict[str, Any]:
        return {"f": "write", "key": ctx.rng.choice(names), "value": ctx.rng.randrange(o.values)}

    def cas(ctx: g.Context) -> dict[str, Any]:
        return {"f": "cas", "key": ctx.rng.choice(names),
                "value": [ctx.rng.randrange(o.values), ctx.rng.randrange(o.values)]}

    weighted = [fn for fn, w in ((read, o.read_weight), (write, o.write_weight), (cas, o.cas_weight)) for _ in range(w)]
    return g.mix(weighted)


@dataclass(frozen=True)
class PerKeyLinearizable:
    """Each key's ops checked alone against ``cas-register`` (:func:`checker.per_key.check_keys`), as one verdict.

    Every key that is not linearizable is one ``nonlinearizable`` anomaly named by the key
    (:func:`workloads.common.linearizability_result`), so the CLI lists each stale key with the read that cannot
    be placed and the last ok op before it.  The stats keep each key's verdict (``keys``) and, for the key that
    failed first in the history, what a single register's check keeps (``explanation``, ``first_failure``,
    ``failure_window``), which the run page draws.  The verdict is :func:`checker.per_key.verdict`'s.
    """

    time_limit_s: float = 60.0

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Result:
        results = check_keys(history, clock=time.monotonic, time_limit_s=self.time_limit_s)
        per_key = {key: explained(res, n, key, history) for key, (n, res) in results.items()}
        keys = {key: {"valid": r.valid, "ops": r.stats["ops"],
                      **({"explanation": r.stats["explanation"]} if "explanation" in r.stats else {})}
                for key, r in per_key.items()}
        first = first_failing_key(results)
        stats: dict[str, Any] = {**(per_key[first].stats if first is not None else {}), "keys": keys,
                                 "ops": sum(n for n, _ in results.values())}
        if first is not None:
            stats["first_failing_key"] = first
        anomalies = {"nonlinearizable": [a for r in per_key.values() for a in r.anomalies.get("nonlinearizable", [])]}
        errors = [f"{key}: {r.error}" for key, r in per_key.items() if r.error]
        valid = verdict(results)
        return Result(valid=valid if isinstance(valid, bool) else "unknown",
                      anomalies={k: v for k, v in anomalies.items() if v}, stats=stats,
                      error="; ".join(errors) or None)


def evidence(history: Sequence[Any], failing: int) -> str:
    """What the history says about the op at index ``failing`` beyond the search's explanation, in one clause: the
    op and the member that answered it (when its completion names its ``node``, as the etcd client's do) and, for
    a read, the last write or cas on its key acknowledged before the read was invoked -- the write a stale read
    missed.  For example ``read 4 (#1350 p35 on m3) was invoked after write 1 (#1257 p1 on m2) was acknowledged``.
    Facts of the history only; the verdict is the search's.  Empty when the op is not a completion in it."""
    ops = [op if isinstance(op, Op) else Op.from_dict(op) for op in history]
    done = next((op for op in ops if op.index == failing), None)
    if done is None or done.type == "invoke":
        return ""
    said = f"{_what(done)} ({_where(done)})"
    invoked = max((op.index for op in ops if op.index < failing and op.process == done.process
                   and op.type == "invoke"), default=None)
    if done.f != "read" or invoked is None:
        return said
    acked = [op for op in ops if op.index < invoked and op.type == "ok" and op.f in ("write", "cas")
             and op.extra.get("key") == done.extra.get("key")]
    if not acked:
        return f"{said} was invoked before any write of its key was acknowledged"
    return f"{said} was invoked after {_what(acked[-1])} ({_where(acked[-1])}) was acknowledged"


def _what(op: Op) -> str:
    return f"{op.f} {'nil' if op.value is None else op.value!r}"


def _where(op: Op) -> str:
    return f"#{op.index} p{op.process}" + (f" on {op.node}" if op.node is not None else "")


def explained(res: LinResult, n_ops: int, key: str, history: Sequence[Any]) -> Result:
    """One key's check as a verdict (:func:`workloads.common.linearizability_result`), its failure's explanation
    led by :func:`evidence`, so that the CLI's one line names the key, the stale read and the write it missed:
    ``register r0: read 4 (#1350 p35 on m3) was invoked after write 1 (#1257 p1 on m2) was acknowledged; NOT
    linearizable: ...``."""
    r = linearizability_result(res, n_ops, key=key)
    found = r.anomalies.get("nonlinearizable", [])
    lead = evidence(history, found[0].ops[0]) if found and found[0].ops else ""
    if not lead:
        return r
    text = f"register {key}: {lead}; {res.describe()}"
    return Result(valid=r.valid, anomalies={"nonlinearizable": [replace(a, explanation=text) for a in found]},
                  stats={**r.stats, "explanation": text}, error=r.error, counts=r.counts)


@register("register", needs=("register-client",))
def build_register(ctx: WorkloadContext) -> Workload:
    """The register workload for ``ctx``; the client is the system's (``ctx.db.register_client``).

    Raises:
        SpecError: a bad option (``workloads[i].options.<key>``), all weights zero, or a DB that makes no register
            client (``workloads[i].name``; validation normally refuses that earlier, by capability).
    """
    o = parse_options(ctx, RegisterWorkloadOptions)
    source = getattr(ctx.spec, "source", "<spec>")
    if o.read_weight + o.write_weight + o.cas_weight == 0:
        raise SpecError(source, f"workloads[{ctx.index}].options.read_weight", 0,
                        "weights (read_weight, write_weight, cas_weight) that are not all zero")
    if not isinstance(ctx.db, RegisterClients):
        raise unserved(ctx, "register", "register-client")
    return Workload(
        name="register",
        client=ctx.db.register_client(read_mode=o.read_mode, timeout_s=o.timeout_s),
        generator=register_generator(o),
        checkers={"linearizable": PerKeyLinearizable(o.check_time_limit_s),
                  "stats": StatsChecker(required=tuple(f for f, w in (("read", o.read_weight),
                                                                        ("write", o.write_weight)) if w),
                                        fs=REGISTER_FS)},
        fs=REGISTER_FS,
        op_timeouts={f: o.timeout_s + 2.0 for f in REGISTER_FS},
        extra={"read_mode": o.read_mode},
    )
