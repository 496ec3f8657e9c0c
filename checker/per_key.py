"""Independent registers judged one key at a time: split a history by its ops' ``key`` and check each part alone.

A history of many registers (the ``register`` workload, :mod:`workloads.register`) is linearizable exactly when
each register's own sub-history is, because the registers share nothing; checking them apart keeps each search
small.  The ops have the ``cas-register`` model's shape (:mod:`checker.models`) with the register's name in the
op's ``key`` field, which ``history.jsonl`` keeps like any extra field.

Pure: the search's clock comes in as an argument, so a caller decides what time means.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from checker.history import Op
from checker.linearizable import Result as LinResult
from checker.linearizable import check as check_linearizable
from checker.models import make_model

__all__ = ["REGISTER_FS", "check_keys", "check_per_key", "first_failing_key", "split_by_key", "verdict"]

REGISTER_FS = frozenset({"read", "write", "cas"})
"""The ``f`` of a register op (``cas-register``: read, write v, cas [expected, new])."""


def split_by_key(history: Iterable[Op], fs: frozenset[str] = REGISTER_FS) -> dict[Hashable, list[Op]]:
    """One ``cas-register`` history per register: the client ops of ``fs`` grouped by their ``key`` field, in
    history order (nemesis ops and other ``f`` are dropped; the checker ignores them anyway).

    Raises:
        ValueError: a register op without a string ``key`` (naming its index and f).
    """
    out: dict[Hashable, list[Op]] = {}
    for op in history:
        if op.is_client and op.f in fs:
            out.setdefault(_key_of(op), []).append(op)
    return out


def _key_of(op: Op) -> Hashable:
    key = op.extra.get("key")
    if not isinstance(key, str):
        raise ValueError(f"op {op.index} ({op.f}) has no string 'key' field (got {key!r}); register ops carry the "
                         "register's name there")
    return key


def check_keys(history: Sequence[Any], *, clock: Callable[[], float], time_limit_s: float = 60.0,
               model: str = "cas-register", fs: frozenset[str] = REGISTER_FS) -> dict[str, tuple[int, LinResult]]:
    """Each key's ops checked alone against ``model`` (initial value nil: a key nobody wrote), in key order.

    Returns ``{key: (ops, result)}``: how many ops the key has and the full linearizability result, which keeps
    the failing op, the last ok op before it and the search's calls, so a caller can explain a failure (the CLI's
    anomaly, the run page's failure window) as it does for a single register.
    """
    ops = [op if isinstance(op, Op) else Op.from_dict(op) for op in history]
    out: dict[str, tuple[int, LinResult]] = {}
    for key, sub in sorted(split_by_key(ops, fs).items(), key=lambda kv: str(kv[0])):
        out[str(key)] = (len(sub), check_linearizable(sub, make_model(model), time_limit_s=time_limit_s, clock=clock))
    return out


def first_failing_key(results: Mapping[str, tuple[int, LinResult]]) -> str | None:
    """The key whose failure comes first in the history (the smallest index of its failing op), or None if no key
    failed: the one failure a run page draws and a summary line names."""
    failing = [(_failing_index(res), key) for key, (_, res) in results.items() if res.valid is False]
    return min(failing)[1] if failing else None


def _failing_index(res: LinResult) -> int:
    op = res.op if res.op is not None else (res.call.invoke if res.call is not None else None)
    return op.index if op is not None and op.index >= 0 else 1 << 62


def verdict(results: Mapping[str, tuple[int, LinResult]]) -> bool | str:
    """False if any key is not linearizable, else "unknown" if any search gave up, else True."""
    verdicts = [res.valid for _, res in results.values()]
    return False if False in verdicts else ("unknown" if "unknown" in verdicts else True)


def check_per_key(history: Sequence[Any], *, clock: Callable[[], float], time_limit_s: float = 60.0,
                  model: str = "cas-register", fs: frozenset[str] = REGISTER_FS) -> dict[str, Any]:
    """:func:`check_keys` summed up as plain data.

    Returns ``{"valid", "keys": {key: {"valid", "ops", "explanation"?}}}`` with ``valid`` from :func:`verdict`.
    """
    results = check_keys(history, clock=clock, time_limit_s=time_limit_s, model=model, fs=fs)
    keys = {key: {"valid": res.valid, "ops": n, **({"explanation": res.describe()} if res.valid is False else {})}
            for key, (n, res) in results.items()}
    return {"valid": verdict(results), "keys": keys}
