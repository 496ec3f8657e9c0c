"""The simulated network and the node life cycle every simulated process shares.

Words:

* **node** -- one simulated process (a controller, a broker or a client), a :class:`SimNode`.  It is *up*,
  *down* (killed: its memory is gone, only its disk survives) or *paused* (SIGSTOP: it runs nothing, and what
  arrives for it waits until it resumes, as in the kernel's socket buffers).  Each start is a new
  *incarnation*: timers and replies of an earlier incarnation are dropped, as a dead process's are.
* **message** -- anything sent with :meth:`Network.send`.  Its *channel* decides how it may be mangled:

  - ``raft``: datagram-like (the Raft core tolerates anything): dropped, duplicated, delayed and reordered;
  - ``rpc`` and ``ha``: one TCP connection per (source, destination, channel): delivered in order; a packet
    fault can drop a message (the request then times out, as over a reset connection) but never duplicates
    or reorders one.

* **link** -- a pair of cluster nodes.  A partition *cuts* links (both directions, as the partition nemesis's
  grudges do: TCP then fails both ways); clients are never cut off (the real nemesis cuts links between
  nodes only).
* **packet fault** -- a window in which messages are dropped with ``drop_rate``, delayed by up to
  ``extra_delay_ms`` and (``raft`` only) duplicated with ``dup_rate``.

The RNG is the world's: a run is a function of its seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from system_under_test.sim.world import World

__all__ = ["Network", "PacketFault", "Reply", "Request", "SimNode", "request_key"]


@dataclass(slots=True)
class Request:
    """An RPC request (``code`` a RequestCode int); ``oneway`` requests get no reply."""

    req_id: int
    src: str
    code: int
    header: dict[str, Any]
    body: Any = None
    oneway: bool = False


def request_key(src: str, req_id: int) -> str:
    """A request's name in the run's node events: its sender and the sender's request number (unique per node for
    the whole run: the number is not reset by a restart).  The broker's ``lease-renewed`` and the controller's
    ``lease-granted`` events name the heartbeat this way, so a checker can pair them."""
    return f"{src}#{req_id}"


@dataclass(slots=True)
class Reply:
    req_id: int
    code: int
    header: dict[str, Any] = field(default_factory=dict)
    body: Any = None


@dataclass(frozen=True)
class PacketFault:
    """Packet mangling in effect (see the module docstring)."""

    drop_rate: float = 0.0
    dup_rate: float = 0.0
    extra_delay_ms: int = 0

    def describe(self) -> str:
        return f"drop {self.drop_rate:.0%} dup {self.dup_rate:.0%} delay +{self.extra_delay_ms} ms"


class Network:
    """Links, cuts, packet faults and delivery; every delay and loss is drawn from the world's RNG."""

    def __init__(self, world: World, *, base_delay_ms: tuple[int, int] = (1, 3)) -> None:
        self.world = world
        self.nodes: dict[str, SimNode] = {}
        self.cluster_nodes: set[str] = set()
        self.cuts: set[frozenset[str]] = set()
        self.packet = PacketFault()
        self.base_delay_ms = base_delay_ms
        self._last_delivery: dict[tuple[str, str, str], int] = {}
        self.sent = 0
        self.dropped = 0

    def add(self, node: SimNode, *, cluster: bool = True) -> None:
        self.nodes[node.name] = node
        if cluster:
            self.cluster_nodes.add(node.name)

    def linked(self, a: str, b: str) -> bool:
        return not self.cuts or a == b or frozenset((a, b)) not in self.cuts

    def send(self, src: str, dst: str, msg: Any, channel: str) -> None:
        """Send ``msg`` from ``src`` to ``dst`` on ``channel`` (``raft``, ``rpc`` or ``ha``)."""
        self.sent += 1
        if self.cuts and not self.linked(src, dst):
            self.dropped += 1
            return
        rnd = self.world.rng.random
        lo, hi = self.base_delay_ms
        delay = lo + int(rnd() * (hi - lo + 1))  # randint's draw, without its cost (one draw per message)
        pf = self.packet
        if pf.drop_rate or pf.extra_delay_ms or pf.dup_rate:
            if pf.drop_rate and rnd() < pf.drop_rate:
                self.dropped += 1
                return
            if pf.extra_delay_ms:
                delay += int(rnd() * (pf.extra_delay_ms + 1))
        t = self.world.now_ms + delay
        if channel == "raft":
            self.world.at(t, self._arrive, src, dst, msg)
            if pf.dup_rate and rnd() < pf.dup_rate:
                self.world.at(t + int(rnd() * (6 + pf.extra_delay_ms)), self._arrive, src, dst, msg)
            return
        key = (src, dst, channel)
        t = max(t, self._last_delivery.get(key, 0))  # one TCP connection: in order
        self._last_delivery[key] = t
        self.world.at(t, self._arrive, src, dst, msg)

    def _arrive(self, src: str, dst: str, msg: Any) -> None:
        if self.cuts and not self.linked(src, dst):  # cut while in flight
            self.dropped += 1
            return
        node = self.nodes.get(dst)
        if node is not None:
            node.deliver(src, msg)


