"""Simulated clients of the ``broker-ids`` allocator ops and the ``membership`` workload's lifecycle ops.

They send the requests the real workload clients send and record the values those record
(``client/workload_requests.py`` builds both, for the real clients and for these), in the history format
(``docs/history-format.md``), so the real runs' checkers judge them (``harness/sim_check.py``):

* :class:`SimAllocator` -- the ``broker-ids`` workload's allocator ops on the virtual broker sets ``vids-0..``
  (nobody else touches them), sent to the controller leader: ``next-id`` (GetNextBrokerId), ``apply-id``
  (ApplyBrokerId: the next id seen, gaps, stale ids and its own claims again) and ``read-ids`` (the members
  of GetReplicaInfo); judged for linearizability against the workload's ``IdAllocator``.  The lanes of real
  broker processes crashed at registration failpoints are the ``registration-crash`` fault here.
* :class:`SimMembership` -- the ``membership`` workload on a broker set of its own, ``mem-0`` (brokers
  ``m0..m2``, never faulted by the nemesis, as the real workload's extra brokers are not): one lifecycle op at
  a time -- ``bounce`` (crash and restart a broker at once, faster than its lease; ``before``/``after`` its
  broker id and epoch) and after each a ``stale-heartbeat`` (a BROKER_HEARTBEAT with the slot's previous broker
  epoch, as a zombie incarnation would send it) -- and ``read-members`` reads of the set on another thread.
  Not simulated: ``leave`` (controlled shutdown is not simulated) and ``pause-write``.

Processes are ints of their own range per client (:data:`ALLOC_PROCESSES`, :data:`MEMBERSHIP_PROCESSES`), so
they never meet the queue clients' (``0..``): a thread whose op ended ``info`` continues as old id + threads.
A reply with a code the op does not expect is ``fail`` when the code is definite or the op only reads, else
``info``; no reply at all (no controller answered) is ``info`` for a write, ``fail`` for a read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from system_under_test.client.workload_requests import (
    ALLOC_APPLY_FRACTION,
    ALLOC_READ_FRACTION,
    ALLOC_READ_FS,
    alloc_op,
    alloc_seen,
    apply_id_addr,
    apply_id_call,
    apply_id_value,
    lifecycle_op,
    next_id_call,
    next_id_value,
    read_value,
    replica_info_call,
    stale_heartbeat_call,
    stale_heartbeat_value,
)
from system_under_test.protocol.codes import ResponseCode, is_definite
from system_under_test.sim.broker import SimBroker
from system_under_test.sim.ctlclient import ControllerClient
from system_under_test.sim.network import Network, Reply, SimNode
from system_under_test.sim.world import World

__all__ = ["ALLOC_PROCESSES", "MEMBERSHIP_PROCESSES", "MEMBERSHIP_SET", "SimAllocator", "SimMembership"]

ALLOC_PROCESSES = 1_000_000
MEMBERSHIP_PROCESSES = 2_000_000
MEMBERSHIP_SET = "mem-0"
CLUSTER_NAME = "splitbrain"
SPAWN_TIMEOUT_MS = 8000  # the membership workload's spawn_timeout_s
_SUCCESS = int(ResponseCode.SUCCESS)


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


class _Threads(SimNode):
    """Client threads of one node: one op at a time each, a pause of about ``think_ms`` between ops."""

    def __init__(self, name: str, world: World, net: Network, controllers: tuple[str, ...], *, base: int,
                 threads: int, think_ms: int) -> None:
        super().__init__(name, world, net)
        self.ctl = ControllerClient(self, controllers)
        self.threads = threads
        self.think_ms = think_ms
        self.process = [base + t for t in range(threads)]
        self.running = False
        self.ops_done = 0

    def on_start(self) -> None:
        pass

    def on_crash(self) -> None:
        pass

    def on_message(self, src: str, msg: Any) -> None:
        pass

    def begin(self) -> None:
        self.running = True
        for t in range(self.threads):
            self.timer(self.world.rng.randint(0, self.think_ms), self._next, t)

    def end(self) -> None:
        self.running = False

    def _next(self, t: int) -> None:
        if self.running:
            self.next_op(t)

    def next_op(self, t: int) -> None:  # pragma: no cover - every client overrides it
        raise NotImplementedError

    def think(self, t: int) -> None:
        if self.running:
            self.timer(self.world.rng.randint(self.think_ms // 2, self.think_ms * 3 // 2 + 1), self._next, t)

    def invoke(self, t: int, f: str, value: dict[str, Any]) -> None:
        self.world.record("invoke", self.process[t], f, value)

    def complete(self, t: int, f: str, type_: str, value: Any, *, error: str | None = None) -> None:
        self.world.record(type_, self.process[t], f, value, error=error)
        self.ops_done += 1
        if type_ == "info":
            self.process[t] += self.threads

    def ask(self, t: int, f: str, value: dict[str, Any], call: tuple[int, dict[str, Any]],
            ok_value: Callable[[Reply], dict[str, Any] | None]) -> None:
        """Send ``call`` to the controller leader; record ``ok_value(reply)`` as ok, or the error (module
        docstring); then think.  ``ok_value`` is one of ``workload_requests``' value functions."""
        read_only = f in ALLOC_READ_FS

        def done(rep: Reply | None) -> None:
            if rep is None:
                self.complete(t, f, "fail" if read_only else "info", value, error="no controller answered")
            else:
                got = ok_value(rep)
                if got is not None:
                    self.complete(t, f, "ok", got)
                else:
                    name = _code_name(rep.code)
                    kind = "fail" if read_only or is_definite(rep.code) else "info"
                    self.complete(t, f, kind, value, error=f"{name}: {rep.header.get('message', '')}"[:200])
            self.after_op(t, f)

        self.ctl.call(call[0], call[1], done)

    def after_op(self, t: int, f: str) -> None:
        self.think(t)


