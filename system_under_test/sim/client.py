"""Simulated clients: the queue workload's producers and consumers, its final drain, and replica-info reads.

One :class:`SimClients` node runs ``threads`` client threads, each one op at a time, recording every op in
the history exactly as ``workloads/queue.py`` does (``docs/history-format.md``; values as ``checker.queue``
reads them)::

    send          invoke {"queue": Q, "value": "w3-17"}   ok: + "offset", "master_epoch", "broker_id"
    poll          invoke {"queue": Q, "offset": F, "max": N}   ok: + "records", "next_offset", "max_offset", ...
    drain         invoke {"queue": Q, "offset": 0}   ok: + "records" (every visible record)
    replica-info  invoke {"broker_name": BS, "observer": T}   ok: the controller's answer in the shape
                  ``checker.invariants`` observes (master, epochs, SyncStateSet)

A completion is ``fail`` when the reply's code is *definite* (``protocol.codes``: the op had no effect) or the
op only reads, else ``info`` -- and then the thread continues as a new process (old id + threads), as the
harness renumbers it.  Clients are never cut off by a partition (the partition nemesis cuts links between
cluster nodes only).  A replica-info read goes to a controller picked at random (not only the leader): a
correct controller answers it linearizably or refuses it, so per reader the epochs it sees never go back.
"""

from __future__ import annotations

from typing import Any

from system_under_test.protocol.codes import RequestCode, ResponseCode, is_definite
from system_under_test.sim.ctlclient import ControllerClient
from system_under_test.sim.network import Network, Reply, SimNode
from system_under_test.sim.world import World

__all__ = ["SimClients"]

SEND_TIMEOUT_MS = 5000
POLL_TIMEOUT_MS = 3000
_SUCCESS = int(ResponseCode.SUCCESS)


