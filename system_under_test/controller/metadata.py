"""The records controller metadata is made of: broker sets, assigned ids, KIP-631 registrations.

All frozen: ``ControllerState`` (:mod:`.state_machine`) replaces records on apply and hands these
values to readers.  Words: a *broker set* (RIP-44 BrokerReplicaInfo + SyncStateInfo) is the group
of replicas sharing a broker name; each assigned *broker id* has an address and the register code
that claimed it, and, once the broker registered, a *registration* (broker epoch, incarnation,
fenced and in-controlled-shutdown flags).  ``set_to_wire``/``set_from_wire`` are the snapshot form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from system_under_test.controller.records import slot_constructor

FIRST_BROKER_ID = 1


@dataclass(frozen=True, slots=True)
class Registration:
    """KIP-631 registration of one incarnation of a broker id."""

    broker_epoch: int
    incarnation_id: str
    fenced: bool = True
    in_controlled_shutdown: bool = False

    def describe(self) -> str:
        flags = f"{' fenced' if self.fenced else ''}{' shutting-down' if self.in_controlled_shutdown else ''}"
        return f"epoch={self.broker_epoch} inc={self.incarnation_id}{flags}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One assigned broker id of a set."""

    broker_id: int
    broker_addr: str
    register_code: str
    registration: Registration | None = None

    def describe(self) -> str:
        reg = "unregistered" if self.registration is None else self.registration.describe()
        return f"{self.broker_id} {self.broker_addr} {reg}"

    def with_address(self, broker_addr: str) -> BrokerInfo:
        """This record with another address (register code and registration kept)."""
        return _new_broker_info(self.broker_id, broker_addr, self.register_code, self.registration)


@dataclass(frozen=True, slots=True)
class BrokerSet:
    """One broker set (replica group): ids, master and SyncStateSet."""

    cluster_name: str
    broker_name: str
    next_broker_id: int = FIRST_BROKER_ID
    brokers: tuple[BrokerInfo, ...] = ()  # sorted by broker_id
    master_id: int | None = None
    master_epoch: int = 0
    sync_state_set: tuple[int, ...] = ()  # sorted
    sync_state_set_epoch: int = 0

    def broker(self, broker_id: int | None) -> BrokerInfo | None:
        for b in self.brokers:
            if b.broker_id == broker_id:
                return b
        return None

    def broker_ids(self) -> tuple[int, ...]:
        return tuple(b.broker_id for b in self.brokers)

    def address(self, broker_id: int | None) -> str | None:
        b = self.broker(broker_id)
        return b.broker_addr if b is not None else None

    def master_addr(self) -> str | None:
        return self.address(self.master_id)

    def is_first_election(self) -> bool:
        """No master and no SyncStateSet yet: nobody holds data the controller must protect."""
        return self.master_id is None and not self.sync_state_set

    def with_address(self, broker_id: int, broker_addr: str) -> BrokerSet | None:
        """This set with a new address for ``broker_id`` (None if the id is not assigned): one scan
        of the brokers, as this runs on every node for every address update."""
        brokers = self.brokers
        for pos, b in enumerate(brokers):
            if b.broker_id == broker_id:
                brokers = (*brokers[:pos], b.with_address(broker_addr), *brokers[pos + 1:])
                return _new_broker_set(self.cluster_name, self.broker_name, self.next_broker_id, brokers,
                                       self.master_id, self.master_epoch, self.sync_state_set,
                                       self.sync_state_set_epoch)
        return None

    def with_broker(self, info: BrokerInfo) -> BrokerSet:
        """This set with ``info`` added or replacing the record of its id (built field by field:
        ``dataclasses.replace`` was a visible share of every applied address update)."""
        brokers = self.brokers
        for pos, b in enumerate(brokers):
            if b.broker_id == info.broker_id:
                brokers = (*brokers[:pos], info, *brokers[pos + 1:])
                break
        else:
            brokers = tuple(sorted([*brokers, info], key=lambda b: b.broker_id))
        return _new_broker_set(self.cluster_name, self.broker_name, self.next_broker_id, brokers, self.master_id,
                               self.master_epoch, self.sync_state_set, self.sync_state_set_epoch)


_new_broker_info = slot_constructor(BrokerInfo)
_new_broker_set = slot_constructor(BrokerSet)


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What survives a whole-set CleanBrokerData so ids and epochs never go backwards."""

    next_broker_id: int
    master_epoch: int
    sync_state_set_epoch: int


def set_to_wire(bs: BrokerSet) -> list[Any]:
    brokers = []
    for b in bs.brokers:
        r = b.registration
        reg = None if r is None else [r.broker_epoch, r.incarnation_id, r.fenced, r.in_controlled_shutdown]
        brokers.append([b.broker_id, b.broker_addr, b.register_code, reg])
    return [bs.cluster_name, bs.broker_name, bs.next_broker_id, brokers, bs.master_id, bs.master_epoch,
            list(bs.sync_state_set), bs.sync_state_set_epoch]


def set_from_wire(w: list[Any]) -> BrokerSet:
    cluster, name, next_id, brokers, master_id, master_epoch, sss, set_epoch = w
    infos = tuple(
        BrokerInfo(i, addr, code, None if reg is None else Registration(reg[0], reg[1], reg[2], reg[3]))
        for i, addr, code, reg in brokers
    )
    return BrokerSet(cluster, name, next_id, infos, master_id, master_epoch, tuple(sss), set_epoch)


def describe_broker_set(bs: BrokerSet) -> str:
    """One line per set, then one per broker (canonical text form used by logs and golden tests)."""
    lines = [
        f"{bs.broker_name} (cluster {bs.cluster_name}): master={bs.master_id} master_epoch={bs.master_epoch} "
        f"set={list(bs.sync_state_set)} set_epoch={bs.sync_state_set_epoch} next_id={bs.next_broker_id}"
    ]
    lines.extend(f"  {b.describe()}" for b in bs.brokers)
    return "\n".join(lines)
