"""The model API: what a sequential specification looks like to the linearizability checker.

A *model* is a pure description of a sequential object.  The checker feeds it one operation at a
time and asks whether that operation, with the output the client observed, could have happened in
the current state::

    state = model.init()
    nxt = model.step(state, OpInput("write", 3), "ok")      # -> 3
    bad = model.step(nxt, OpInput("read", None), 4)          # -> Inconsistent("read 4, but value is 3")

Vocabulary:

* ``OpInput(f, value)`` -- what the client asked for (the invoke's ``f`` and ``value``).
* *output* -- what the completion said: the ok value, ``FAILED`` for a definite failure the model
  keeps (``fail_policy == "definite"``), or ``UNKNOWN`` for an indeterminate op (``info`` or never
  completed) whose result nobody saw.
* *state* -- any hashable value.  The checker interns states into small ints and memoises
  ``step`` per (op, state), so ``step`` runs once per distinct pair; keep states small and cheap to hash.
* ``step`` returns the next state, an ``Inconsistent`` saying what could not have happened, or (rarely)
  ``Branches`` when an op with an unknown output could lead to several states.

Rules for model authors: ``step`` must be pure and deterministic; a state must never be mutated;
``read_only`` may only say True for ops that leave *every* state they are legal in unchanged (the
checker linearizes such ops greedily, which is only sound under that condition).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name


UNKNOWN: Any = _Sentinel("UNKNOWN")
"""Output of an indeterminate op: it may have taken effect with any result, or not at all."""

FAILED: Any = _Sentinel("FAILED")
"""Output of a definitely failed op under ``fail_policy == "definite"`` (e.g. a CAS whose compare failed)."""

FAIL_POLICIES = ("drop", "definite")


class OpInput(NamedTuple):
    """What the client asked for: the invoke's ``f`` and ``value``."""

    f: str
    value: Any


@dataclass(frozen=True, slots=True)
class Inconsistent:
    """A step that could not have happened, with a one-sentence reason (knossos ``inconsistent``)."""

    reason: str

    def describe(self) -> str:
        return f"inconsistent: {self.reason}"


@dataclass(frozen=True, slots=True)
class Branches:
    """Several possible next states (only for ops whose output is UNKNOWN and whose effect is not determined)."""

    states: tuple[Hashable, ...]


class ReachBudget(NamedTuple):
    """A counting look-ahead of one partition (see ``Model.reach_budget``)."""

    groups: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]
    need: Callable[[Hashable, int], tuple[int, ...] | None]


class ModelError(ValueError):
    """An op the model does not understand (names the model, the op and what was expected)."""