class SimClients(SimNode):
    def __init__(self, name: str, world: World, net: Network, controllers: tuple[str, ...], *, broker_name: str,
                 topic: str, queues_per_set: int, threads: int, think_ms: int, send_fraction: float = 0.55,
                 read_fraction: float = 0.1) -> None:
        super().__init__(name, world, net)
        self.controllers = controllers
        self.broker_name = broker_name
        self.topic = topic
        self.queues = tuple(f"{topic}/{broker_name}/{q}" for q in range(queues_per_set))
        self.threads = threads
        self.think_ms = think_ms
        self.send_fraction = send_fraction
        self.read_fraction = read_fraction
        self.ctl = ControllerClient(self, controllers)
        self.process = list(range(threads))
        self.sent = [0] * threads
        self.cursors: list[dict[str, int]] = [{} for _ in range(threads)]
        self.master: str | None = None
        self.running = False
        self.draining = False
        self.drained: set[str] = set()
        self.ops_done = 0

    def on_start(self) -> None:
        pass

    def on_crash(self) -> None:
        pass

    def on_message(self, src: str, msg: Any) -> None:
        pass

    # -- the main phase --------------------------------------------------------------------------
    def begin(self) -> None:
        self.running = True
        for t in range(self.threads):
            self.timer(self.world.rng.randint(0, self.think_ms), self._next_op, t)

    def end(self) -> None:
        self.running = False

    def _think(self, t: int) -> None:
        if self.running:
            self.timer(self.world.rng.randint(self.think_ms // 2, self.think_ms * 3 // 2 + 1), self._next_op, t)

    def _next_op(self, t: int) -> None:
        if not self.running:
            return
        r = self.world.rng.random()
        if r < self.read_fraction:
            self._replica_info(t)
        elif r < self.read_fraction + self.send_fraction:
            self._send(t)
        else:
            self._poll(t)

    def _complete(self, t: int, inv: dict[str, Any], type_: str, value: Any, *, node: str | None = None,
                  error: str | None = None) -> None:
        self.world.record(type_, inv["process"], inv["f"], value, node=node, error=error)
        self.ops_done += 1
        if type_ == "info":
            self.process[t] += self.threads

    def _split(self, queue: str) -> tuple[str, int]:
        topic, _, qid = queue.rsplit("/", 2)
        return topic, int(qid)

    def _route(self, then: Any) -> None:
        """``then(master node or None)``: the cached master, or the controller's answer."""
        if self.master is not None:
            then(self.master)
            return

        def got(rep: Reply | None) -> None:
            addr = rep.header.get("master_addr") if rep is not None and rep.code == _SUCCESS else None
            self.master = addr if isinstance(addr, str) and addr else None
            then(self.master)

        self.ctl.call(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"broker_name": self.broker_name}, got)

    def _send(self, t: int) -> None:
        rng = self.world.rng
        queue = self.queues[rng.randrange(len(self.queues))]
        self.sent[t] += 1
        value = {"queue": queue, "value": f"w{t}-{self.sent[t]}"}
        inv = self.world.record("invoke", self.process[t], "send", value)
        topic, qid = self._split(queue)

        def routed(master: str | None) -> None:
            if master is None:
                self._complete(t, inv, "fail", value, error="no master: the broker set has none")
                self._think(t)
                return

            def done(rep: Reply | None) -> None:
                if rep is None:
                    self.master = None
                    self._complete(t, inv, "info", value, node=master, error="timeout")
                elif rep.code == _SUCCESS:
                    h = rep.header
                    self._complete(t, inv, "ok", {**value, "offset": h["queue_offset"],
                                                  "master_epoch": h["master_epoch"], "broker_id": h["broker_id"]},
                                   node=master)
                else:
                    name = ResponseCode(rep.code).name
                    if rep.code in (ResponseCode.NOT_MASTER, ResponseCode.BROKER_FENCED):
                        self.master = None
                    self._complete(t, inv, "fail" if is_definite(rep.code) else "info", value, node=master,
                                   error=name)
                self._think(t)

            self.call(master, RequestCode.SEND_MESSAGE, {"topic": topic, "queue_id": qid}, done,
                      timeout_ms=SEND_TIMEOUT_MS, body=[value["value"]])

        self._route(routed)

    def _poll(self, t: int) -> None:
        rng = self.world.rng
        queue = self.queues[rng.randrange(len(self.queues))]
        cursor = self.cursors[t].get(queue, 0)
        value = {"queue": queue, "offset": cursor, "max": 16}
        inv = self.world.record("invoke", self.process[t], "poll", value)
        topic, qid = self._split(queue)

        def routed(master: str | None) -> None:
            if master is None:
                self._complete(t, inv, "fail", value, error="no master")
                self._think(t)
                return

            def done(rep: Reply | None) -> None:
                if rep is None:
                    self.master = None
                    self._complete(t, inv, "fail", value, node=master, error="timeout")
                elif rep.code == _SUCCESS:
                    h = rep.header
                    self.cursors[t][queue] = int(h["next_offset"])
                    self._complete(t, inv, "ok", {**value, "records": rep.body, "next_offset": h["next_offset"],
                                                  "max_offset": h["max_offset"], "broker_id": h["broker_id"]},
                                   node=master)
                else:
                    if rep.code == ResponseCode.BROKER_FENCED:
                        self.master = None
                    self._complete(t, inv, "fail", value, node=master, error=ResponseCode(rep.code).name)
                self._think(t)

            self.call(master, RequestCode.PULL_MESSAGE, {"topic": topic, "queue_id": qid, "queue_offset": cursor,
                                                         "max_count": 16}, done, timeout_ms=POLL_TIMEOUT_MS)

        self._route(routed)

    def _replica_info(self, t: int) -> None:
        observer = f"{self.name}-t{t}"
        value = {"broker_name": self.broker_name, "observer": observer}
        inv = self.world.record("invoke", self.process[t], "replica-info", value)
        target = self.controllers[self.world.rng.randrange(len(self.controllers))]

        def done(rep: Reply | None) -> None:
            if rep is None or rep.code != _SUCCESS:
                why = "timeout" if rep is None else ResponseCode(rep.code).name
                self._complete(t, inv, "fail", value, node=target, error=why)
            else:
                h = rep.header
                self._complete(t, inv, "ok", {
                    "broker_name": self.broker_name, "master_broker_id": h.get("master_id"),
                    "master_epoch": h.get("master_epoch"), "sync_state_set": h.get("sync_state_set"),
                    "sync_state_set_epoch": h.get("sync_state_set_epoch"), "observer": observer}, node=target)
            self._think(t)

        self.call(target, RequestCode.CONTROLLER_GET_REPLICA_INFO, {"broker_name": self.broker_name}, done,
                  timeout_ms=1000)

    # -- the final drain -------------------------------------------------------------------------
    def drain(self, retry_ms: int = 500) -> None:
        """Drain every queue from offset 0 to its end, each retried until one drain completes ok."""
        self.draining = True
        for i, queue in enumerate(self.queues):
            self.timer(i, self._drain_queue, queue, self.threads + i)

    def _drain_queue(self, queue: str, process: int) -> None:
        if not self.draining or queue in self.drained:
            return
        value = {"queue": queue, "offset": 0}
        inv = self.world.record("invoke", process, "drain", value)
        topic, qid = self._split(queue)
        records: list[Any] = []

        def fail(why: str, node: str | None) -> None:
            self.world.record("fail", process, "drain", value, node=node, error=why)
            self.timer(500, self._drain_queue, queue, process)

        def routed(master: str | None) -> None:
            if master is None:
                fail("no master", None)
                return

            def page(offset: int) -> None:
                def done(rep: Reply | None) -> None:
                    if rep is None or rep.code != _SUCCESS:
                        self.master = None
                        fail("timeout" if rep is None else ResponseCode(rep.code).name, master)
                        return
                    records.extend(rep.body)
                    nxt, hi = int(rep.header["next_offset"]), int(rep.header["max_offset"])
                    if nxt >= hi or not rep.body:
                        self.drained.add(queue)
                        self.world.record("ok", process, "drain", {**value, "records": records}, node=master)
                        return
                    page(nxt)

                self.call(master, RequestCode.PULL_MESSAGE, {"topic": topic, "queue_id": qid, "queue_offset": offset,
                                                             "max_count": 1024}, done, timeout_ms=POLL_TIMEOUT_MS)

            page(0)

        del inv
        self._route(routed)
