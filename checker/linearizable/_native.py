"""The compiled witness search (``native/lincheck``, built by ``scripts/build_native.sh``), when it is installed.

It answers one question fast: here is a linearization of this partition, or none found within a step budget.
It knows two models, spelled as op codes over strings: ``cas-register``/``register`` with int or nil values,
and one key of ``kv`` (other models, other values and invalid histories are the Python search's).  An
indeterminate call must be linearized there too (at +infinity at the latest): every such call of these models
is legal in every state (a write, a cas with an unknown outcome, or a read spelled as a no-op), so that is
the same as "took effect, or not".  A witness is a proof, so a miss
costs only time: the caller then runs the Python search, which stays the oracle (the property tests check
the two against each other).  The partition whose linearization a Result shows is replayed through the Python
model, which also checks the witness; a witness that fails that replay is dropped and the partition searched
in Python.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from checker.linearizable._calls import Call
from checker.linearizable._search import VALID
from checker.models import FAILED, KV, UNKNOWN, Inconsistent, Model, Register

try:  # the compiled module is optional: scripts/build_native.sh builds and installs it
    import lincheck_native as _impl
except ImportError:  # pragma: no cover - depends on the machine
    _impl = None

NATIVE_AVAILABLE = _impl is not None
#: ``Result.engine`` when the compiled module is not installed.
ENGINE_MISSING = "python (no native core; scripts/build_native.sh builds it)"
NOP, READ, WRITE, APPEND, _CAS_OK, _CAS_FAIL, _CAS_ANY = range(7)  # the op codes (lib.rs)
# The compiled search is for the easy case, where it walks about one step per call; a partition that needs far
# more goes to the Python search (with its look-ahead and dominance rules) without waiting long.
_BUDGET_PER_CALL = 4
_BUDGET_BASE = 16384
_UNSET: Any = object()
DEAD = "\x00"  # kv's stand-in for unobserved values: a value holding it is not plain text to the native model


def encode(model: Model, calls: Sequence[Call]) -> tuple[str, list[int], list[str], list[str]] | None:
    """The native spelling of a partition (initial value, op codes, first and second arguments), or None when
    the native search does not cover it (another model, a value it cannot compare)."""
    if type(model) is KV:
        return _encode_kv(model, calls)
    if type(model) is Register:
        return _encode_register(model, calls)
    return None


def _encode_kv(model: KV, calls: Sequence[Call]) -> tuple[str, list[int], list[str], list[str]] | None:
    init = model.initial
    if type(init) is not str or DEAD in init:
        return None
    codes: list[int] = []
    first: list[str] = []
    add_code, add_arg = codes.append, first.append
    key: Any = _UNSET
    for c in calls:
        out = c.output
        f, v = c.input
        if type(v) is not dict:
            return None
        k = v.get("key", _UNSET)
        if k is not key:
            if key is not _UNSET and k != key:
                return None  # an unpartitioned history: several keys (or an op without one)
            key = k
        if out is FAILED:
            add_code(NOP)
            add_arg("")
            continue
        if f == "get":
            if out is UNKNOWN:
                add_code(NOP)
                add_arg("")
                continue
            arg = out.get("value") if type(out) is dict else out
            add_code(READ)
        elif f == "append":
            arg = v.get("value")
            add_code(APPEND)
        elif f == "put":
            arg = v.get("value")
            add_code(WRITE)
        else:
            return None
        if type(arg) is not str:
            return None
        add_arg(arg)
    if key is _UNSET or any(DEAD in a for a in first):
        return None
    return init, codes, first, [""] * len(codes)


def spelled(x: Any) -> str | None:
    """An int or nil as text (equal texts exactly when the values are equal), else None."""
    if x is None:
        return "nil"
    if type(x) is int:
        return str(x)
    return None


def _encode_register(model: Register, calls: Sequence[Call]) -> tuple[str, list[int], list[str], list[str]] | None:
    init = spelled(model.initial)
    if init is None:
        return None
    codes: list[int] = []
    first: list[str] = []
    second: list[str] = []
    for c in calls:
        out = c.output
        f = c.input.f
        a: str | None = ""
        b: str | None = ""
        if f == "read":
            if out is FAILED or out is UNKNOWN or (out is None and model.nil_read_any):
                code = NOP
            else:
                code, a = READ, spelled(out)
        elif f == "write":
            code, a = (NOP, "") if out is FAILED else (WRITE, spelled(c.input.value))
        elif f == "cas" and model.cas:
            pair = c.input.value
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                return None
            a = spelled(pair[0])
            if out is FAILED:
                code = _CAS_FAIL
            else:
                code, b = (_CAS_ANY if out is UNKNOWN else _CAS_OK), spelled(pair[1])
        else:
            return None
        if a is None or b is None:
            return None
        codes.append(code)
        first.append(a)
        second.append(b)
    return init, codes, first, second


class Witnessed:
    """A partition the native search linearized; the interface of ``RacedSearch`` that ``_check`` reads."""

    status = VALID

    def __init__(self, model: Model, calls: list[Call] | Callable[[], list[Call]], key: Hashable, order: Sequence[int],
                 steps: int, cache_entries: int, *, size: int | None = None) -> None:
        """``calls``: the partition's calls, or a function that builds them when they are first read, or none
        for a partition no Result shows (for both, ``size`` is their number)."""
        self.model = model
        self.key = key
        self._calls = calls
        self._built: list[Call] | None = calls if isinstance(calls, list) else None
        self.n = self.size = size if size is not None else len(calls) if isinstance(calls, list) else 0
        self.steps = steps
        self.cache_entries = cache_entries
        self._witness = order

    def built_calls(self) -> list[Call]:
        """The partition's calls in call id order (built on the first read)."""
        if self._built is None:
            assert callable(self._calls)
            self._built = self._calls()
        return self._built

    @property
    def _order(self) -> list[Call]:
        """The witness: the calls in the order the compiled search linearized them."""
        calls = self.built_calls()
        return [calls[i] for i in self._witness] if calls else []

    @property
    def all_calls(self) -> list[Call]:
        """The partition's calls in invoke order (read only for the partition a Result shows)."""
        return sorted(self.built_calls(), key=lambda c: (c.call_time, c.id))

    def linearization(self) -> list[tuple[Call, Hashable]]:
        """The witness with the Python model's state after each call; raises ValueError if the model refuses a
        step (a native bug: the caller then searches the partition in Python)."""
        out: list[tuple[Call, Hashable]] = []
        state = self.model.init()
        for c in self._order:
            nxt = self.model.step(state, c.input, c.output)
            if isinstance(nxt, Inconsistent) or not isinstance(nxt, Hashable):
                raise ValueError(f"native witness refused by the Python model at {c.describe()}")
            state = nxt
            out.append((c, state))
        return out


