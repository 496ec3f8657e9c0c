"""Mutex, set and queue models (kv lives in ``_kv``).

* ``mutex``: ``acquire`` / ``release``; the state is True while held.
* ``set``: ``add`` x, ``read`` -> the whole set (a list).
* ``fifo-queue`` / ``unordered-queue``: ``enqueue`` x, ``dequeue`` -> x, or None when empty.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from checker.models._base import FAILED, UNKNOWN, Branches, Inconsistent, Model, ModelError, OpInput, freeze


class Mutex(Model):
    """A lock: acquire when free, release when held."""

    name = "mutex"

    def __init__(self, initial: Any = False, *, fail_policy: str = "drop") -> None:
        self.initial = bool(initial)
        self.fail_policy = fail_policy

    def init(self) -> Hashable:
        return self.initial

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        if output is FAILED:
            return state
        if op.f == "acquire":
            return True if not state else Inconsistent("acquire while the lock is already held")
        if op.f == "release":
            return False if state else Inconsistent("release while the lock is free")
        raise ModelError(f"mutex: unknown op f={op.f!r} (expected acquire or release)")

    def read_only(self, op: OpInput, output: Any) -> bool:
        return output is FAILED


class SetModel(Model):
    """A grow-only set: add x; read returns every element."""

    name = "set"

    def __init__(self, initial: Any = None, *, fail_policy: str = "drop") -> None:
        self.initial = frozenset(freeze(v) for v in (initial or ()))
        self.fail_policy = fail_policy

    def init(self) -> Hashable:
        return self.initial

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        if output is FAILED:
            return state
        if op.f == "add":
            return state | {freeze(op.value)}
        if op.f == "read":
            if output is UNKNOWN:
                return state
            seen = frozenset(freeze(v) for v in (output or ()))
            if seen == state:
                return state
            return Inconsistent(f"read {sorted(seen, key=repr)!r}, but the set is {sorted(state, key=repr)!r}")
        raise ModelError(f"set: unknown op f={op.f!r} (expected add or read)")

    def read_only(self, op: OpInput, output: Any) -> bool:
        return op.f == "read" or output is FAILED

    def describe_state(self, state: Any) -> str:
        return "#{" + " ".join(repr(v) for v in sorted(state, key=repr)) + "}"


class Queue(Model):
    """A queue; ``fifo=True`` dequeues in order, otherwise any element (a multiset, kept sorted)."""

    def __init__(self, initial: Any = None, *, fifo: bool = True, fail_policy: str = "drop") -> None:
        self.fifo = fifo
        self.name = "fifo-queue" if fifo else "unordered-queue"
        items = tuple(freeze(v) for v in (initial or ()))
        self.initial = items if fifo else tuple(sorted(items, key=repr))
        self.fail_policy = fail_policy

    def init(self) -> Hashable:
        return self.initial

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        if output is FAILED:
            return state
        if op.f == "enqueue":
            x = freeze(op.value)
            return state + (x,) if self.fifo else tuple(sorted((*state, x), key=repr))
        if op.f != "dequeue":
            raise ModelError(f"{self.name}: unknown op f={op.f!r} (expected enqueue or dequeue)")
        if output is UNKNOWN:
            if not state:
                return state
            if self.fifo:
                return state[1:]
            return Branches(tuple(dict.fromkeys(state[:i] + state[i + 1:] for i in range(len(state)))))
        x = freeze(output)
        if x is None:
            return state if not state else Inconsistent(f"dequeue found the queue empty, but it holds {state!r}")
        if self.fifo:
            if state and state[0] == x:
                return state[1:]
            return Inconsistent(f"dequeued {x!r}, but the head is {state[0] if state else 'nothing'!r}")
        if x in state:
            i = state.index(x)
            return state[:i] + state[i + 1:]
        return Inconsistent(f"dequeued {x!r}, which is not in the queue {state!r}")

    def read_only(self, op: OpInput, output: Any) -> bool:
        return output is FAILED