class SimNode:
    """A simulated process: timers, RPC calls and the up/down/paused life cycle (module docstring).

    Subclasses implement :meth:`on_start` (a fresh start from the node's disk), :meth:`on_crash` (forget
    memory; the disk decides what survives) and :meth:`on_message`.
    """

    def __init__(self, name: str, world: World, net: Network) -> None:
        self.name = name
        self.world = world
        self.net = net
        self.up = False
        self.paused = False
        self.incarnation = 0
        self._held: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self._calls: dict[int, Callable[[Reply | None], None]] = {}
        self._next_req = 0
        self.clock_rate = 1.0  # a skewed clock runs faster or slower than the world's
        self._clock_base = 0
        self._clock_since = 0

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        if self.up:
            return
        self.up, self.paused = True, False
        self.incarnation += 1
        self._held.clear()
        self._calls.clear()
        self.on_start()

    def crash(self) -> None:
        if not self.up:
            return
        self.up, self.paused = False, False
        self.incarnation += 1
        self._held.clear()
        self._calls.clear()
        self.on_crash()

    def pause(self) -> None:
        if self.up:
            self.paused = True

    def resume(self) -> None:
        if not self.up or not self.paused:
            return
        self.paused = False
        held, self._held = self._held, []
        for fn, args in held:
            if self.up and not self.paused:
                fn(*args)
            else:
                self._held.append((fn, args))

    def on_start(self) -> None:  # pragma: no cover - every node kind overrides it
        raise NotImplementedError

    def on_crash(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def on_message(self, src: str, msg: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    # -- time ------------------------------------------------------------------------------------
    def now_ms(self) -> int:
        """This node's monotonic clock (the world's, unless a clock fault skews its rate)."""
        return self.world.now_ms if self.clock_rate == 1.0 else int(self._clock_base + (
            self.world.now_ms - self._clock_since) * self.clock_rate)

    def set_clock_rate(self, rate: float) -> None:
        """Run this node's clock at ``rate`` from now on, from its present reading -- except rate 1, which is the
        world's clock itself (the nemesis's reset puts the clock back on the world's time: a jump, back after a fast
        clock, forward after a slow one)."""
        base = self.now_ms()
        self._clock_base, self._clock_since = (self.world.now_ms if rate == 1.0 else base), self.world.now_ms
        self.clock_rate = rate

    @property
    def clock_since(self) -> int:
        """The world ms at which this node's clock last changed rate (0: never)."""
        return self._clock_since

    def world_ms_at(self, local_ms: int) -> float | None:
        """The world time (ms, not rounded) at which this node's clock, as it runs since :attr:`clock_since`, reads
        ``local_ms``; None for a reading below the clock's reading at that change.  For a reading made since that
        change it is never later than when it was made (the reading is rounded down).  A reading made before the
        change is the caller's to exclude (after a jump back the same reading comes again, later): the
        simulator's checkers only place readings of the present rate (``lease-renewed``, :mod:`checker.invariants`).
        """
        if local_ms < self._clock_base:
            return None
        return self._clock_since + (local_ms - self._clock_base) / self.clock_rate

    def timer(self, delay_ms: int, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` after ``delay_ms`` of this node's clock, in this incarnation only."""
        real = delay_ms if self.clock_rate == 1.0 else max(1, int(delay_ms / self.clock_rate))
        self.world.after(real, self._fire, self.incarnation, fn, args)

    def _fire(self, incarnation: int, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        if incarnation != self.incarnation or not self.up:
            return
        if self.paused:
            self._held.append((fn, args))
            return
        fn(*args)

    # -- messages --------------------------------------------------------------------------------
    def deliver(self, src: str, msg: Any) -> None:
        if not self.up:
            return
        if self.paused:
            self._held.append((self._receive, (src, msg)))
            return
        self._receive(src, msg)

    def _receive(self, src: str, msg: Any) -> None:
        if isinstance(msg, Reply):
            cb = self._calls.pop(msg.req_id, None)
            if cb is not None:
                cb(msg)
            return
        self.on_message(src, msg)

    def send(self, dst: str, msg: Any, channel: str = "rpc") -> None:
        self.net.send(self.name, dst, msg, channel)

    def call(self, dst: str, code: int, header: dict[str, Any], on_reply: Callable[[Reply | None], None], *,
             timeout_ms: int, body: Any = None, channel: str = "rpc") -> int:
        """Send a request; ``on_reply`` gets the reply, or None once ``timeout_ms`` passed without one."""
        self._next_req += 1
        req_id = self._next_req
        self._calls[req_id] = on_reply
        self.send(dst, Request(req_id, self.name, code, header, body), channel)
        self.timer(timeout_ms, self._timeout, req_id)
        return req_id

    def _timeout(self, req_id: int) -> None:
        cb = self._calls.pop(req_id, None)
        if cb is not None:
            cb(None)

    def reply(self, req: Request, code: int, header: dict[str, Any] | None = None, body: Any = None,
              channel: str = "rpc") -> None:
        if not req.oneway:
            self.send(req.src, Reply(req.req_id, int(code), header or {}, body), channel)
