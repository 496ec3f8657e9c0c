"""The controller-metadata model: the sequential specification behind the ``controller-register`` workload.

What it models.  For one broker set the controller keeps four numbers that clients can observe with
GetReplicaInfo: the master's broker id, the *master epoch*, the *sync-state set* (SyncStateSet) and the
*sync-state-set epoch*.  A model state is the tuple ``(master_id, master_epoch, sync_state_set, set_epoch)``
with the set as a sorted tuple of broker ids.  Broker sets are independent, so the model partitions the
history per broker set (``value["broker_set"]``) and the linearizability checker searches each one alone.

Ops (``f``: invoke value -> ok completion value):

* ``read``  ``{"broker_set": B, "via": node|None}`` -> the invoke value plus ``master_id``, ``master_epoch``,
  ``sync_state_set``, ``sync_state_set_epoch`` as GetReplicaInfo returned them.  Legal iff equal to the state.
* ``elect`` ``{"broker_set": B, "broker_id": X}`` (admin ElectMaster designating X) -> ignored output.
  Legal iff X is not already master and X is in the sync-state set (or, with unclean election allowed, any
  replica id ``1..replicas``).  Effect (seed: RIP-44): master X, master epoch + 1, set ``(X,)``, set epoch + 1.
* ``alter`` ``{"broker_set": B, "sync_state_set": S}`` plus, for a *pinned* alter, ``master_id``,
  ``master_epoch`` and ``sync_state_set_epoch`` (the client sends exactly those, possibly stale on purpose).
  An unpinned (*fresh*) alter reads the current master and epochs inside the op and sends ``S + {master}``;
  its ok value carries what it sent under ``"sent"``.  Legal iff the sent master id and both epochs equal the
  state's, the master is in the new set and the new set differs from the current one (a correct controller
  refuses anything else: CONTROLLER_FENCED_MASTER_EPOCH / ..._SYNC_STATE_SET_EPOCH / INVALID_MASTER).
  Effect: the new set, set epoch + 1.  An ok reply's ``new_sync_state_set_epoch`` must be the state's + 1.

Indeterminate ops (``info``) are linearized with output ``UNKNOWN`` or left out: an unknown alter takes the
arguments it would have sent against the state it is linearized in (fresh) or its pinned ones.  Definite
failures are dropped (``fail_policy = "drop"``): the op had no effect.

Rules of the file: pure (no I/O, no clock, no randomness); states are small hashable tuples.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from checker.models import UNKNOWN, Inconsistent, Model, ModelError, OpInput
from system_under_test.client.register_requests import INITIAL_STATE, META_KEYS, MetaState

__all__ = ["INITIAL_STATE", "ControllerMetadata", "MetaState", "describe_meta", "meta_from_reply"]

# MetaState, INITIAL_STATE (the state the workload's setup establishes) and the fields live with the workload's
# requests (system_under_test/client/register_requests.py), which the real and the simulated clients share.
_FIELDS = META_KEYS


def describe_meta(state: MetaState) -> str:
    master, epoch, sss, set_epoch = state
    return f"master={master} master_epoch={epoch} sync_state_set={list(sss)} set_epoch={set_epoch}"


def meta_from_reply(value: Mapping[str, Any]) -> MetaState:
    """The model state a GetReplicaInfo-shaped mapping describes.

    Raises:
        ModelError: a field is missing or has the wrong type (names the field and the value).
    """
    missing = [f for f in _FIELDS if f not in value]
    if missing:
        raise ModelError(f"controller-metadata: reply {dict(value)!r} lacks field(s) {missing}; expected {_FIELDS}")
    master = value["master_id"]
    if master is not None and type(master) is not int:
        raise ModelError(f"controller-metadata: master_id must be an int or None, got {master!r}")
    sss = value["sync_state_set"]
    if not isinstance(sss, list | tuple) or not all(type(i) is int for i in sss):
        raise ModelError(f"controller-metadata: sync_state_set must be a list of ints, got {sss!r}")
    return (master, int(value["master_epoch"]), tuple(sorted(set(sss))), int(value["sync_state_set_epoch"]))


class ControllerMetadata(Model):
    """Linearizability model of one broker set's controller metadata (see the module docstring).

    Args:
        initial: the state before the first op (default :data:`INITIAL_STATE`).
        replicas: replica ids are ``1..replicas`` (the candidates of an unclean election).
        unclean: ``enable_elect_unclean_master`` -- an admin election may pick a replica outside the set.
    """

    name = "controller-metadata"
    fail_policy = "drop"

    def __init__(self, *, initial: MetaState = INITIAL_STATE, replicas: int = 3, unclean: bool = False) -> None:
        if replicas < 1:
            raise ModelError(f"controller-metadata: replicas must be >= 1, got {replicas}")
        self.initial: MetaState = (initial[0], initial[1], tuple(sorted(initial[2])), initial[3])
        self.replicas = replicas
        self.unclean = unclean

    def init(self) -> Hashable:
        return self.initial

    def partition_key(self, op: OpInput) -> Hashable | None:
        value = op.value
        return value.get("broker_set") if isinstance(value, Mapping) else None

    def read_only(self, op: OpInput, output: Any) -> bool:
        return op.f == "read"

    def describe_state(self, state: Any) -> str:
        return describe_meta(state)

    def describe(self) -> str:
        return (f"{self.name}(init={describe_meta(self.initial)}, replicas={self.replicas}, "
                f"unclean={self.unclean}, fail={self.fail_policy})")

    # -- the step function -------------------------------------------------------------------------

    def step(self, state: Any, op: OpInput, output: Any) -> Any:
        if not isinstance(op.value, Mapping):
            raise ModelError(f"controller-metadata: op {op.f!r} needs a mapping value, got {op.value!r}")
        if op.f == "read":
            return self._read(state, output)
        if op.f == "elect":
            return self._elect(state, op.value)
        if op.f == "alter":
            return self._alter(state, op.value, output)
        raise ModelError(f"controller-metadata: unknown op {op.f!r}; expected read, elect or alter")

    def _read(self, state: MetaState, output: Any) -> Any:
        if output is UNKNOWN or not isinstance(output, Mapping):
            return state
        seen = meta_from_reply(output)
        if seen != state:
            return Inconsistent(f"read {describe_meta(seen)} but the metadata is {describe_meta(state)}")
        return state

    def _elect(self, state: MetaState, value: Mapping[str, Any]) -> Any:
        master, epoch, sss, set_epoch = state
        target = value.get("broker_id")
        if type(target) is not int:
            raise ModelError(f"controller-metadata: elect needs an int broker_id, got {target!r}")
        if target == master:
            return Inconsistent(f"elect {target} succeeded but {target} is already master ({describe_meta(state)})")
        eligible = target in sss or (self.unclean and 1 <= target <= self.replicas)
        if not eligible:
            return Inconsistent(f"elect {target} succeeded but {target} is not in the sync-state set {list(sss)}"
                                + ("" if self.unclean else " (unclean election is off)"))
        return (target, epoch + 1, (target,), set_epoch + 1)

    def _alter(self, state: MetaState, value: Mapping[str, Any], output: Any) -> Any:
        master, epoch, sss, set_epoch = state
        wanted = value.get("sync_state_set")
        if not isinstance(wanted, list | tuple) or not all(type(i) is int for i in wanted):
            raise ModelError(f"controller-metadata: alter needs sync_state_set as a list of ints, got {wanted!r}")
        if "master_epoch" in value:  # pinned: exactly these were sent
            sent = (value.get("master_id"), value["master_epoch"], tuple(sorted(set(wanted))),
                    value.get("sync_state_set_epoch"))
        elif isinstance(output, Mapping) and isinstance(output.get("sent"), Mapping):
            sent = meta_from_reply(output["sent"])
        elif output is UNKNOWN:  # fresh and unknown: it read the state it is linearized in
            sent = (master, epoch, tuple(sorted(set(wanted) | ({master} if master is not None else set()))),
                    set_epoch)
        else:
            raise ModelError(f"controller-metadata: ok fresh alter must report what it sent under 'sent', got "
                             f"{output!r}")
        s_master, s_epoch, new, s_set_epoch = sent
        if master is None or s_master != master:
            return Inconsistent(f"alter by master {s_master} succeeded but the master is {master}")
        if s_epoch != epoch:
            return Inconsistent(f"alter with master epoch {s_epoch} succeeded but the master epoch is {epoch} "
                                f"(a stale master must be fenced)")
        if s_set_epoch != set_epoch:
            return Inconsistent(f"alter with set epoch {s_set_epoch} succeeded but the set epoch is {set_epoch} "
                                f"(a stale sync-state set must be fenced)")
        if master not in new:
            return Inconsistent(f"alter to {list(new)} succeeded without the master {master}")
        if new == sss:
            return Inconsistent(f"alter to the unchanged set {list(new)} succeeded")
        if isinstance(output, Mapping):
            reported = output.get("new_sync_state_set_epoch")
            if reported is not None and reported != set_epoch + 1:
                return Inconsistent(f"alter reported new set epoch {reported}, expected {set_epoch + 1}")
        return (master, epoch, new, set_epoch + 1)