class SimAllocator(_Threads):
    """The ``broker-ids`` workload's allocator ops (module docstring)."""

    def __init__(self, name: str, world: World, net: Network, controllers: tuple[str, ...], *, threads: int = 2,
                 think_ms: int = 200, virtual_sets: int = 2) -> None:
        super().__init__(name, world, net, controllers, base=ALLOC_PROCESSES, threads=threads, think_ms=think_ms)
        self.virtual = tuple(f"vids-{i}" for i in range(virtual_sets))
        self.seen: dict[str, int] = {}
        self.claims: tuple[tuple[str, int, str], ...] = ()
        self.n = 0

    def next_op(self, t: int) -> None:
        f, value = alloc_op(self.world.rng, self.virtual, (), self.seen, self.claims, self.n,
                            apply_fraction=ALLOC_APPLY_FRACTION, read_fraction=ALLOC_READ_FRACTION)
        self.invoke(t, f, value)
        if f == "apply-id":
            self.n += 1
            bid = int(value["broker_id"])
            call = apply_id_call(CLUSTER_NAME, value["broker_set"], bid, value["register_code"], apply_id_addr(bid))
            self.ask(t, f, value, call, lambda rep: apply_id_value(value, rep.code, str(rep.header.get("message", ""))))
        elif f == "next-id":
            self.ask(t, f, value, next_id_call(CLUSTER_NAME, value["broker_set"]),
                     lambda rep: next_id_value(value, rep.header) if rep.code == _SUCCESS else None)
        else:
            self.ask(t, f, value, replica_info_call(value["broker_set"]),
                     lambda rep: read_value(f, value, rep.code, rep.header, rep.body))

    def complete(self, t: int, f: str, type_: str, value: Any, *, error: str | None = None) -> None:
        super().complete(t, f, type_, value, error=error)
        if type_ == "ok" and isinstance(value, Mapping):
            learnt = alloc_seen(self.seen, self.claims, f, value)
            if learnt is not None:
                self.seen, self.claims = learnt


