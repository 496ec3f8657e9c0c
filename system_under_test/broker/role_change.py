"""Carrying out a role change on a running broker: changeToMaster and changeToSlave (reference 2.1, 2.3).

The decision (act only on a higher master epoch) and the ordered steps are pure
(:func:`~.ha.decide_role_change`, :func:`~.ha.change_to_master_steps`,
:func:`~.ha.change_to_slave_steps`); :func:`run_role_steps` executes exactly the steps a core
returns, one handler per step kind (an unknown kind raises), on the broker's store, HA master
service and replication client.  The caller holds the broker's role lock.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import assert_never

from system_under_test import node_events
from system_under_test.broker.broker_state import BrokerState
from system_under_test.broker.ha import RoleError, change_to_master_steps, change_to_slave_steps
from system_under_test.broker.ha.role import (
    AcceptWrites,
    AppendEpochEntry,
    DropSlaveConnections,
    RecomputeConfirmOffset,
    RegisterRouting,
    RoleStep,
    StartHaClient,
    StopAcceptingWrites,
    StopHaClient,
)
from system_under_test.broker.ha_slave import HaSlave
from system_under_test.broker.roles import Role
from system_under_test.clock import CLOCK

log = logging.getLogger("splitbrain.broker")


@dataclass(frozen=True)
class SyncStateSet:
    """The controller's sync-state set a new master starts with (AcceptWrites)."""

    members: frozenset[int] = frozenset()
    set_epoch: int = 0


async def run_role_steps(b: BrokerState, steps: list[RoleStep], why: str, sync_set: SyncStateSet) -> None:
    """Execute ``steps`` in order.  Only StopHaClient awaits; the others run without yielding."""
    for step in steps:
        started = time.monotonic()  # the real clock: a skewed process clock would misreport
        await _run_step(b, step, why, sync_set)
        took = time.monotonic() - started
        if took > SLOW_STEP_S:
            log.info("%s: %s took %.0f ms", why, type(step).__name__, took * 1000)


SLOW_STEP_S = 0.05
"""A role step slower than this is logged: every step but StopHaClient should be instant (a failover waits on
them; bench/failover.py)."""


async def _run_step(b: BrokerState, step: RoleStep, why: str, sync_set: SyncStateSet) -> None:
    store, ha = b.store, b.ha_master
    assert store is not None and ha is not None
    match step:
        case StopHaClient():
            if b.ha_slave is not None:
                await b.ha_slave.stop()
                b.ha_slave = None
        case DropSlaveConnections():
            ha.deactivate(why)
        case StopAcceptingWrites():
            b.role = Role.SLAVE
        case AppendEpochEntry(epoch=epoch, start_offset=start_offset):
            store.epochs.start_epoch(epoch, start_offset)
        case RegisterRouting(broker_id=routing_id):
            b.routing_broker_id = routing_id
        case AcceptWrites(master_epoch=epoch):
            b.role, b.master_epoch = Role.MASTER, epoch
            b.master_id, b.master_addr = b.broker_id, b.cfg.listen
            ha.activate(b.broker_id, epoch, sync_set.members, sync_set.set_epoch)
        case RecomputeConfirmOffset():
            ha.recompute_confirm()
        case StartHaClient(master_id=master_id, master_addr=addr, master_epoch=epoch):
            b.master_epoch, b.master_id, b.master_addr = epoch, master_id, addr
            b.ha_slave = HaSlave(store, b.cfg, b.broker_id, master_id, addr, epoch, CLOCK.monotonic_ms)
            b.ha_slave.start()
        case _:
            assert_never(step)


async def become_master(b: BrokerState, epoch: int, sync_set: SyncStateSet, source: str) -> None:
    """changeToMaster (reference 2.3): the steps of :func:`~.ha.change_to_master_steps`, in order."""
    store = b.store
    assert store is not None
    log.info("becoming MASTER of %s epoch %d (was %s epoch %d, via %s)", b.cfg.broker_name, epoch,
             b.role.value, b.master_epoch, source)
    node_events.record("become-master", master_epoch=epoch, was=b.role.value, via=source)
    for _ in range(2):  # at most: stop the HA client, then the steps computed from the log it left
        try:
            steps = change_to_master_steps(epoch, [(e.epoch, e.start_offset) for e in store.epochs.entries],
                                           store.max_phys_offset, ha_client_running=b.ha_slave is not None)
        except RoleError as exc:
            log.error("cannot become master: %s", exc)
            return
        await run_role_steps(b, steps, "changing to master", sync_set)
        if b.role is Role.MASTER and b.master_epoch == epoch:
            break
    log.info("MASTER of epoch %d: epochs %s max %d confirm %d", epoch, store.epochs.describe(),
             store.max_phys_offset, store.confirm_offset)


async def become_slave(b: BrokerState, master_id: int, master_addr: str, epoch: int, source: str) -> None:
    """changeToSlave: the steps of :func:`~.ha.change_to_slave_steps`, in order."""
    log.info("becoming SLAVE of broker %d at %s, epoch %d (was %s epoch %d, via %s)", master_id, master_addr,
             epoch, b.role.value, b.master_epoch, source)
    node_events.record("become-slave", master_epoch=epoch, master_id=master_id, was=b.role.value, via=source)
    try:
        steps = change_to_slave_steps(master_id, master_addr, epoch, b.broker_id)
    except RoleError as exc:
        log.error("cannot become slave: %s", exc)
        return
    await run_role_steps(b, steps, "changing to slave", SyncStateSet())
