"""Role changes of a broker (pure): when to switch, and the ordered steps of changeToMaster / changeToSlave.

Vocabulary (seed RIP-44, reference 2.1/2.3): the controller names a master per broker set together with
a *master epoch* that grows with every election.  A broker acts on a role notification (push or poll)
only if its master epoch is higher than the one it holds, so stale and duplicate notifications are
ignored.  In routing (the nameserver view) a master registers with broker id 0 and a slave with its own
persistent broker id.

changeToMaster steps (reference 2.3, in order): stop the HA client, drop slave connections, append
``(master epoch, max offset)`` to the epoch file, re-register routing with id 0, accept writes with
the controller's sync-state set, and recompute the confirm offset from that set (it needs the set,
so it follows AcceptWrites; the shell runs both without yielding, so no put sees the old offset).

No truncation: a new master "truncates the commitlog to the boundary of the last message" (seed
RIP-44, *Algorithm Consistency Proof*), and a store's max offset is always such a boundary (its
recovery cuts a torn tail at open; puts and replication append whole records only).  Truncating
further -- to the confirm offset, say -- could drop records the old master acknowledged: they are on
every sync-state set member, and this master-elect is one, but its confirm offset may lag.  Epoch
entries starting beyond the max offset break the store's invariant and raise :class:`RoleError`.

If the epoch file already ends with the new epoch (the broker was master of that epoch before a
restart), the entry is kept as is: re-appending it at the current max offset would misattribute that
epoch's records to the previous epoch (the reference replaces it).

The HA client appends replicated batches off the event loop, so the log is quiet only once it is
stopped: while it runs, :func:`change_to_master_steps` returns just ``[StopHaClient()]`` and the shell
asks again with the log the client left.

A broker whose store lost *durable* records (its recovery found the commit log shorter than what had
been fsynced -- a damaged disk, not a torn tail; ``MessageStore.durable_loss``) must not lead.  The seed's
consistency proof rests on "for each (epoch, offset) only one master is responsible for accepting the
log": a master back in its own epoch with a shorter log would write a second record at an (epoch,
offset) its slaves already hold -- an acknowledged one, under SYNC -- and their handshake would truncate
theirs to its end.  So, until the loss is made good, :func:`decide_role_change` answers
``REFUSE_TO_LEAD`` where it would adopt mastership or ask for an election, and the shell keeps the
broker fenced (its heartbeats carry ``want_fence``, KIP-631), which makes it unelectable: the
controller's scan moves mastership to another electable SyncStateSet member, or clears it when there is
none (the set then refuses writes rather than lose acknowledged ones).  It follows any other master as a
slave, and :func:`may_lead_again` says when its log is refilled.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

MASTER_ROUTING_BROKER_ID = 0


class RoleError(ValueError):
    """A role change that would break the epoch invariants (names the epochs)."""


class RoleDecisionKind(enum.Enum):
    IGNORE = "ignore"  # master epoch not higher than ours: stale or duplicate
    BECOME_MASTER = "become_master"
    BECOME_SLAVE = "become_slave"
    NO_MASTER = "no_master"  # the set has no master: try to get elected (ElectMaster by broker trigger)
    REFUSE_TO_LEAD = "refuse_to_lead"  # we would lead, but our store lost durable records: stay fenced


@dataclass(frozen=True)
class RoleDecision:
    kind: RoleDecisionKind
    master_epoch: int
    master_id: int | None = None
    reason: str = ""


def decide_role_change(
    local_master_epoch: int, new_master_epoch: int, new_master_id: int | None, self_id: int, *,
    lost_durable_records: bool = False,
) -> RoleDecision:
    """What to do with a (master id, master epoch) learned from the controller.

    A set without a master (``new_master_id`` None) always gives NO_MASTER, whatever its epoch: the broker
    asks to be elected (ElectMaster by broker trigger) until a poll shows a master.  A master is adopted
    only with a master epoch higher than the local one (stale and duplicate notifications are ignored).

    ``lost_durable_records`` (the store lost records it had fsynced; module docstring): where the answer
    would be BECOME_MASTER or NO_MASTER it is REFUSE_TO_LEAD -- neither adopt mastership (of any epoch: the
    controller may still name us master of the epoch whose records we lost) nor ask to be elected.
    Following another master is unchanged.
    """
    if lost_durable_records and new_master_id in (None, self_id):
        return RoleDecision(
            RoleDecisionKind.REFUSE_TO_LEAD,
            local_master_epoch,
            None,
            f"the controller {'names us master' if new_master_id is not None else 'has no master'} (master epoch "
            f"{new_master_epoch}) but our store lost durable records: staying fenced until another master refills "
            f"our log",
        )
    if new_master_id is None:
        # Not a role to adopt but a request to elect: the controller's own epoch check settles a stale report.
        return RoleDecision(RoleDecisionKind.NO_MASTER, new_master_epoch)
    if new_master_epoch <= local_master_epoch:
        return RoleDecision(
            RoleDecisionKind.IGNORE,
            local_master_epoch,
            None,
            f"master epoch {new_master_epoch} is not higher than the local master epoch {local_master_epoch}",
        )
    if new_master_id == self_id:
        return RoleDecision(RoleDecisionKind.BECOME_MASTER, new_master_epoch, self_id)
    return RoleDecision(RoleDecisionKind.BECOME_SLAVE, new_master_epoch, new_master_id)


def may_lead_again(master_confirm_offset: int | None, max_offset: int) -> bool:
    """May a broker whose store lost durable records lead again (stop asking to be fenced)?

    Yes once, following another master as a slave, its log has reached the confirm offset that master
    last sent (``master_confirm_offset``; None before the first transfer).  Every acknowledged send lies
    below that offset -- the confirm offset is the least that every SyncStateSet member holds and never
    goes down, and with allAck a send is acknowledged only once every member holds it -- so the log holds
    again every record it could have acknowledged.  Reaching the offset it had made durable would not do
    instead: the new master may end below it (records nobody acknowledged), and waiting for new traffic to
    pass it would keep a complete replica out of elections for nothing.
    """
    return master_confirm_offset is not None and max_offset >= master_confirm_offset


def routing_broker_id(is_master: bool, broker_id: int) -> int:
    """The broker id used in routing: 0 for the master, the persistent id for a slave."""
    return MASTER_ROUTING_BROKER_ID if is_master else broker_id


# ---------------------------------------------------------------------------------------------
# Steps


@dataclass(frozen=True)
class StopHaClient:
    pass


@dataclass(frozen=True)
class DropSlaveConnections:
    pass


@dataclass(frozen=True)
class StopAcceptingWrites:
    pass


@dataclass(frozen=True)
class AppendEpochEntry:
    epoch: int
    start_offset: int


@dataclass(frozen=True)
class RecomputeConfirmOffset:
    pass


@dataclass(frozen=True)
class RegisterRouting:
    broker_id: int


@dataclass(frozen=True)
class AcceptWrites:
    master_epoch: int


@dataclass(frozen=True)
class StartHaClient:
    master_id: int
    master_addr: str
    master_epoch: int


RoleStep = (
    StopHaClient
    | DropSlaveConnections
    | StopAcceptingWrites
    | AppendEpochEntry
    | RecomputeConfirmOffset
    | RegisterRouting
    | AcceptWrites
    | StartHaClient
)


def change_to_master_steps(
    master_epoch: int, local_epochs: Sequence[tuple[int, int]], max_offset: int, *, ha_client_running: bool
) -> list[RoleStep]:
    """The ordered steps to become master of ``master_epoch``.

    Args:
        master_epoch: the epoch the controller elected us in.
        local_epochs: the local epoch entries ``(epoch, start_offset)``, oldest first.
        max_offset: end of the local commit log (the end of its last whole record).
        ha_client_running: the HA client still appends: the answer is ``[StopHaClient()]`` only; call
            again once it stopped, with the log it left.

    Raises:
        RoleError: ``master_epoch`` is older than the last local epoch, or an epoch entry starts beyond
            ``max_offset``.
    """
    last_epoch = local_epochs[-1][0] if local_epochs else None
    if last_epoch is not None and master_epoch < last_epoch:
        raise RoleError(
            f"refusing to become master of epoch {master_epoch}: the local epoch file already has epoch {last_epoch}"
            f" (a stale election result?)"
        )
    beyond = [(e, s) for e, s in local_epochs if s > max_offset]
    if beyond:
        raise RoleError(f"epoch entries {beyond} start beyond the max offset {max_offset}: the store's recovery "
                        f"should have dropped them (a bug in the epoch file or the store)")
    if ha_client_running:  # checked first all the same: a refused change leaves the slave replicating
        return [StopHaClient()]
    keep_entry = last_epoch == master_epoch
    append: list[RoleStep] = [] if keep_entry else [AppendEpochEntry(master_epoch, max_offset)]
    return [DropSlaveConnections(), *append, RegisterRouting(MASTER_ROUTING_BROKER_ID), AcceptWrites(master_epoch),
            RecomputeConfirmOffset()]


def change_to_slave_steps(master_id: int, master_addr: str, master_epoch: int, self_id: int) -> list[RoleStep]:
    """The ordered steps to follow ``master_id`` at ``master_addr`` in ``master_epoch`` (truncation happens in
    the HA handshake)."""
    if master_id == self_id:
        raise RoleError(f"broker {self_id} cannot be a slave of itself")
    return [
        StopAcceptingWrites(),
        DropSlaveConnections(),
        StopHaClient(),
        RegisterRouting(self_id),
        StartHaClient(master_id, master_addr, master_epoch),
    ]
