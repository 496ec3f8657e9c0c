"""Sequential models for the linearizability checker (see ``_base`` for the model API).

``MODELS`` is the one table of built-in models by name; ``make_model(name, initial=..., fail_policy=...)``
builds one.  To add a model, subclass ``Model`` (``init``, ``step``, optional ``partition_key``,
``read_only``, ``describe_state``) and pass an instance to ``checker.linearizable.check``; see
docs/linearizability.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from checker.models._base import (
    FAIL_POLICIES,
    FAILED,
    UNKNOWN,
    Branches,
    Inconsistent,
    Model,
    ModelError,
    OpInput,
    ReachBudget,
    freeze,
)
from checker.models._collections import Mutex, Queue, SetModel
from checker.models._kv import KV
from checker.models._registers import MultiRegister, Register

_NO_INITIAL: Any = object()

MODELS: dict[str, tuple[Callable[..., Model], str]] = {
    "register": (lambda **kw: Register(cas=False, **kw), "one register: read / write (initial nil)"),
    "cas-register": (lambda **kw: Register(cas=True, **kw), "one register: read / write / cas [old new] (initial nil)"),
    "kv": (KV, 'string map: get / put / append with value {"key", "value"}; partitioned per key (initial "")'),
    "mutex": (Mutex, "a lock: acquire / release (initially free)"),
    "set": (SetModel, "grow-only set: add x / read -> all elements"),
    "multi-register": (MultiRegister, "registers updated by txn [[read k v] [write k v] ...] (initial {})"),
    "fifo-queue": (lambda **kw: Queue(fifo=True, **kw), "FIFO queue: enqueue x / dequeue -> x or nil"),
    "unordered-queue": (lambda **kw: Queue(fifo=False, **kw), "multiset queue: enqueue x / dequeue -> any x"),
}


def model_names() -> list[str]:
    return list(MODELS)


def make_model(name: str, *, initial: Any = _NO_INITIAL, fail_policy: str | None = None, **options: Any) -> Model:
    """Build a built-in model by name; ``options`` go to the model's constructor (e.g. ``nil_read_any``).

    Raises:
        ModelError: unknown name or fail policy (the message lists the valid ones).
    """
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; expected one of: {', '.join(MODELS)}")
    if fail_policy is not None and fail_policy not in FAIL_POLICIES:
        raise ModelError(f"unknown fail policy {fail_policy!r}; expected one of: {', '.join(FAIL_POLICIES)}")
    kwargs: dict[str, Any] = dict(options)
    if initial is not _NO_INITIAL:
        kwargs["initial"] = initial
    if fail_policy is not None:
        kwargs["fail_policy"] = fail_policy
    return MODELS[name][0](**kwargs)


__all__ = [
    "FAIL_POLICIES", "FAILED", "KV", "MODELS", "UNKNOWN", "Branches", "Inconsistent", "Model", "ModelError",
    "MultiRegister", "Mutex", "OpInput", "Queue", "ReachBudget", "Register", "SetModel", "freeze", "make_model",
    "model_names",
]
