"""The fast path of ``check``: a kv history the compiled search linearizes, without a Call object per operation.

On an easy long history the compiled witness search takes about 1 us per call, and everything the general
path did in Python before it (pairing, a Call per pair, a partition pass, the native spelling of each
partition) took several times that.  The compiled module's ``kv_witnesses`` reads the ``Op`` objects itself
and does all of it, exactly as ``pair_ops``, ``build_calls``, ``partition_calls`` and ``_native.encode``
together would (a differential test checks that the Results agree field for field), then searches each
partition.  When every partition has a witness the history is linearizable, and Calls are built only for the
partition a Result shows.  Anything else -- a shape the compiled reader does not take, a partition the search
misses -- gives ``None`` (and the keys it missed), and ``check`` runs the general path, which is the
reference and never offers those keys to the compiled search again.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from typing import NamedTuple

from checker.history import Op
from checker.linearizable._calls import Call, calls_of_pairs
from checker.linearizable._native import DEAD, Witnessed, kv_witnesses, register_witness, spelled
from checker.models import KV, Model, Register


class FastAnswer(NamedTuple):
    """What the fast path found: a witness per partition it linearized, the Calls of each partition it missed
    (the general path pre-checks and searches only those), and every partition's key in order of first
    appearance (the order ``partition_calls`` gives)."""

    found: list[Witnessed]
    missed: dict[Hashable, list[Call]]
    keys: list[Hashable]


def fast_witnesses(ops: Sequence[Op], model: Model, policy: str) -> FastAnswer | None:
    """The fast path's answer (the history is linearizable when it missed no partition), or None when it does
    not apply.  Calls are built only for the partitions it missed and, when read, the one a Result shows."""
    if type(model) is Register and isinstance(ops, list):
        return _register_witnesses(ops, model, policy)
    init = model.initial if type(model) is KV else None
    if type(init) is not str or DEAD in init or not isinstance(ops, list):
        return None
    answer = kv_witnesses(ops, init, policy == "drop")
    if answer is None:
        return None
    parts, kept = answer
    found: list[Witnessed] = []
    missed: dict[Hashable, list[Call]] = {}
    for key, ids, witness in parts:
        if witness is None:
            missed[key] = _calls_of(ops, kept, ids, policy)
            continue
        order, steps, cache_entries = witness
        calls = functools.partial(_calls_of, ops, kept, ids, policy)
        found.append(Witnessed(model, calls, key, order, steps, cache_entries, size=len(ids)))
    return FastAnswer(found, missed, [key for key, _, _ in parts])


def _register_witnesses(ops: list[Op], model: Register, policy: str) -> FastAnswer | None:
    """The register case of ``fast_witnesses``: one partition, key None (registers do not partition)."""
    init = spelled(model.initial)
    answer = None if init is None else register_witness(ops, init, model.cas, model.nil_read_any, policy == "drop")
    if answer is None:
        return None
    found, order, steps, cache_entries, kept = answer
    ids = range(len(kept) // 2)
    if not found:
        return FastAnswer([], {None: _calls_of(ops, kept, ids, policy)}, [None])
    calls = functools.partial(_calls_of, ops, kept, ids, policy)
    return FastAnswer([Witnessed(model, calls, None, order, steps, cache_entries, size=len(ids))], {}, [None])


def _calls_of(ops: Sequence[Op], kept: Sequence[int], ids: Sequence[int], policy: str) -> list[Call]:
    """The Calls of one partition (``ids``: its call ids; ``kept``: each call's invoke and completion positions,
    call i's at 2 i and 2 i + 1)."""
    pairs = [(ops[kept[2 * i]], ops[kept[2 * i + 1]] if kept[2 * i + 1] >= 0 else None) for i in ids]
    calls = calls_of_pairs(pairs, policy, ids)  # no call is dropped: the failed ones it would drop were not kept
    assert len(calls) == len(ids), "a kept call was dropped"
    return calls
