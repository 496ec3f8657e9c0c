"""A controller that still believes it leads must not vouch for a broker's heartbeat.

Found by the mutation bench's control run (2026-11-28, the unmutated cluster, guided seed 1001): the controller
leader c1 was isolated right after its clock had been reset by 5 s, kept believing it led for seconds, and
answered a zombie incarnation's heartbeat (broker epoch 174, while the majority had registered the broker again
at 293) with SUCCESS -- the `membership` checker's `stale-epoch-accepted`.  A heartbeat answered from the
leader's memory is only as fresh as that memory; a deposed leader that does not know it yet answers from an old
state, and a SUCCESS renews the sender's lease.  The leader now decides heartbeats (and controlled-shutdown
requests) after a read barrier, as it decides reads.

The scenario runs on the simulator's production controllers (``sim/controller.py`` routes every request
through ``controller/routing.py``): three controllers, one broker that registers; the leader is cut off from
everyone and its clock slowed to a crawl so that it keeps believing it leads; the broker restarts and registers
again through the new leader; a heartbeat with the first incarnation's epoch then goes to the old leader.
"""

from __future__ import annotations

from typing import Any

from system_under_test.client.workload_requests import stale_heartbeat_call
from system_under_test.controller.config import ControllerConfig
from system_under_test.protocol.codes import ResponseCode
from system_under_test.sim.broker import BrokerOptions, SimBroker
from system_under_test.sim.controller import ControllerTiming, SimController
from system_under_test.sim.network import Network, Reply, SimNode
from system_under_test.sim.world import World

CONTROLLERS = ("c1", "c2", "c3")


class Probe(SimNode):
    """A client that sends one request and keeps the reply."""

    def __init__(self, world: World, net: Network) -> None:
        super().__init__("probe", world, net)
        self.replies: list[Reply | None] = []

    def on_start(self) -> None:
        pass

    def on_crash(self) -> None:
        pass

    def on_message(self, src: str, msg: Any) -> None:
        pass


def _leaders(controllers: dict[str, SimController]) -> list[str]:
    return [n for n, c in controllers.items() if c.up and c.is_leader]


def test_an_isolated_leader_does_not_accept_a_heartbeat_it_cannot_vouch_for() -> None:
    world = World(7)
    net = Network(world)
    ccfg = ControllerConfig(cluster_name="splitbrain", lease_timeout_ms=2000, scan_interval_ms=500)
    controllers = {n: SimController(n, world, net, CONTROLLERS, ccfg, ControllerTiming(), frozenset())
                   for n in CONTROLLERS}
    broker = SimBroker("b1", world, net, CONTROLLERS, BrokerOptions(broker_name="zombie-0"))
    probe = Probe(world, net)
    for node in (*controllers.values(), broker):
        net.add(node)
    net.add(probe, cluster=False)
    for c in controllers.values():
        c.start()
    broker.start()
    probe.start()
    world.run_until(5_000)
    (old,) = _leaders(controllers)
    first_id, first_epoch = broker.broker_id, broker.broker_epoch
    assert first_id > 0 and first_epoch >= 0, "the broker registered"

    # cut the leader off from every cluster node and slow its clock to a crawl: it keeps believing it leads
    for other in (*CONTROLLERS, "b1"):
        if other != old:
            net.cuts.add(frozenset((old, other)))
    controllers[old].set_clock_rate(0.01)
    broker.crash()
    world.run_until(world.now_ms + 200)
    broker.start()
    world.run_until(world.now_ms + 6_000)
    assert controllers[old].is_leader, "the isolated leader still believes it leads (the scenario's premise)"
    new = [n for n in _leaders(controllers) if n != old]
    assert new, "the majority elected a new leader"
    assert broker.broker_id == first_id and broker.broker_epoch > first_epoch, "the broker registered again"

    code, header = stale_heartbeat_call("splitbrain", "zombie-0", first_id, "10.0.0.1:1", first_epoch, 2000)
    probe.call(old, int(code), header, probe.replies.append, timeout_ms=5_000)
    world.run_until(world.now_ms + 6_000)
    (reply,) = probe.replies
    assert reply is None or reply.code != int(ResponseCode.SUCCESS), (
        f"{old}, cut off and deposed, accepted a heartbeat of broker epoch {first_epoch} "
        f"(the broker re-registered at {broker.broker_epoch})")