class SimMembership(_Threads):
    """The ``membership`` workload's bounce / stale-heartbeat / read-members ops on ``mem-0`` (module docstring).

    Thread 0 runs the lifecycle ops, thread 1 the reads.  ``epochs`` holds per slot every (broker id, broker
    epoch) a started incarnation reported, as the real client's does."""

    def __init__(self, name: str, world: World, net: Network, controllers: tuple[str, ...],
                 brokers: Mapping[str, SimBroker], *, think_ms: int = 500, lease_ms: int = 2000) -> None:
        super().__init__(name, world, net, controllers, base=MEMBERSHIP_PROCESSES, threads=2, think_ms=think_ms)
        self.brokers = dict(brokers)
        self.slots = tuple(sorted(self.brokers))
        self.lease_ms = lease_ms
        self.epochs: dict[str, list[tuple[int, int]]] = {}
        self.stale_next: str | None = None
        self.bounced = False

    def begin(self) -> None:
        """The brokers' first start (in the start phase) is the workload's setup: each slot's first incarnation."""
        for slot in self.slots:
            b = self.brokers[slot]
            if b.up and b.registered and b.broker_epoch >= 0:
                self.epochs.setdefault(slot, []).append((b.broker_id, b.broker_epoch))
        super().begin()

    def next_op(self, t: int) -> None:
        if t == 1:
            value: dict[str, Any] = {}
            self.invoke(t, "read-members", value)
            self.ask(t, "read-members", value, replica_info_call(MEMBERSHIP_SET),
                     lambda rep: read_value("read-members", value, rep.code, rep.header, rep.body))
            return
        f, value = lifecycle_op(self.world.rng, self.slots, self.stale_next, self.bounced, pause_write_fraction=0.0,
                                bounce_fraction=1.0)
        self.stale_next = value["slot"] if f == "bounce" else None
        self.bounced = self.bounced or f == "bounce"
        self.invoke(t, f, value)
        if f == "bounce":
            self._bounce(t, value)
        else:
            self._stale(t, value)

    def _bounce(self, t: int, value: dict[str, Any]) -> None:
        slot = value["slot"]
        b = self.brokers[slot]
        before = {"broker_id": b.broker_id if b.up and b.registered else None,
                  "broker_epoch": b.broker_epoch if b.up and b.registered else None}
        b.crash()
        b.start()

        def started(after: dict[str, Any]) -> None:
            self.complete(t, "bounce", "ok", {**value, "before": before, "after": after})
            self.think(t)

        self._await_registered(slot, self.now_ms() + SPAWN_TIMEOUT_MS, started)

    def _await_registered(self, slot: str, deadline_ms: int, then: Callable[[dict[str, Any]], None]) -> None:
        """Wait (polling every 50 ms, until ``deadline_ms``) for the slot's broker to report an id and epoch, as
        the real client's ``start_slot`` waits for a started broker's runtime info."""
        b = self.brokers[slot]
        if b.up and b.registered and b.broker_epoch >= 0:
            self.epochs.setdefault(slot, []).append((b.broker_id, b.broker_epoch))
            then({"broker_id": b.broker_id, "broker_epoch": b.broker_epoch, "refused": None, "timeout": None})
        elif self.now_ms() >= deadline_ms or not b.up:
            then({"broker_id": None, "broker_epoch": None, "refused": b.refused, "timeout": True})
        else:
            self.timer(50, self._await_registered, slot, deadline_ms, then)

    def _stale(self, t: int, value: dict[str, Any]) -> None:
        slot = value["slot"]
        seen = self.epochs.get(slot, [])
        if len(seen) < 2:
            self.complete(t, "stale-heartbeat", "fail", value, error=f"no earlier incarnation of {slot} known yet")
            self.think(t)
            return
        (bid, stale), (_, current) = seen[-2], seen[-1]
        call = stale_heartbeat_call(CLUSTER_NAME, MEMBERSHIP_SET, bid, self.brokers[slot].name, stale, self.lease_ms)
        self.ask(t, "stale-heartbeat", value, call,
                 lambda rep: stale_heartbeat_value(value, bid, stale, current, rep.code))
