"""Register models: ``register`` (read/write), ``cas-register`` (read/write/cas) and ``multi-register``.

Outputs: a read's output is the value read; a write's and a cas's output is ignored when ok (any value),
``FAILED`` when the model keeps definite failures (a failed cas = "the compare did not match") and
``UNKNOWN`` for indeterminate ops.  A cas value is ``[expected, new]``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from checker.models._base import FAILED, UNKNOWN, Inconsistent, Model, ModelError, OpInput, expect_pair, freeze


class Register(Model):
    """A single register; ``cas=True`` adds compare-and-set.

    ``nil_read_any=True`` makes an ok read of None (nil) match any value, as knossos' register models do
    (Jepsen records a read whose result was lost as nil); porcupine's etcd model compares nil exactly.
    """

    def __init__(
        self, initial: Any = None, *, cas: bool = False, fail_policy: str = "drop", nil_read_any: bool = False,
    ) -> None:
        self.initial = freeze(initial)
        self.cas = cas
        self.nil_read_any = nil_read_any
        self.name = "cas-register" if cas else "register"
        self.fail_policy = fail_policy

    def init(self) -> Hashable:
        return self.initial

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        f = op.f
        if f == "read":
            if output is UNKNOWN or output is FAILED or (output is None and self.nil_read_any):
                return state
            if freeze(output) == state:
                return state
            return Inconsistent(f"read {output!r}, but the register holds {state!r}")
        if f == "write":
            if output is FAILED:
                return state
            return freeze(op.value)
        if f == "cas" and self.cas:
            expected, new = expect_pair(self.name, op)
            expected, new = freeze(expected), freeze(new)
            if output is UNKNOWN:
                return new if state == expected else state
            if output is FAILED:
                if state != expected:
                    return state
                return Inconsistent(f"cas {expected!r}->{new!r} failed, but the register holds {state!r}")
            if state == expected:
                return new
            return Inconsistent(f"cas {expected!r}->{new!r} succeeded, but the register holds {state!r}")
        allowed = "read, write, cas" if self.cas else "read, write"
        raise ModelError(f"{self.name}: unknown op f={f!r} (expected one of {allowed})")

    def read_only(self, op: OpInput, output: Any) -> bool:
        return op.f == "read" or (output is FAILED and op.f in ("cas", "write"))


class MultiRegister(Model):
    """Several registers updated by transactions of ``[f, key, value]`` micro-ops (knossos ``:txn``).

    ``f`` is ``read`` or ``write``.  A read micro-op whose value is None (nil) is unconstrained, as in
    knossos.  The state is a sorted tuple of (key, value) pairs.
    """

    name = "multi-register"

    def __init__(self, initial: Any = None, *, fail_policy: str = "drop") -> None:
        if initial is None:
            initial = {}
        if not isinstance(initial, dict):
            raise ModelError(f"multi-register: initial value must be a map of key -> value, got {initial!r}")
        self.initial = tuple(sorted(((str(k), freeze(v)) for k, v in initial.items()), key=repr))
        self.fail_policy = fail_policy

    def init(self) -> Hashable:
        return self.initial

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        if op.f not in ("txn", "read", "write"):
            raise ModelError(f"multi-register: unknown op f={op.f!r} (expected txn)")
        if output is FAILED:
            return state
        micro = op.value if output is UNKNOWN or not isinstance(output, list | tuple) else output
        if not isinstance(micro, list | tuple):
            raise ModelError(f"multi-register: txn value must be a list of [f, key, value], got {micro!r}")
        values = dict(state)
        for m in micro:
            if not isinstance(m, list | tuple) or len(m) != 3:
                raise ModelError(f"multi-register: micro-op must be [f, key, value], got {m!r}")
            mf, k, v = str(m[0]), str(m[1]), freeze(m[2])
            if mf == "write":
                values[k] = v
            elif mf == "read":
                if v is not None and output is not UNKNOWN and values.get(k) != v:
                    return Inconsistent(f"txn read {k}={v!r}, but {k} holds {values.get(k)!r}")
            else:
                raise ModelError(f"multi-register: micro-op f must be read or write, got {mf!r}")
        return tuple(sorted(values.items(), key=repr))

    def read_only(self, op: OpInput, output: Any) -> bool:
        micro = op.value
        return isinstance(micro, list | tuple) and all(
            isinstance(m, list | tuple) and len(m) == 3 and str(m[0]) == "read" for m in micro
        )

    def describe_state(self, state: Any) -> str:
        return "{" + ", ".join(f"{k} {v!r}" for k, v in state) + "}"
