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
  ``m0..m2``, never faulted by the nemesis, as the real workload's extra brokers are not killed or paused by
  it): one lifecycle op at a time, drawn by the real generator's ``lifecycle_op`` -- ``bounce`` (crash and
  restart a broker at once, faster than its lease; ``before``/``after`` its broker id and epoch), ``leave`` (a
  controlled shutdown through ``broker/shutdown.py`` and the controller's ``want_shutdown`` handling, then a
  restart; ``leave_record``'s value), ``pause-write`` (pause the master past its lease, resume it, write to it
  directly) and after each bounce or leave a ``stale-heartbeat`` (a BROKER_HEARTBEAT with the slot's previous
  broker epoch, as a zombie incarnation would send it) -- and ``read-members`` reads of the set on another thread.

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
    PAUSE_WRITE_FRACTION,
    alloc_op,
    alloc_seen,
    apply_id_addr,
    apply_id_call,
    apply_id_value,
    leave_record,
    lifecycle_op,
    next_id_call,
    next_id_value,
    read_value,
    replica_info_call,
    stale_heartbeat_call,
    stale_heartbeat_value,
)
from system_under_test.protocol.codes import RequestCode, ResponseCode, is_definite
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
LEAVE_EXIT_WAIT_MS = 10_000  # how long the membership client's leave waits for the SIGTERMed process to exit
POLL_MS = 50  # the membership client's polls of a starting or exiting process
PAUSE_BEYOND_LEASE_MS = 1500  # pause-write holds the master this long past the lease
WRITE_TIMEOUT_MS = 3000  # pause-write's direct send
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
    """The ``membership`` workload's lifecycle ops and ``read-members`` reads on ``mem-0`` (module docstring).

    Thread 0 runs the lifecycle ops, thread 1 the reads.  ``epochs`` holds per slot every (broker id, broker
    epoch) a started incarnation reported, as the real client's does."""

    def __init__(self, name: str, world: World, net: Network, controllers: tuple[str, ...],
                 brokers: Mapping[str, SimBroker], *, think_ms: int = 500, lease_ms: int = 2000,
                 pause_write_fraction: float = PAUSE_WRITE_FRACTION) -> None:
        super().__init__(name, world, net, controllers, base=MEMBERSHIP_PROCESSES, threads=2, think_ms=think_ms)
        self.brokers = dict(brokers)
        self.slots = tuple(sorted(self.brokers))
        self.lease_ms = lease_ms
        self.pause_write_fraction = pause_write_fraction
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
        f, value = lifecycle_op(self.world.rng, self.slots, self.stale_next, self.bounced,
                                pause_write_fraction=self.pause_write_fraction)
        self.stale_next = value["slot"] if f in ("bounce", "leave") else None
        self.bounced = self.bounced or f == "bounce"
        self.invoke(t, f, value)
        if f == "bounce":
            self._bounce(t, value)
        elif f == "leave":
            self._leave(t, value)
        elif f == "pause-write":
            self._pause_write(t, value)
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
            self.timer(POLL_MS, self._await_registered, slot, deadline_ms, then)

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

    # -- leave (the real client's _leave) --------------------------------------------------------
    def _runtime_info(self, slot: str) -> dict[str, Any]:
        """What GET_BROKER_RUNTIME_INFO of the slot's process says ({} if no process answers); the real broker
        reports broker id 0 until it has registered."""
        b = self.brokers[slot]
        return {"broker_id": b.broker_id, "broker_epoch": b.broker_epoch} if b.up else {}

    def _leave(self, t: int, value: dict[str, Any]) -> None:
        """SIGTERM the slot's broker (a controlled shutdown), wait for its exit, read the controller's master,
        start the broker again: the value is the real client's (``leave_record``).  The reads are the real
        client's order: the leaving process, the controller, the other processes; then the SIGTERM."""
        slot = value["slot"]
        b = self.brokers[slot]
        mine = self._runtime_info(slot)

        def before_read(before: Mapping[str, Any]) -> None:
            others = sum(1 for s in self.slots if s != slot and self._runtime_info(s).get("broker_id"))
            b.request_shutdown()

            def gone(exited: bool) -> None:
                self._read_set(t, value, lambda after: restart(before, after, others, exited))

            self._await_exit(slot, self.now_ms() + LEAVE_EXIT_WAIT_MS, gone)

        def restart(before: Mapping[str, Any], after: Mapping[str, Any], others: int, exited: bool) -> None:
            record = leave_record(mine, before, after, exited=exited, others=others)
            b.crash()  # start_slot's spawn kills a process of the slot that is still there
            b.start()

            def started(_after_start: dict[str, Any]) -> None:
                self.complete(t, "leave", "ok", {**value, **record})
                self.think(t)

            self._await_registered(slot, self.now_ms() + SPAWN_TIMEOUT_MS, started)

        self._read_set(t, value, before_read)

    def _await_exit(self, slot: str, deadline_ms: int, then: Callable[[bool], None]) -> None:
        """Poll (every 50 ms, until ``deadline_ms``) until the slot's process is gone; ``then(exited)``."""
        if not self.brokers[slot].up or self.now_ms() >= deadline_ms:
            then(not self.brokers[slot].up)
        else:
            self.timer(POLL_MS, self._await_exit, slot, deadline_ms, then)

    def _read_set(self, t: int, value: dict[str, Any], then: Callable[[Mapping[str, Any]], None], *,
                  f: str = "leave") -> None:
        """GetReplicaInfo of the set for op ``f``; on no answer or an error the op ends there, as the real
        client's raises (``info`` unless the code is definite): a left slot is not started again."""

        def done(rep: Reply | None) -> None:
            if rep is not None and rep.code == _SUCCESS:
                then(rep.header)
                return
            if rep is None:
                self.complete(t, f, "info", value, error="no controller answered")
            else:
                kind = "fail" if is_definite(rep.code) else "info"
                self.complete(t, f, kind, value,
                              error=f"{_code_name(rep.code)}: {rep.header.get('message', '')}"[:200])
            self.think(t)

        self.ctl.call(*replica_info_call(MEMBERSHIP_SET), done)

    # -- pause-write (the real client's _pause_write) --------------------------------------------
    def _pause_write(self, t: int, value: dict[str, Any]) -> None:
        """Pause the set's master (SIGSTOP) for the lease plus 1.5 s, resume it, read the controller's view and at
        once send the paused broker one write of its own; the value is the real client's (``fenced-broker-acked``
        judges it).  No master among the slots, or its process down: ``skipped``, as the real client records."""

        def before_read(info: Mapping[str, Any]) -> None:
            slot = next((s for s in self.slots if info.get("master_addr") == self.brokers[s].name), None)
            if slot is None:
                done({"skipped": f"no extra broker is master ({info.get('master_addr')})"})
                return
            b = self.brokers[slot]
            if not b.up:
                done({"skipped": f"{slot} is not running"})
                return
            b.pause()

            def resumed() -> None:
                b.resume()
                self._read_set(t, value, lambda view: write(slot, info, view), f="pause-write")

            self.timer(self.lease_ms + PAUSE_BEYOND_LEASE_MS, resumed)

        def write(slot: str, info: Mapping[str, Any], view: Mapping[str, Any]) -> None:
            out: dict[str, Any] = {"slot": slot, "paused": info.get("master_id"),
                                   "paused_epoch": info.get("master_epoch"),
                                   "controller": {"master_id": view.get("master_id"),
                                                  "master_epoch": view.get("master_epoch")}}

            def answered(rep: Reply | None) -> None:
                if rep is not None and rep.code == _SUCCESS:
                    out.update({"acked": True, "ack_master_epoch": rep.header.get("master_epoch")})
                else:
                    why = "TimeoutError: no reply" if rep is None else \
                        f"RpcError: {_code_name(rep.code)}: {rep.header.get('message', '')}"[:200]
                    out.update({"acked": False, "error": why})
                done(out)

            self.call(self.brokers[slot].name, RequestCode.SEND_MESSAGE, {"topic": "mem", "queue_id": 0}, answered,
                      timeout_ms=WRITE_TIMEOUT_MS, body=["fenced?"])

        def done(extra: dict[str, Any]) -> None:
            self.complete(t, "pause-write", "ok", {**value, **extra})
            self.think(t)

        self._read_set(t, value, before_read, f="pause-write")