class Model:
    """Base class of models.  Subclasses set ``name`` and override ``init`` and ``step``.

    Optional hooks: ``partition`` (split a history into independent sub-histories, e.g. per key),
    ``read_only`` (ops that never change the state: linearized greedily) and ``describe_state``.

    Attributes:
        name: the model's name as used by ``--model``.
        fail_policy: ``"drop"`` -- a ``fail`` completion means the op did not happen and it is removed;
            ``"definite"`` -- the op happened with the negative result ``FAILED`` and must be linearized.
    """

    name = "model"
    fail_policy = "drop"

    def init(self) -> Hashable:
        raise NotImplementedError

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        """Return the next state, an ``Inconsistent`` or ``Branches``.  Must be pure."""
        raise NotImplementedError

    def partition_key(self, op: OpInput) -> Hashable | None:
        """Key of the independent sub-object ``op`` touches, or None if the model cannot be partitioned."""
        return None

    def read_only(self, op: OpInput, output: Any) -> bool:
        """True if this op leaves every state in which it is legal unchanged."""
        return False

    def canonical(self, ops: Sequence[tuple[OpInput, Any]]) -> list[tuple[OpInput, Any]] | None:
        """Optional rewrite of one partition's (input, output) pairs before the search, or None.

        Only for rewrites that map states no later op can tell apart onto one state (e.g. kv: values no
        get ever observes), so the cache merges them.  Reports still show the original ops.
        """
        return None

    def impossible(self, ops: Sequence[tuple[OpInput, Any, float, float]]) -> int | None:
        """Optional cheap pre-check of one partition before any search (default: no opinion).

        ``ops`` are (input, output, call_time, ret_time), ``ret_time = inf`` for indeterminate ops.  Return
        the index of a determinate op that is illegal in every linearization of the ops invoked no later
        than it returns, or None.  Must be sound: the checker then searches only that prefix, first.
        """
        return None

    #: Set to True by models that implement ``could_reach`` (the checker skips the hook otherwise).
    has_reach = False

    def could_reach(self, state: Any, goal: OpInput, goal_output: Any, writers: Sequence[tuple[OpInput, Any]]) -> bool:
        """Optional look-ahead: could ``goal`` (a read-only op) become legal from ``state``?

        ``writers`` are the non-read-only ops still available before ``goal`` must return (each usable at
        most once, in any order).  Return False only when no such sequence can make ``goal`` legal; the
        checker then abandons the state at once.  Returning True is always sound.
        """
        return True

    def reach_planner(
        self, items: Sequence[tuple[OpInput, Any]],
    ) -> Callable[[int, int], list[tuple[tuple[int, ...], ...]] | None] | None:
        """Optional: ``could_reach`` compiled into groups of writers, for the calls of one partition.

        ``items`` are the partition's (input, output) pairs.  Returns None (no plans) or a function
        ``plan(g, limit)`` giving, for the read-only call ``items[g]``, a list of alternatives.  An alternative
        is a tuple of groups, each a non-empty tuple of indices (ascending) of non-read-only calls among
        ``items[:limit]``; it holds in a set A of those calls when every group has a member in A.  The answer
        must be exact: for every state and every A, ``could_reach(state, goal, output, A)`` equals
        ``could_reach(state, goal, output, ())`` or "some alternative holds in A"; or return None for a goal
        it cannot plan (the checker then asks ``could_reach``).  Writers that are interchangeable for the goal
        (equal values) belong in one group, so repeated values keep the plan small.  The checker then answers
        a look-ahead with a few bit operations.
        """
        return None

    def state_canon(self, items: Sequence[tuple[OpInput, Any]]) -> Callable[[Hashable], Hashable] | None:
        """Optional: a map of states for the calls of one partition (``items``: their (input, output)), or None.

        The checker passes every state ``step`` returns through it, so it must only map together states that
        no sequence of those calls can tell apart (a bisimulation: from either, the same calls are legal with
        the same outputs, and they lead to states it again maps together), e.g. kv values that begin no value
        any get reads.  The cache then merges them.
        """
        return None

    def reach_budget(self, items: Sequence[tuple[OpInput, Any]]) -> ReachBudget | None:
        """Optional: a counting look-ahead for the calls of one partition (``items``: their (input, output)).

        Plans (``reach_planner``) ask whether each writer a read needs is still available, not how many are:
        with a tiny value alphabet and a pending indeterminate put, almost any state passes them (the put
        could reset the value and the remaining appends rebuild it, if there were enough of them).  A budget
        counts.  Return None (no opinion) or a ``ReachBudget``: ``groups`` pairs writer indices (ascending)
        with a weight vector each, and ``need(state, g)`` gives, for read-only call ``items[g]`` in ``state``,
        a vector that the summed weights of any set of writers able to make that read legal from ``state``
        reaches in every component (or None: no opinion).  The checker abandons a state when the writers still
        available to a pending read weigh less than its need.  Must be sound: a need may be too low, never
        too high.
        """
        return None

    def describe_state(self, state: Any) -> str:
        return repr(state)

    def describe(self) -> str:
        return f"{self.name}(init={self.describe_state(self.init())}, fail={self.fail_policy})"


_SCALARS = (int, str, float, bool, type(None), _Sentinel)


def freeze(value: Any) -> Any:
    """A hashable copy of a JSON/EDN-like value: lists become tuples, dicts sorted item tuples, sets frozensets."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        items = [(freeze(k), freeze(v)) for k, v in value.items()]
        try:
            items.sort()
        except TypeError:  # keys of mixed types
            items.sort(key=repr)
        return tuple(items)
    if isinstance(value, set | frozenset):
        return frozenset(freeze(v) for v in value)
    return value


def expect_pair(model: str, op: OpInput) -> Sequence[Any]:
    v = op.value
    if not isinstance(v, list | tuple) or len(v) != 2:
        raise ModelError(f"{model}: op {op.f!r} expects a value [expected, new], got {v!r}")
    return v
