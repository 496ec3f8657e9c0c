"""Wing-Gong-Lowe search over one partition, with the (linearized set, state) cache.

Theory of operation.  A search node is (B, s): B is an int bitset of the calls linearized so far, s the
interned id of the model state they lead to.  Calls are numbered in invoke order.  Let r be the
unlinearized determinate call with the earliest return; a call c may be linearized next iff c is not
in B and ``c.call_time <= r.ret_time`` (closed intervals: equal times are concurrent).  The search is a
depth-first walk from (0, init) that tries those candidates, earliest return first (indeterminate calls
last), and never expands a node twice.  It succeeds when every determinate call is linearized:
indeterminate calls may be left out.

Rules that cut the search without changing the verdict:

1. States are interned into small ints and ``model.step`` is memoised per (call, state): the model runs
   once per distinct pair; the search itself only touches ints.
2. A *read-only* candidate legal in s is linearized at once with no alternative: moving it to the
   front of any completion keeps the completion legal (it changes no state and every call that must
   precede it is already in B).  Indeterminate read-only calls are dropped up front.
3. Dominance over indeterminate calls: (D, I, s) -- D determinate, I indeterminate calls linearized -- is
   no better than (D, I', s) with I' a subset of I (the latter may still linearize or skip those calls,
   and they constrain nothing since they never return).  The cache keeps, per (D, s), the I sets seen and
   prunes any superset.
4. Necessary-condition prefilter: the states reachable by applying calls in any order (bounded work).  A
   determinate call legal in none of them is impossible, and the search stops where it must fail (rule 8).
   A model's own ``impossible`` pre-check (run by the caller) gives such a call the same way, and replaces
   the closure (skipped for such models: it costs up to 8 model steps per call).  The history
   is not cut there: while the frontier has not passed the impossible call, only calls invoked before it
   returns are candidates anyway, and a cut would hide from the look-ahead (rule 6) the writers that a read
   returning after the cut may still use, so it would prune more than an unhinted search and could report
   an earlier failing op (it did on about 5% of generated bad kv histories).
5. Children are generated lazily: a candidate's step is computed only when the search reaches it.
6. Model look-ahead (``has_reach``/``could_reach``): a node is abandoned when some pending determinate
   read-only call -- in the window or among the next ``_LOOKAHEAD`` invoked -- can no longer become legal
   with the writers still available.  At most ``_MAX_ASKS`` reads are asked per node, nearest first.  A
   model's ``reach_planner`` states the same answer as alternatives of groups of writers: the read stays
   reachable if the state alone makes it legal or, for some alternative, every group still has an
   unlinearized member (a group gathers interchangeable writers, e.g. appends of one value, so a tiny value
   alphabet keeps plans small); an ask is then a memoised state test plus a few ``&`` on masks.
7. ``model.canonical`` may rewrite the calls, and ``model.state_canon`` map the states, so that states no
   later call can tell apart coincide (kv: a value that begins no value read is as good as any other).
8. Early stop at a proven-impossible call X (rule 4): no node ever linearizes X, so the return frontier
   never passes X; the first node whose frontier reaches X fixes the answer (INVALID, failing call X, and
   that node's path as the longest prefix -- an exhaustive walk would only confirm both).  Since the hint
   only decides where to stop, a hinted search explores the same nodes in the same order as an unhinted
   one and reports the same failing call.  As a guard against a wrong model pre-check, X is stepped from
   that node's state: if it is legal there after all, the early stop is disabled and the search runs on as
   without a hint.  (A guard, not a proof: X illegal there but legal at another node would go unnoticed,
   so ``impossible`` must be sound.)
9. Twins: indeterminate calls with the same signature (f, input) are interchangeable, and the one invoked
   first can stand in for a later one anywhere (neither has a return, and its invoke is no later), so they
   are linearized in invoke order: a call is a candidate only once its earlier twin is in B.  The reachable
   (D, s) pairs are unchanged; the subsets I shrink to a count per signature.
10. Order: candidates are tried earliest return first, indeterminate calls last (``rank``); ``fork`` makes
   a lane of the same search that tries them in invoke order instead (see ``_race``).
11. Counting look-ahead (``reach_budget``): plans ask whether each writer group a pending read needs still
   has a member, not how many; a model's budget says how much (e.g. kv: characters) the writers must still
   supply to that read from the node's state, and the node is abandoned when the unlinearized writers
   invoked before the read returns weigh less (each group's count is one popcount).  With a tiny alphabet
   and a pending indeterminate put, this is what stops garbage states that only a put plus dozens of
   appends could repair.

The first call that cannot be linearized is the determinate call whose return no explored node got
past (the deepest "return frontier"), and the path to the deepest node is the longest linearizable prefix.
"""

