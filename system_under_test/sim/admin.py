"""Simulated clients of the ``broker-ids`` allocator ops, the ``membership`` workload's lifecycle ops and the
``controller-register`` workload.

They send the requests the real workload clients send and record the values those record
(``client/workload_requests.py`` builds both, for the real clients and for these), in the history format
(``docs/history-format.md``), so the real runs' checkers judge them (``systems/splitbrain/sim/check.py``):

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
* :class:`SimRegister` -- the ``controller-register`` workload on the virtual broker sets ``vreg-0``, ``vreg-1``
  (``client/register_requests.py`` draws its ops and builds its requests and values, as for the real client):
  registers the virtual brokers as brokers do, heartbeats every controller with a long lease
  (:data:`REGISTER_LEASE_MS`), makes broker 1 the first master, then ``read`` / ``elect`` / ``alter``; judged for
  linearizability against the workload's ``ControllerMetadata``.  Its RNG is its own (drawn after the
  nemesis's), so adding it left the nemesis's draws as they were.

Processes are ints of their own range per client (:data:`ALLOC_PROCESSES`, :data:`MEMBERSHIP_PROCESSES`,
:data:`REGISTER_PROCESSES`), so they never meet the queue clients' (``0..``): a thread whose op ended ``info``
continues as old id + threads.  A reply with a code the op does not expect is ``fail`` when the code is definite
or the op only reads, else ``info``; no reply at all (no controller answered) is ``info`` for a write, ``fail``
for a read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from system_under_test.client import register_requests as rr
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
    heartbeat_call,
    leave_record,
    lifecycle_op,
    next_id_call,
    next_id_value,
    read_value,
    replica_info_call,
    stale_heartbeat_call,
    stale_heartbeat_value,
)
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS
from system_under_test.protocol.codes import RequestCode, ResponseCode, is_definite
from system_under_test.sim.broker import SimBroker
from system_under_test.sim.ctlclient import ControllerClient
from system_under_test.sim.network import Network, Reply, Request, SimNode
from system_under_test.sim.world import World

if TYPE_CHECKING:
    import random

__all__ = ["ALLOC_PROCESSES", "MEMBERSHIP_PROCESSES", "MEMBERSHIP_SET", "REGISTER_LEASE_MS", "REGISTER_PROCESSES",
           "SETUP_TIMEOUT", "SETUP_WRONG_STATE", "SimAllocator", "SimMembership", "SimRegister"]

ALLOC_PROCESSES = 1_000_000
MEMBERSHIP_PROCESSES = 2_000_000
REGISTER_PROCESSES = 3_000_000
REGISTER_LEASE_MS = 120_000
"""The virtual brokers' lease: long, as the mutation bench's search spec sets it, so no clock fault lets a lease
lapse (and the scan change a set) behind the model's back."""
SETUP_WRONG_STATE = "wrong-initial-state"
SETUP_TIMEOUT = "setup-timeout"
REGISTER_TIMEOUT_MS = 1500  # the real workload's controller client timeout (1.5 s)
REGISTER_SETUP_MS = 30_000  # the real setup's timeout
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
                 threads: int, think_ms: int, rng: random.Random | None = None) -> None:
        super().__init__(name, world, net)
        self.rng = rng if rng is not None else world.rng  # the client's own draws: when to act, which op
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
            self.timer(self.rng.randint(0, self.think_ms), self._next, t)

    def end(self) -> None:
        self.running = False

    def _next(self, t: int) -> None:
        if self.running:
            self.next_op(t)

    def next_op(self, t: int) -> None:  # pragma: no cover - every client overrides it
        raise NotImplementedError

    def think(self, t: int) -> None:
        if self.running:
            self.timer(self.rng.randint(self.think_ms // 2, self.think_ms * 3 // 2 + 1), self._next, t)

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
                 brokers: Mapping[str, SimBroker], *, think_ms: int = 500, lease_ms: int = DEFAULT_LEASE_TIMEOUT_MS,
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

class SimRegister(_Threads):
    """The ``controller-register`` workload on the virtual broker sets ``vreg-0..`` (module docstring).

    Setup, in the start phase and unrecorded as the real client's ``setup`` is: register every virtual broker as
    a broker does (GetNextBrokerId -> ApplyBrokerId -> RegisterBroker, via the leader), heartbeat every
    controller every :data:`~system_under_test.client.register_requests.HEARTBEAT_INTERVAL_MS` (the client is
    never cut off, as the real harness's heartbeats are not), make broker 1 master of each set (the first
    election) and read that each set is in ``INITIAL_STATE``.  Then the ops of
    :func:`~system_under_test.client.register_requests.register_op`: ``read`` (GetReplicaInfo via the leader or
    sent to the named controller alone), ``elect`` (admin ElectMaster designating a replica), ``alter``
    (AlterSyncStateSet, fresh or pinned).  A write sent to a controller that did not answer in time is not sent
    again (the op is ``info``), as the real client raises RequestTimeout.  ``setup_error`` says why the setup did
    not finish, ``(kind, message)`` -- :data:`SETUP_WRONG_STATE` when a set was read in another state than
    ``INITIAL_STATE`` after its first election (what the real setup raises on), :data:`SETUP_TIMEOUT` when it
    did not finish in time -- and then no op runs; ``rng`` is the client's own (op choice, think times, register
    codes)."""

    def __init__(self, name: str, world: World, net: Network, controllers: tuple[str, ...], rng: random.Random, *,
                 threads: int = 2, think_ms: int = 200, broker_sets: int = rr.BROKER_SETS,
                 replicas: int = rr.REPLICAS, lease_ms: int = REGISTER_LEASE_MS) -> None:
        super().__init__(name, world, net, controllers, base=REGISTER_PROCESSES, threads=threads, think_ms=think_ms,
                         rng=rng)
        self.controllers = controllers
        self.ctl = ControllerClient(self, controllers, timeout_ms=REGISTER_TIMEOUT_MS)
        self.sets = rr.set_names(broker_sets)
        self.replicas = replicas
        self.lease_ms = lease_ms
        self.brokers: list[tuple[str, int, str, int]] = []  # (set, id, address, broker epoch)
        self.seen: dict[str, tuple[rr.MetaState, ...]] = {}
        self.ready = False
        self.begun = False
        self.setup_error: tuple[str, str] | None = None

    # -- setup -------------------------------------------------------------------------------------
    def on_start(self) -> None:
        self.brokers, self.ready, self.setup_error = [], False, None
        self._register(0, self.now_ms() + REGISTER_SETUP_MS)

    def _retry(self, deadline_ms: int, why: str, fn: Callable[..., None], *args: Any) -> bool:
        """Try ``fn(*args)`` again in 200 ms, or give the setup up (``setup_error``) past ``deadline_ms``."""
        if self.now_ms() >= deadline_ms:
            self.setup_error = (SETUP_TIMEOUT, f"controller-register setup did not finish within {REGISTER_SETUP_MS} "
                                               f"ms: {why}")
            return False
        self.timer(200, fn, *args)
        return True

    def _register(self, i: int, deadline_ms: int) -> None:
        """Register virtual broker ``i`` (set ``i // replicas``, replica ``i % replicas``), then the next."""
        if i == len(self.sets) * self.replicas:
            self._heartbeat()
            self._first_elect(0, deadline_ms)
            return
        s, r = divmod(i, self.replicas)
        name, addr = self.sets[s], rr.virtual_addr(s, r)

        def got_id(rep: Reply | None) -> None:
            if rep is None or rep.code != _SUCCESS:
                self._retry(deadline_ms, f"GetNextBrokerId of {name}: {_outcome(rep)}", self._register, i, deadline_ms)
                return
            bid = int(next_id_value({}, rep.header)["next_broker_id"])
            code = f"{addr};{self.now_ms()};{self.rng.getrandbits(32):08x}"
            self._apply(bid, code, name, addr, i, deadline_ms)

        self.ctl.call(*next_id_call(CLUSTER_NAME, name), got_id)

    def _apply(self, bid: int, code: str, name: str, addr: str, i: int, deadline_ms: int) -> None:
        def applied(rep: Reply | None) -> None:
            if rep is None or rep.code != _SUCCESS:
                self._retry(deadline_ms, f"ApplyBrokerId {bid} of {name}: {_outcome(rep)}", self._register, i,
                            deadline_ms)
                return
            incarnation = f"{self.rng.getrandbits(64):016x}"
            self.ctl.call(*rr.register_broker_call(CLUSTER_NAME, name, bid, addr, incarnation, None), registered)

        def registered(rep: Reply | None) -> None:
            if rep is None or rep.code != _SUCCESS:
                self._retry(deadline_ms, f"RegisterBroker {bid} of {name}: {_outcome(rep)}", self._register, i,
                            deadline_ms)
                return
            self.brokers.append((name, bid, addr, int(rep.header["broker_epoch"])))
            self._register(i + 1, deadline_ms)

        self.ctl.call(*apply_id_call(CLUSTER_NAME, name, bid, code, addr), applied)

    def _heartbeat(self) -> None:
        """One heartbeat of every virtual broker to every controller (one-way: the real client ignores the
        answers), then the next round."""
        for name, bid, addr, epoch in self.brokers:
            code, header = heartbeat_call(CLUSTER_NAME, name, bid, addr, epoch, self.lease_ms)
            for c in self.controllers:
                self.send(c, Request(0, self.name, int(code), header, oneway=True))
        self.timer(rr.HEARTBEAT_INTERVAL_MS, self._heartbeat)

    def _first_elect(self, s: int, deadline_ms: int) -> None:
        """Make broker 1 master of set ``s`` (the first election) and read that the set is in INITIAL_STATE."""
        if s == len(self.sets):
            self.ready = True
            if self.begun and not self.running:
                super().begin()
            return
        name = self.sets[s]

        def read(rep: Reply | None) -> None:
            state = rr.observed_state("read", rep.header) if rep is not None and rep.code == _SUCCESS else None
            if state == rr.INITIAL_STATE:
                self._first_elect(s + 1, deadline_ms)
            elif state is not None and state[0] is not None:
                self.setup_error = (SETUP_WRONG_STATE, f"controller-register: {name} starts in {state} after "
                                                       f"broker 1's first election, expected {rr.INITIAL_STATE}")
            else:
                self._retry(deadline_ms, f"first election of broker 1 of {name}: {_outcome(rep)}", self._first_elect,
                            s, deadline_ms)

        self.ctl.call(*rr.elect_call(name, 1, designate=False, cluster_name=CLUSTER_NAME),
                      lambda _rep: self.ctl.call(*replica_info_call(name), read))

    # -- ops ---------------------------------------------------------------------------------------
    def begin(self) -> None:
        self.begun = True
        if self.ready:
            super().begin()

    def on_message(self, src: str, msg: Any) -> None:
        pass  # NOTIFY_BROKER_ROLE_CHANGED for the virtual brokers: nobody acts on it, as in the real workload

    def next_op(self, t: int) -> None:
        f, value = rr.register_op(self.rng, self.sets, self.controllers, self.seen, replicas=self.replicas)
        self.invoke(t, f, value)
        name = value["broker_set"]
        if f == "read":
            code, header = replica_info_call(name)

            def answered(rep: Reply | None) -> None:
                self._finish(t, f, value, rep, lambda r: rr.meta_read_value(value, r.header))

            if value["via"] is None:
                self.ctl.call(code, header, answered)
            else:
                self.call(value["via"], code, header, answered, timeout_ms=REGISTER_TIMEOUT_MS)
        elif f == "elect":
            self.ctl.call(*rr.elect_call(name, int(value["broker_id"]), designate=True, cluster_name=CLUSTER_NAME),
                          lambda rep: self._finish(t, f, value, rep, lambda r: rr.elect_value(value, r.header)),
                          resend_after_silence=False)
        elif "master_epoch" in value:
            self._send_alter(t, value, rr.alter_sent(value, None))
        else:
            def info(rep: Reply | None) -> None:
                if rep is None or rep.code != _SUCCESS:
                    self._done(t, f, "fail", value, f"reading the master before altering: {_outcome(rep)}")
                else:
                    self._send_alter(t, value, rr.alter_sent(value, rep.header))

            self.ctl.call(*replica_info_call(name), info)

    def _send_alter(self, t: int, value: dict[str, Any], sent: dict[str, Any] | None) -> None:
        if sent is None:
            self._done(t, "alter", "fail", value, f"{value['broker_set']} has no master to alter on behalf of")
            return
        self.ctl.call(*rr.alter_call(CLUSTER_NAME, value["broker_set"], sent),
                      lambda rep: self._finish(t, "alter", value, rep, lambda r: rr.alter_value(value, sent, r.header)),
                      resend_after_silence=False)

    def _finish(self, t: int, f: str, value: dict[str, Any], rep: Reply | None,
                ok_value: Callable[[Reply], dict[str, Any]]) -> None:
        """A SUCCESS reply is ok with ``ok_value(rep)``; any other code ``fail`` if definite or a read, else
        ``info``; no answer ``fail`` for a read, ``info`` for a write (it may have taken effect)."""
        read_only = f == "read"
        if rep is not None and rep.code == _SUCCESS:
            self._done(t, f, "ok", ok_value(rep))
        elif rep is None:
            self._done(t, f, "fail" if read_only else "info", value, _outcome(rep))
        else:
            self._done(t, f, "fail" if read_only or is_definite(rep.code) else "info", value, _outcome(rep))

    def _done(self, t: int, f: str, type_: str, value: dict[str, Any], error: str | None = None) -> None:
        self.complete(t, f, type_, value, error=error)
        if type_ == "ok":
            seen = rr.register_seen(self.seen, f, value)
            if seen is not None:
                self.seen = seen
        self.think(t)


def _outcome(rep: Reply | None) -> str:
    """Why a reply is not the answer wanted, for an op's ``error``."""
    if rep is None:
        return "no controller answered"
    return f"{_code_name(rep.code)}: {rep.header.get('message', '')}"[:200]
