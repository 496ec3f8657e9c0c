"""The simulated world: one virtual clock, one event queue, one seeded RNG, and what the run records.

Words:

* **time** -- virtual milliseconds since the run started (``World.now_ms``, an int).  Nothing in the
  simulation reads a real clock; time moves only when the next event is taken from the queue.
* **event** -- a callable scheduled at a virtual time (:meth:`World.at` / :meth:`World.after`).  Events at
  the same time run in the order they were scheduled (a sequence number breaks ties), so a run is a
  pure function of the seed.
* **history** -- the client and nemesis operations, in the harness's history format
  (``docs/history-format.md``: ``index``, ``time`` in ns, ``type``, ``process``, ``f``, ``value`` ...), so the
  same checkers judge a simulated run and a real one.
* **node events** -- what the brokers did (became master, fenced, accepted a write ...), in the shapes
  ``checker.invariants`` reads from node logs.

Rules of this file: every random choice of the run comes from :attr:`World.rng` (or an RNG seeded from it);
nothing iterates a set of strings where the order could change a choice (string hashing is salted per
process).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any

__all__ = ["NS_PER_MS", "World"]

NS_PER_MS = 1_000_000
_FIRST = 1 << 62  # sequence offset of at_first events: below every at() event of the same millisecond


class World:
    """The clock, the event queue, the RNG and the recorders of one simulated run."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now_ms = 0
        self._queue: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.history: list[dict[str, Any]] = []
        self.node_events: list[dict[str, Any]] = []
        self.events_run = 0
        self.stopped = False

    # -- scheduling ------------------------------------------------------------------------------
    def at(self, t_ms: int, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` at virtual time ``t_ms`` (never in the past)."""
        self._seq += 1
        heapq.heappush(self._queue, (max(t_ms, self.now_ms), self._seq, fn, args))

    def after(self, delay_ms: int, fn: Callable[..., None], *args: Any) -> None:
        self.at(self.now_ms + delay_ms, fn, *args)

    def at_first(self, t_ms: int, fn: Callable[..., None], *args: Any) -> None:
        """Like :meth:`at`, but before every event :meth:`at` scheduled for the same millisecond (among
        themselves in scheduling order).  The nemesis acts this way, so where its steps fall among the other
        events of a millisecond does not depend on when they were scheduled: a schedule played from a file
        lands exactly where the drawn one did."""
        self._seq += 1
        heapq.heappush(self._queue, (max(t_ms, self.now_ms), self._seq - _FIRST, fn, args))

    def run_until(self, t_end_ms: int) -> None:
        """Run every event scheduled before ``t_end_ms``; the clock ends at ``t_end_ms``."""
        q = self._queue
        pop = heapq.heappop
        while q and q[0][0] < t_end_ms and not self.stopped:
            t, _, fn, args = pop(q)
            self.now_ms = t
            self.events_run += 1
            fn(*args)
        if not self.stopped:
            self.now_ms = max(self.now_ms, t_end_ms)

    def sub_rng(self) -> random.Random:
        """A new RNG seeded from the run's RNG (a node's own randomness, e.g. Raft election timeouts)."""
        return random.Random(self.rng.getrandbits(64))

    # -- recording -------------------------------------------------------------------------------
    def record(self, type_: str, process: int | str, f: str, value: Any, **extra: Any) -> dict[str, Any]:
        """Append one op to the history at the current time; returns it."""
        op: dict[str, Any] = {"index": len(self.history), "time": self.now_ms * NS_PER_MS, "type": type_,
                              "process": process, "f": f, "value": value}
        for k, v in extra.items():
            if v is not None:
                op[k] = v
        self.history.append(op)
        return op

    def node_event(self, node: str, event: str, **fields: Any) -> None:
        """A node-log event in the shape ``checker.invariants`` reads (``time`` in ns)."""
        self.node_events.append({"node": node, "event": event, **fields, "time": self.now_ms * NS_PER_MS})