from __future__ import annotations

import copy
from bisect import bisect_right
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

from checker.linearizable._calls import Call
from checker.models import FAILED, UNKNOWN, Branches, Inconsistent, Model

RUNNING, VALID, INVALID = "running", "valid", "invalid"
_CLOSURE_STATE_CAP = 64
FRONTIER_STATES = 8  # states kept of the deepest frontier, for the failure report
_LOOKAHEAD = 24
_MAX_ASKS = 5
_LAZY = -2  # a child whose step has not been computed yet
_REPR = object()  # marks a signature part that is a repr (see _sig_part)
_PLAIN = (str, int, type(None))  # exact types whose equal values have equal reprs (bool is not int here)


def _sig_part(v: Any) -> Hashable:
    """A memo key for an op's value or output with exactly repr's equalities, without repr for the common shapes.

    Two values get equal parts iff their reprs are equal: a str is its own part; a dict whose keys are str and
    whose values are str, int (not bool) or None is the tuple of its items (in order, as repr prints them);
    UNKNOWN and FAILED are themselves; anything else is ``(_REPR, repr(v))``.  The shapes never meet: a str
    equals no tuple, an items tuple holds only pairs (never ``_REPR``), and a sentinel equals only itself.
    """
    t = type(v)
    if t is str:
        return v
    if t is dict:
        items = tuple(v.items())
        for k, x in items:
            if type(k) is not str or type(x) not in _PLAIN:
                return (_REPR, repr(v))
        return items
    if v is UNKNOWN or v is FAILED:
        return v
    return (_REPR, repr(v))


_UNPLANNED: Any = object()


def _mask(flags: list[bool]) -> int:
    """The int whose bit i is flags[i] (built in linear time, unlike a sum of shifted ones)."""
    if not flags:
        return 0
    return int("".join("1" if f else "0" for f in reversed(flags)), 2)


class _Writers(Sequence[tuple[Any, Any]]):
    """The (input, output) pairs of the calls in a bitmask, built only if a model looks at them."""

    def __init__(self, items: list[tuple[Any, Any]], mask: int) -> None:
        self._items = items
        self._mask = mask
        self._list: list[tuple[Any, Any]] | None = None

    def _materialise(self) -> list[tuple[Any, Any]]:
        if self._list is None:
            out = []
            m = self._mask
            while m:
                low = m & -m
                m ^= low
                out.append(self._items[low.bit_length() - 1])
            self._list = out
        return self._list

    def __len__(self) -> int:
        return len(self._materialise())

    def __getitem__(self, i: Any) -> Any:
        return self._materialise()[i]

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return iter(self._materialise())