def native_witness(model: Model, calls: list[Call], key: Hashable, *, count_after: int | None = None,
                   ) -> Witnessed | None:
    """Ask the compiled search for a linearization of one partition (None: not covered, or none found);
    ``count_after`` as for ``witness_of``."""
    if _impl is None:
        return None
    enc = encode(model, calls)
    if enc is None:
        return None
    init, codes, first, second = enc
    found = witness_of(init, codes, first, second, [c.call_time for c in calls], [c.ret_time for c in calls],
                       count_after=count_after)
    if found is None:
        return None
    order, steps, cache_entries = found
    return Witnessed(model, calls, key, order, steps, cache_entries)


def witness_of(init: str, codes: Sequence[int], first: Sequence[str], second: Sequence[str],
               call_t: Sequence[float], ret_t: Sequence[float], *, count_after: int | None = None,
               ) -> tuple[list[int], int, int] | None:
    """The compiled search on one spelled partition: (order, steps, cache entries), or None if it found none
    within its step budget (or is not installed).  ``count_after``: the steps after which its counting
    look-ahead starts (None: its own choice; the tests pass 0 so that small histories exercise it)."""
    if _impl is None:
        return None
    found: tuple[list[int], int, int] | None = _impl.witness(
        init, codes, first, second, call_t, ret_t, _BUDGET_PER_CALL * len(codes) + _BUDGET_BASE, count_after)
    return found


#: Per partition in order of first appearance: (key, call ids, witness or None where the search missed), the
#: witness (order, steps, cache entries); then the invoke and completion positions (or -1) of each call id,
#: flat: call i's are at 2 i and 2 i + 1.  Ids, orders and positions are memoryviews over packed numbers.
KvWitnesses = tuple[list[tuple[str, Sequence[int], tuple[Sequence[int], int, int] | None]], Sequence[int]]


def kv_witnesses(ops: list[Any], init: str, drop_fails: bool) -> KvWitnesses | None:
    """The compiled reader and search of a whole kv history (see ``_fast`` and ``KvWitnesses``), or None when
    the history is not the plain case it reads (or the module, or this function of it, is not installed)."""
    fn = getattr(_impl, "kv_witnesses", None)
    if fn is None:
        return None
    answer = fn(ops, init, drop_fails, _BUDGET_PER_CALL, _BUDGET_BASE)
    if answer is None:
        return None
    parts, kept = answer
    return ([(key, memoryview(ids).cast("I"), None if w is None else (memoryview(w[0]).cast("I"), w[1], w[2]))
             for key, ids, w in parts], memoryview(kept).cast("q"))


#: (found, order, steps, cache entries, positions): the witness when found, and the invoke and completion
#: positions (or -1) of each call id, flat as in ``KvWitnesses``; order and positions are memoryviews.
RegisterWitness = tuple[bool, Sequence[int], int, int, Sequence[int]]


def register_witness(ops: list[Any], init: str, cas: bool, nil_read_any: bool, drop_fails: bool,
                     ) -> RegisterWitness | None:
    """The compiled reader and search of a whole register history (see ``_fast`` and ``RegisterWitness``), or
    None when the history is not the plain case it reads (or the module, or this function of it, is not
    installed)."""
    fn = getattr(_impl, "register_witness", None)
    if fn is None:
        return None
    answer = fn(ops, init, cas, nil_read_any, drop_fails, _BUDGET_PER_CALL, _BUDGET_BASE)
    if answer is None:
        return None
    found, order, steps, cache_entries, kept = answer
    return found, memoryview(order).cast("I"), steps, cache_entries, memoryview(kept).cast("q")
