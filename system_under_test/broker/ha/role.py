"""Role changes of a broker (pure): when to switch, and the ordered steps of changeToMaster / changeToSlave.

Vocabulary (seed RIP-44, reference 2.1/2.3): the controller names a master per broker set together with
a *master epoch* that grows with every election.  A broker acts on a role notification (push or poll)
only if its master epoch is higher than the one it holds, so stale and duplicate notifications are
ignored.  In routing (the nameserver view) a master registers with broker id 0 and a slave with its own
persistent broker id.

changeToMaster steps (reference 2.3, in order): stop the HA client and drop slave connections, truncate
the invalid tail of the commit log, drop epoch entries of epochs >= the new one that this store does not
own, append ``(master epoch, max offset)`` to the epoch file, recompute the confirm offset, re-register
routing with id 0, then accept writes.  If the epoch file already ends with the new epoch (the broker
was master of that epoch before a restart), the entry is kept as is: re-appending it at the current max
offset would misattribute that epoch's records to the previous epoch (the reference replaces it).
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


@dataclass(frozen=True)
class RoleDecision:
    kind: RoleDecisionKind
    master_epoch: int
    master_id: int | None = None
    reason: str = ""


def decide_role_change(
    local_master_epoch: int, new_master_epoch: int, new_master_id: int | None, self_id: int
) -> RoleDecision:
    """What to do with a (master id, master epoch) learned from the controller."""
    if new_master_epoch <= local_master_epoch:
        return RoleDecision(
            RoleDecisionKind.IGNORE,
            local_master_epoch,
            None,
            f"master epoch {new_master_epoch} is not higher than the local master epoch {local_master_epoch}",
        )
    if new_master_id is None:
        return RoleDecision(RoleDecisionKind.NO_MASTER, new_master_epoch)
    if new_master_id == self_id:
        return RoleDecision(RoleDecisionKind.BECOME_MASTER, new_master_epoch, self_id)
    return RoleDecision(RoleDecisionKind.BECOME_SLAVE, new_master_epoch, new_master_id)


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
class TruncateInvalidTail:
    valid_end_offset: int


@dataclass(frozen=True)
class TruncateEpochsFrom:
    """Remove epoch entries with epoch >= ``epoch``."""

    epoch: int


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


RoleStep = (
    StopHaClient
    | DropSlaveConnections
    | StopAcceptingWrites
    | TruncateInvalidTail
    | TruncateEpochsFrom
    | AppendEpochEntry
    | RecomputeConfirmOffset
    | RegisterRouting
    | AcceptWrites
    | StartHaClient
)


def change_to_master_steps(
    master_epoch: int,
    local_epochs: Sequence[tuple[int, int]],
    max_offset: int,
    valid_end_offset: int,
    *,
    last_role_was_master: bool = False,
) -> list[RoleStep]:
    """The ordered steps to become master of ``master_epoch``.

    Args:
        master_epoch: the epoch the controller elected us in.
        local_epochs: the local epoch entries ``(epoch, start_offset)``, oldest first.
        max_offset: end of the local commit log.
        valid_end_offset: end of the last complete record (<= max_offset).
        last_role_was_master: we were already master (of an older epoch): only a new epoch entry is needed.

    Raises:
        RoleError: ``master_epoch`` is older than the last local epoch, or the offsets are inconsistent.
    """
    if not 0 <= valid_end_offset <= max_offset:
        raise RoleError(f"need 0 <= valid_end_offset <= max_offset, got {valid_end_offset} and {max_offset}")
    last_epoch = local_epochs[-1][0] if local_epochs else None
    if last_epoch is not None and master_epoch < last_epoch:
        raise RoleError(
            f"refusing to become master of epoch {master_epoch}: the local epoch file already has epoch {last_epoch}"
            f" (a stale election result?)"
        )
    # Entries starting beyond the valid end describe bytes that are about to be cut off.
    beyond_end = [e for e, s in local_epochs if s > valid_end_offset]
    remaining = [e for e, s in local_epochs if s <= valid_end_offset]
    keep_entry = bool(remaining) and remaining[-1] == master_epoch
    append: list[RoleStep] = [] if keep_entry else [AppendEpochEntry(master_epoch, valid_end_offset)]
    if last_role_was_master:
        return [*append, RegisterRouting(MASTER_ROUTING_BROKER_ID), AcceptWrites(master_epoch)]
    steps: list[RoleStep] = [StopHaClient(), DropSlaveConnections()]
    if valid_end_offset < max_offset:
        steps.append(TruncateInvalidTail(valid_end_offset))
    if beyond_end:
        steps.append(TruncateEpochsFrom(min(beyond_end)))
    steps += [*append, RecomputeConfirmOffset(), RegisterRouting(MASTER_ROUTING_BROKER_ID), AcceptWrites(master_epoch)]
    return steps


def change_to_slave_steps(master_id: int, master_addr: str, self_id: int) -> list[RoleStep]:
    """The ordered steps to follow ``master_id`` at ``master_addr`` (truncation happens in the HA handshake)."""
    if master_id == self_id:
        raise RoleError(f"broker {self_id} cannot be a slave of itself")
    return [
        StopAcceptingWrites(),
        DropSlaveConnections(),
        RegisterRouting(self_id),
        StartHaClient(master_id, master_addr),
    ]