class PartitionSearch:
    """A resumable WGL search of one partition: call ``run(max_steps)`` until it returns VALID/INVALID.

    ``hint`` is a call the model's ``impossible`` pre-check proved illegal: the search stops where its frontier
    reaches it (rule 8), and the bounded reachability pre-check is skipped.
    """

    def __init__(self, model: Model, calls: Sequence[Call], key: Hashable = None, hint: Call | None = None) -> None:
        self.model = model
        self.key = key
        kept = [c for c in calls if c.determinate or not model.read_only(c.input, c.output)]
        kept.sort(key=lambda c: (c.call_time, c.id))
        self.all_calls: list[Call] = kept
        self.original = {c.id: c for c in kept}
        pairs = [(c.input, c.output) for c in kept]
        rewritten = model.canonical(pairs)
        if rewritten is not None:  # Call(...) rather than _replace: a rewritten partition has hundreds
            kept = [c if (i is c.input and o is c.output)
                    else Call(c.id, c.process, i, o, c.call_time, c.ret_time, c.invoke, c.completion)
                    for c, (i, o) in zip(kept, rewritten, strict=True)]
            pairs = rewritten
        self.states: list[Hashable] = []
        self._ids: dict[Hashable, int] = {}
        self.canon = model.state_canon(pairs)
        self.steps = 0
        self.status = RUNNING
        init = self._intern(model.init())
        self._setup(kept, pairs)
        # A model with its own pre-check (run by the caller) is trusted with it: the generic closure would
        # cost up to 8 model steps per call (kv, whose distinct values overflow it, spent half its setup there).
        if hint is not None:
            impossible: Call | None = next(c for c in kept if c.id == hint.id)
        elif type(model).impossible is Model.impossible:
            impossible = self._impossible(init)
        else:
            impossible = None
        # stop_p: the position in R of the impossible call.  No node can linearize it (rule 8), so the return
        # frontier never passes it, and the first node whose frontier reaches it settles the search.
        # size: the calls the search can reach before it settles (all, or those invoked no later than the
        # impossible call returns): the scheduler runs the smallest searches first.
        self.stop_p = -1
        self.size = self.n
        if impossible is not None:
            self.stop_p = next(p for p, i in enumerate(self.R) if self.calls[i].id == impossible.id)
            self.size = bisect_right(self.call_t, impossible.ret_time)
        # DFS stack frames: [j, s, p, children, k, path, B, lo]: j the call linearized to get here (None at the
        # root), path a linked list (j, s, parent path) of the calls linearized so far, so remembering the deepest
        # node costs O(1); the linearized set as B, its bits from lo on (every call below lo is linearized).  So
        # a frame holds about a window of bits, not a bit per call of the history (which would make the stack
        # quadratic in memory and every bit operation linear in the history's length).
        self.best_p = -1
        self.best_path: Any = None
        self.best_states: list[int] = []  # interned states of nodes at the deepest frontier (at most FRONTIER_STATES)
        self.cache_plain: set[tuple[int, int, int]] = set()
        self.cache_dom: dict[tuple[int, int, int], list[int]] = {}
        self.stack: list[list[Any]] = []
        self.final_cache_entries = 0
        self._push_root(init)

    # -- setup ---------------------------------------------------------------------------------------

    def _setup(self, calls: list[Call], items: list[tuple[Any, Any]]) -> None:
        self.calls = calls
        self.n = len(calls)
        self.call_t = [c.call_time for c in calls]
        self.ret_t = [c.ret_time for c in calls]
        self.ro = [self.model.read_only(c.input, c.output) for c in calls]
        is_det = self.is_det = [c.output is not UNKNOWN for c in calls]  # Call.determinate, without a property call
        det = [i for i, d in enumerate(is_det) if d]
        self.R = sorted(det, key=lambda i: (self.ret_t[i], self.call_t[i], i))
        rank = [0] * self.n
        for pos, i in enumerate(self.R):
            rank[i] = pos
        nr = len(self.R)
        for i, d in enumerate(is_det):
            if not d:
                rank[i] = nr + i
        self.rank = rank
        self.use_reach = bool(getattr(self.model, "has_reach", False))
        self.reach_memo: dict[tuple[int, int, int], bool] = {}
        self.items = items  # (input, output) of each call
        # Look-ahead plans (rule 6): per read, the (must, anyof) writer masks of each alternative, one of which it
        # needs when its state alone cannot make it legal; computed on the first ask.
        self.planner = self.model.reach_planner(self.items) if self.use_reach else None
        self.plans: dict[int, list[tuple[int, list[int]]] | None] = {}
        # Counting look-ahead (rule 11): writer groups as (mask, weights), and per (state, signature) the need
        budget = self.model.reach_budget(self.items) if self.use_reach else None
        self.budget: list[tuple[int, tuple[int, ...]]] | None = None
        self.need_fn = budget.need if budget is not None else None
        if budget is not None and budget.groups:
            self.budget = [(sum(1 << i for i in idx), w) for idx, w in budget.groups]
        elif budget is not None:
            self.budget = []
        self.need_memo: dict[int, tuple[tuple[int, int], ...] | None] = {}
        self.free_memo: dict[int, bool] = {}  # state * n_sigs + signature -> legal without any writer
        self.ro_mask = _mask(self.ro)
        self.writer_mask = ((1 << self.n) - 1) ^ self.ro_mask
        # Counts, not masks (n masks of n bits each would be quadratic memory): upto[i] = number of calls
        # invoked no later than call i returns; window[p] = the same for the p-th earliest return.  The
        # candidate mask of a node is then (1 << window[p]) - 1 minus the linearized set.
        self.upto = [bisect_right(self.call_t, t) for t in self.ret_t]
        self.window = [self.upto[r] for r in self.R]
        self.det_ro_list = [r and d for r, d in zip(self.ro, is_det, strict=True)]
        self.ahead: dict[int, list[int]] = {}
        self.info_mask = _mask([not d for d in is_det])
        # Calls with the same (f, input, output) share one step memo, so the model runs once per distinct
        # (signature, state): a register history of 100 calls typically has a few dozen signatures.
        memos: dict[Any, tuple[int, dict[int, Any]]] = {}
        self.trans: list[dict[int, Any]] = []
        self.sig_of: list[int] = []
        self.sig_rep: list[int] = []
        sig_of, trans, sig_rep = self.sig_of, self.trans, self.sig_rep
        for i, (inp, out) in enumerate(items):
            # repr's equality is a fast stand-in for equality on JSON/EDN-like values (unequal values never share
            # a repr; equal values that print differently merely do not share a memo); _sig_part has the same
            # equalities without printing the plain str and dict values most histories hold.
            sig: Any = (inp.f, _sig_part(inp.value), _sig_part(out))
            entry = memos.get(sig)
            if entry is None:
                entry = memos[sig] = (len(sig_rep), {})
                sig_rep.append(i)
            sig_of.append(entry[0])
            trans.append(entry[1])
        self.n_sigs = len(self.sig_rep)
        # Rule 9 (twins): an indeterminate call is a candidate only once the previous indeterminate call of its
        # signature is linearized.  twin_of names that call (-1 if there is none).
        last_info: dict[int, int] = {}
        self.twin_of = [-1] * self.n
        for i, d in enumerate(is_det):
            if not d:
                self.twin_of[i] = last_info.get(self.sig_of[i], -1)
                last_info[self.sig_of[i]] = i

    def _intern(self, state: Hashable) -> int:
        sid = self._ids.get(state)
        if sid is None:
            sid = len(self.states)
            self._ids[state] = sid
            self.states.append(state)
        return sid

    def _next(self, i: int, s: int) -> Any:
        """Memoised step: -1 if illegal, a state id, or a tuple of ids (Branches)."""
        memo = self.trans[i]
        nxt = memo.get(s)
        if nxt is None:
            c = self.calls[i]
            res = self.model.step(self.states[s], c.input, c.output)
            canon = self.canon
            if isinstance(res, Inconsistent):
                nxt = -1
            elif isinstance(res, Branches):
                nxt = tuple(self._intern(x if canon is None else canon(x)) for x in res.states) or -1
            else:
                nxt = self._intern(res if canon is None else canon(res))
            memo[s] = nxt
        return nxt

    def _impossible(self, init: int) -> Call | None:
        """Earliest-returning determinate call legal in no state reachable in any order (bounded), or None."""
        reps = self.sig_rep
        if not reps:
            return None
        budget = 8 * self.n + 64
        seen = {init}
        frontier = [init]
        legal_memo: set[int] = set()
        while frontier:
            s = frontier.pop()
            for i in reps:
                budget -= 1
                if budget <= 0 or len(seen) > _CLOSURE_STATE_CAP:
                    return None
                nxt = self._next(i, s)
                if nxt == -1:
                    continue
                legal_memo.add(id(self.trans[i]))
                for t in nxt if isinstance(nxt, tuple) else (nxt,):
                    if t not in seen:
                        seen.add(t)
                        frontier.append(t)
        bad = [i for i in self.R if id(self.trans[i]) not in legal_memo]
        return self.calls[bad[0]] if bad else None

    # -- search --------------------------------------------------------------------------------------

    def _advance(self, B: int, lo: int, p: int) -> int:
        """The first position from p in R of a call not in the linearized set (B shifted right by lo)."""
        R = self.R
        nr = len(R)
        while p < nr and (R[p] < lo or (B >> (R[p] - lo)) & 1):
            p += 1
        return p

    def _ahead(self, w: int) -> list[int]:
        """The determinate read-only calls among the ``_LOOKAHEAD`` invoked from w on (memoised per w)."""
        hit = self.ahead.get(w)
        if hit is None:
            det_ro = self.det_ro_list
            hit = self.ahead[w] = [i for i in range(w, min(self.n, w + _LOOKAHEAD)) if det_ro[i]]
        return hit

    def _children(self, B: int, lo: int, s: int, p: int) -> list[tuple[int, int]]:
        """The children of node (B, s): B the linearized set shifted right by lo (every call below lo is in it),
        so that each bit operation here costs the width of the window, not the length of the history."""
        # Candidates: unlinearized calls invoked no later than the earliest pending return, as a bitmask.
        w = self.window[p]
        m = ((1 << (w - lo)) - 1) & ~B
        trans = self.trans
        rank = self.rank
        ro = self.ro
        found: list[tuple[int, int, int]] = []
        pending_reads: list[int] = []
        writers: list[int] = []
        use_reach = self.use_reach
        # Read-only candidates first (rule 2: the first legal one is the only child), so a node with a legal
        # read never steps its writers.  Same order and same memo side effects as one mixed pass.
        while m:
            low = m & -m
            m ^= low
            i = lo + low.bit_length() - 1
            if not ro[i]:
                writers.append(i)
                continue
            nxt = trans[i].get(s)
            if nxt is None:
                nxt = self._next(i, s)
            if nxt != -1:
                return [(i, s)]
            if use_reach:
                pending_reads.append(i)
        twin_of = self.twin_of
        for i in writers:
            t = twin_of[i]
            # rule 9: skip an indeterminate call whose earlier twin is not linearized yet
            if t >= lo and not (B >> (t - lo)) & 1:
                continue
            nxt = trans[i].get(s)
            if nxt is None:
                found.append((rank[i], i, _LAZY))  # stepped only if the search gets to it
            elif nxt != -1:
                if type(nxt) is int:
                    found.append((rank[i], i, nxt))
                else:
                    found.extend((rank[i], i, t) for t in nxt)
        if use_reach and not self._lookahead_holds(B, lo, s, w, pending_reads):
            return []
        if len(found) > 1:
            found.sort()
        return [(i, t) for _, i, t in found]

    def _lookahead_holds(self, B: int, lo: int, s: int, w: int, pending_reads: list[int]) -> bool:
        """Can every read in the window that is illegal in state s (``pending_reads``), and the reads invoked
        soon after the window, still become legal?  (B: the linearized set shifted right by lo.)"""
        trans = self.trans
        # Look-ahead: reads in the window, then reads invoked soon after it, must stay reachable.  Only the
        # first few illegal ones are asked (each ask costs a model call; the nearest ones prune best).
        # (Asking the first reads that are not "free" instead, which skips stepping them, prunes more and made
        # about a quarter of the invalid tiny-alphabet kv histories report an earlier failing op.)
        planned = self.planner is not None
        free_memo = self.free_memo
        n_sigs = self.n_sigs
        sig_of = self.sig_of
        for i in self._ahead(w):
            if len(pending_reads) >= _MAX_ASKS:
                break
            if (B >> (i - lo)) & 1:
                continue
            nxt = trans[i].get(s)
            if nxt is None:
                nxt = self._next(i, s)
            if nxt == -1:
                pending_reads.append(i)
        if pending_reads:
            Babs = (B << lo) | ((1 << lo) - 1)  # the plans' masks are absolute; asks are rarer than nodes
            plans = self.plans
            for i in pending_reads[:_MAX_ASKS]:
                if planned:
                    # the state alone makes it reachable: no plan needed (most asks of an easy history end here)
                    fkey = s * n_sigs + sig_of[i]
                    free = free_memo.get(fkey)
                    if free is None:
                        free = self._free(fkey, s, i)
                    if free:
                        continue
                plan = plans.get(i, _UNPLANNED)
                if plan is None or plan is _UNPLANNED:
                    if not self._reachable(Babs, s, i):
                        return False
                    continue
                # _reachable with a plan, inlined: some plan's writers all unlinearized
                for must, anyof in plan:
                    if must & Babs:
                        continue
                    for gm in anyof:
                        if gm & Babs == gm:
                            break
                    else:
                        break  # this alternative holds
                else:
                    return False
            if self.budget is not None and not self._affordable(Babs, s, pending_reads[:_MAX_ASKS]):
                return False
        return True

    def _reachable(self, B: int, s: int, g: int) -> bool:
        """Model look-ahead: can read-only call g still become legal from state s (memoised)?"""
        if self.planner is not None:
            plan = self.plans.get(g, _UNPLANNED)
            if plan is _UNPLANNED:
                plan = self.plans[g] = self._plan(g)
            if plan is not None:
                # every plan's writers were invoked before g returns, so "available" is "not linearized yet"
                fkey = s * self.n_sigs + self.sig_of[g]
                free = self.free_memo.get(fkey)
                if free is None:
                    free = self._free(fkey, s, g)
                return free or any(not must & B and all(gm & B != gm for gm in anyof) for must, anyof in plan)
        avail = self.writer_mask & ((1 << self.upto[g]) - 1) & ~B
        key = (s, g, avail)
        hit = self.reach_memo.get(key)
        if hit is None:
            c = self.calls[g]
            hit = self.model.could_reach(self.states[s], c.input, c.output, _Writers(self.items, avail))
            self.reach_memo[key] = hit
        return hit

    def _affordable(self, B: int, s: int, reads: list[int]) -> bool:
        """Counting look-ahead (rule 11): do the writers still available to each read weigh its need?"""
        budget = self.budget
        assert budget is not None and self.need_fn is not None
        memo = self.need_memo
        for g in reads:
            fkey = s * self.n_sigs + self.sig_of[g]
            need = memo.get(fkey, _UNPLANNED)
            if need is _UNPLANNED:
                raw = self.need_fn(self.states[s], g)
                need = memo[fkey] = None if raw is None else tuple((r, k) for r, k in enumerate(raw) if k > 0)
            if not need:
                continue
            avail = ((1 << self.upto[g]) - 1) & ~B
            counts = [((gm & avail).bit_count(), w) for gm, w in budget]
            for r, k in need:
                have = 0
                for c, w in counts:
                    have += c * w[r]
                if have < k:
                    return False
        return True

    def _free(self, fkey: int, s: int, g: int) -> bool:
        """Memo miss of ``free_memo[fkey]``: does state s alone make read-only call g legal?"""
        c = self.calls[g]
        free: bool = self.model.could_reach(self.states[s], c.input, c.output, ())
        self.free_memo[fkey] = free
        return free

    def _plan(self, g: int) -> list[tuple[int, list[int]]] | None:
        """The model's plan for read g as (must, anyof) masks: every writer in ``must`` (the one-member groups)
        and some writer of each ``anyof`` mask must be unlinearized."""
        assert self.planner is not None
        alts = self.planner(g, self.upto[g])
        if alts is None:
            return None
        masks = []
        for alt in alts:
            must = 0
            anyof = []
            for group in alt:
                if len(group) == 1:
                    must |= 1 << group[0]
                else:
                    m = 0
                    for i in group:
                        m |= 1 << i
                    anyof.append(m)
            masks.append((must, anyof))
        return masks

    def _push_root(self, init: int) -> None:
        if not self.R:
            self.status = VALID
            return
        p = self._advance(0, 0, 0)
        self.best_p = p
        self.best_states = [init]
        if p == self.stop_p and self._settled(init, p):
            return
        self.stack.append([None, init, p, self._children(0, 0, init, p), 0, None, 0, 0])

    def fork(self) -> PartitionSearch:
        """A second lane over the same calls that tries candidates in invoke order (rule 10).

        It shares everything that does not depend on the order -- the interned states, the step memos, the
        look-ahead plans and memos -- and has its own stack, cache and deepest node.
        """
        lane = copy.copy(self)
        lane.rank = list(range(self.n))  # calls are numbered in invoke order
        lane.steps = 0
        lane.status = RUNNING
        lane.best_p = -1
        lane.best_path = None
        lane.best_states = []
        lane.cache_plain = set()
        lane.cache_dom = {}
        lane.stack = []
        lane.final_cache_entries = 0
        lane._push_root(self._intern(self.model.init()))
        return lane

    @property
    def cache_entries(self) -> int:
        return self.final_cache_entries + len(self.cache_plain) + len(self.cache_dom)

    def run(
        self, max_steps: int, deadline: float | None = None, clock: Callable[[], float] | None = None,
        cache_limit: int | None = None,
    ) -> str:
        """Advance by at most ``max_steps`` node expansions; return RUNNING, VALID or INVALID.

        Also returns RUNNING early once ``clock() > deadline`` or the cache holds more than ``cache_limit``
        entries (checked every 64 steps); the caller decides whether that is the end.
        """
        if self.status != RUNNING:
            return self.status
        stack = self.stack
        nr = len(self.R)
        use_dom = self.info_mask != 0
        cache_plain = self.cache_plain
        children_of = self._children
        advance = self._advance
        dominated = self._dominated
        steps = 0
        while stack:
            frame = stack[-1]
            kids = frame[3]
            k = frame[4]
            if k >= len(kids):
                stack.pop()
                continue
            frame[4] = k + 1
            j, s2 = kids[k]
            if s2 == _LAZY:
                s2 = self._next(j, frame[1])
                if s2 == -1:
                    continue
                if type(s2) is not int:
                    kids[k + 1:k + 1] = [(j, t) for t in s2[1:]]
                    s2 = s2[0]
            lo = frame[7]
            B2 = frame[6] | (1 << (j - lo))
            lo2 = lo
            if j == lo:  # shift out the run of linearized calls at the bottom
                t = (~B2 & (B2 + 1)).bit_length() - 1
                B2 >>= t
                lo2 = lo + t
            # Cache keys drop the run of low bits that are all set (calls linearized or indeterminate), so an
            # entry costs about a window of bits, not a bit per call of the whole history.  The plain key stays
            # inline: it is the per-node cost of every easy history.
            if use_dom:
                if dominated(B2, lo2, s2):
                    continue
            else:
                key = (B2, lo2, s2)
                if key in cache_plain:
                    continue
                cache_plain.add(key)
            p2 = advance(B2, lo2, frame[2])
            path = (j, s2, frame[5])
            if p2 >= self.best_p and self._frontier(p2, s2, path):
                self.steps += steps + 1
                return INVALID
            if p2 == nr:
                self.best_path = path
                self.status = VALID
                self.steps += steps + 1
                self.release()
                return VALID
            stack.append([j, s2, p2, children_of(B2, lo2, s2, p2), 0, path, B2, lo2])
            steps += 1
            if steps >= max_steps or (steps & 63 == 0 and (
                (deadline is not None and clock is not None and clock() > deadline)
                or (cache_limit is not None and len(cache_plain) + len(self.cache_dom) > cache_limit)
            )):
                self.steps += steps
                return RUNNING
        self.steps += steps
        self.status = INVALID
        self.release()
        return INVALID

    def _dominated(self, B: int, lo: int, s: int) -> bool:
        """Is node (B, s) (B shifted right by lo) dominated by a cached one: same state and same determinate calls
        linearized, and a subset of its indeterminate ones?  If not, cache it.  The key is computed on the
        whole-history bitset, as indeterminate calls may sit anywhere in it."""
        info_mask = self.info_mask
        Babs = (B << lo) | ((1 << lo) - 1)
        D = Babs | info_mask
        q = (~D & (D + 1)).bit_length() - 1
        dkey = (D >> q, q, s)
        infos = Babs & info_mask
        seen = self.cache_dom.get(dkey)
        if seen is None:
            self.cache_dom[dkey] = [infos]
            return False
        for x in seen:
            if x & infos == x:
                return True
        seen.append(infos)
        return False

    def _frontier(self, p: int, s: int, path: Any) -> bool:
        """Note a node at or beyond the farthest frontier so far (position ``p`` in R, state ``s``); True when it
        settles a hinted search INVALID (see ``_settled``)."""
        if p > self.best_p:
            self.best_p = p
            self.best_path = path
            self.best_states = [s]
            return p == self.stop_p and self._settled(s, p)
        if len(self.best_states) < FRONTIER_STATES and s not in self.best_states:
            self.best_states.append(s)
        return False

    def _settled(self, s: int, p: int) -> bool:
        """At the first node whose frontier reaches the impossible call: finish INVALID (rule 8) unless the
        call is legal in this node's state, which would refute the pre-check (then search on, unhinted)."""
        if self._next(self.R[p], s) != -1:
            self.stop_p = -1
            return False
        self.status = INVALID
        self.release()
        return True

    def release(self) -> None:
        """Free the search structures of a finished partition (keeps the cache size for the statistics)."""
        self.final_cache_entries = len(self.cache_plain) + len(self.cache_dom)
        self.stack.clear()
        self.cache_plain = set()
        self.cache_dom = {}
        self.reach_memo = {}

    # -- reporting -----------------------------------------------------------------------------------

    def failing_call(self) -> Call | None:
        if self.status != INVALID:
            return None
        return self.original[self.calls[self.R[max(self.best_p, 0)]].id]

    def linearization(self) -> list[tuple[Call, Hashable]]:
        """The longest linearizable prefix found: (call, state after it) pairs."""
        out: list[tuple[Call, Hashable]] = []
        node = self.best_path
        while node is not None:
            j, s, node = node
            out.append((self.original[self.calls[j].id], self.states[s]))
        out.reverse()
        return out

    def frontier_states(self) -> list[Hashable]:
        """Distinct model states of the explored nodes that got furthest (at most FRONTIER_STATES): the states
        the model could be in when the first call that cannot be linearized had to take effect."""
        return [self.states[i] for i in self.best_states]

    def state_at_best(self) -> Hashable:
        if self.best_path is not None:
            return self.states[self.best_path[1]]
        return self.model.init()
