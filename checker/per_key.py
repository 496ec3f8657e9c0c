"""Independent registers judged one key at a time: split a history by its ops' ``key`` and check each part alone.

A history of many registers (the ``register`` workload, :mod:`workloads.register`) is linearizable exactly when
each register's own sub-history is, because the registers share nothing; checking them apart keeps each search
small.  The ops have the ``cas-register`` model's shape (:mod:`checker.models`) with the register's name in the
op's ``key`` field, which ``history.jsonl`` keeps like any extra field.

Pure: the search's clock comes in as an argument, so a caller decides what time means.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from checker.history import Op
from checker.linearizable import check as check_linearizable
from checker.models import make_model

__all__ = ["REGISTER_FS", "check_per_key", "split_by_key"]

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


def check_per_key(history: Sequence[Any], *, clock: Callable[[], float], time_limit_s: float = 60.0,
                  model: str = "cas-register", fs: frozenset[str] = REGISTER_FS) -> dict[str, Any]:
    """Each key's ops checked alone against ``model`` (initial value nil: a key nobody wrote).

    Returns ``{"valid", "keys": {key: {"valid", "ops", "explanation"?}}}``: valid is False if any key is not
    linearizable, else "unknown" if any search gave up (``time_limit_s`` per key), else True.
    """
    ops = [op if isinstance(op, Op) else Op.from_dict(op) for op in history]
    keys: dict[str, Any] = {}
    for key, sub in sorted(split_by_key(ops, fs).items(), key=lambda kv: str(kv[0])):
        res = check_linearizable(sub, make_model(model), time_limit_s=time_limit_s, clock=clock)
        keys[str(key)] = {"valid": res.valid, "ops": len(sub),
                          **({"explanation": res.describe()} if res.valid is False else {})}
    verdicts = [k["valid"] for k in keys.values()]
    valid: bool | str = False if False in verdicts else ("unknown" if "unknown" in verdicts else True)
    return {"valid": valid, "keys": keys}
