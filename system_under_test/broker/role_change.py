"""Carrying out a role change on a running broker: changeToMaster and changeToSlave (reference 2.1, 2.3).

The decision (act only on a higher master epoch) and the ordered steps are pure
(:func:`~.ha.decide_role_change`, :func:`~.ha.change_to_master_steps`); these two functions perform
them on the :class:`~.lifecycle.Broker`'s store, HA master service and replication client.  The
caller holds the broker's role lock.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from system_under_test import node_events
from system_under_test.broker.ha import RoleError, change_to_master_steps, routing_broker_id
from system_under_test.broker.ha.role import AcceptWrites, AppendEpochEntry, TruncateEpochsFrom, TruncateInvalidTail
from system_under_test.broker.ha_slave import HaSlave
from system_under_test.broker.roles import Role
from system_under_test.clock import CLOCK

if TYPE_CHECKING:
    from system_under_test.broker.lifecycle import Broker

log = logging.getLogger("splitbrain.broker")


async def become_master(b: Broker, epoch: int, members: frozenset[int], set_epoch: int, source: str) -> None:
    """changeToMaster (reference 2.3): the steps of :func:`~.ha.change_to_master_steps`, in order."""
    store, ha = b.store, b.ha_master
    assert store is not None and ha is not None
    log.info("becoming MASTER of %s epoch %d (was %s epoch %d, via %s)", b.cfg.broker_name, epoch,
             b.role.value, b.master_epoch, source)
    node_events.record("become-master", master_epoch=epoch, was=b.role.value, via=source)
    for attempt in ("check", "final"):
        entries = [(e.epoch, e.start_offset) for e in store.epochs.entries]
        mx = store.max_phys_offset
        try:
            steps = change_to_master_steps(epoch, entries, mx, mx, last_role_was_master=b.role is Role.MASTER)
        except RoleError as exc:
            log.error("cannot become master: %s", exc)
            return
        if attempt == "check" and b.ha_slave is not None:
            # stop replicating first: a batch still being appended (off the event loop) would land
            # after the new epoch's start offset; then compute the steps again from the final log
            await b.ha_slave.stop()
            b.ha_slave = None
            continue
        break
    ha.deactivate("changing to master")
    for step in steps:
        if isinstance(step, TruncateInvalidTail):
            store.truncate(step.valid_end_offset)
        elif isinstance(step, TruncateEpochsFrom):
            drop = [e for e in store.epochs.entries if e.epoch >= step.epoch]
            if drop:
                store.epochs.truncate_suffix_by_offset(drop[0].start_offset)
        elif isinstance(step, AppendEpochEntry):
            store.epochs.start_epoch(step.epoch, step.start_offset)
        elif isinstance(step, AcceptWrites):
            b.role = Role.MASTER
            b.master_epoch = step.master_epoch
            b.master_id, b.master_addr = b.broker_id, b.cfg.listen
            b.routing_broker_id = routing_broker_id(True, b.broker_id)
            ha.activate(b.broker_id, step.master_epoch, members, set_epoch)
    log.info("MASTER of epoch %d: epochs %s max %d confirm %d", epoch, store.epochs.describe(),
             store.max_phys_offset, store.confirm_offset)


async def become_slave(b: Broker, master_id: int, master_addr: str, epoch: int, source: str) -> None:
    """changeToSlave: stop taking writes, drop slave connections, follow ``master_addr``."""
    store, ha = b.store, b.ha_master
    assert store is not None and ha is not None
    log.info("becoming SLAVE of broker %d at %s, epoch %d (was %s epoch %d, via %s)", master_id, master_addr,
             epoch, b.role.value, b.master_epoch, source)
    node_events.record("become-slave", master_epoch=epoch, master_id=master_id, was=b.role.value, via=source)
    b.role = Role.SLAVE  # stop accepting writes first
    ha.deactivate("changing to slave")
    if b.ha_slave is not None:
        await b.ha_slave.stop()
    b.master_epoch, b.master_id, b.master_addr = epoch, master_id, master_addr
    b.routing_broker_id = routing_broker_id(False, b.broker_id)
    b.ha_slave = HaSlave(store, b.cfg, b.broker_id, master_id, master_addr, epoch, CLOCK.monotonic_ms)
    b.ha_slave.start()
