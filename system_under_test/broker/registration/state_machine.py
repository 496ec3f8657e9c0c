"""Broker registration as a pure state machine: how a broker gets and keeps a persistent broker id.

Vocabulary (seed "Persistent unique BrokerId"): the broker asks the controller for the *next
broker id* (GetNextBrokerId), writes a *temp meta* file holding that id and a *register code*
(CreateTempMetaFile), claims the id with ApplyBrokerId (a CAS on the controller, idempotent for
the same register code), turns the temp meta into the *meta* file (CreateMetaFileFromTemp), and
finally sends RegisterBroker with its current address.

Theory of operation.  The machine has a *phase* (the seed's "registration status rotation")::

    INITIAL --temp_written--> CREATE_TEMP_META_DONE --meta_written--> CREATE_META_DONE --register_ok--> REGISTERED
       ^                              |  (after apply_ok)
       +--------apply_rejected--------+
    INITIAL --names_mismatch--> REFUSED   (terminal)

plus a little data (the pending id and register code, whether the controller accepted the claim,
whether a stale temp file must be deleted).  Rules of this file:

1. All transition logic lives in :data:`TRANSITIONS`, keyed by (phase, event kind).  A pair not in
   the table raises :class:`IllegalTransition` naming the phase and the event; the state object is
   immutable, so the caller's state is unchanged.
2. The machine never does I/O.  :func:`next_action` tells the shell what to do next; the shell does
   it and feeds the outcome back as an event through :func:`apply_event`.
3. Restart resume follows the seed's fault-tolerance section exactly (:func:`restart_event`): meta
   present -> RegisterBroker directly; only temp present -> retry ApplyBrokerId with the same id and
   code; ApplyBrokerId rejected -> delete temp and start again at GetNextBrokerId; names in the
   files differ from the config -> REFUSED (never silently re-register under another name).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Protocol

from system_under_test.broker.registration.errors import IllegalTransition
from system_under_test.broker.registration.meta_record import MetaRecord, TempMetaRecord


class Phase(enum.Enum):
    """Registration phase (the seed's RegisterState, plus the terminal REFUSED)."""

    INITIAL = "INITIAL"
    CREATE_TEMP_META_DONE = "CREATE_TEMP_META_DONE"
    CREATE_META_DONE = "CREATE_META_DONE"
    REGISTERED = "REGISTERED"
    REFUSED = "REFUSED"


class EventKind(enum.Enum):
    """What the shell observed."""

    GOT_NEXT_ID = "got_next_id"
    TEMP_WRITTEN = "temp_written"
    APPLY_OK = "apply_ok"
    APPLY_REJECTED = "apply_rejected"
    META_WRITTEN = "meta_written"
    TEMP_DELETED = "temp_deleted"
    REGISTER_OK = "register_ok"
    REGISTER_FAILED = "register_failed"
    RESTART_FOUND_TEMP = "restart_found_temp"
    RESTART_FOUND_META = "restart_found_meta"
    NAMES_MISMATCH = "names_mismatch"


P, E = Phase, EventKind

TRANSITIONS: dict[tuple[Phase, EventKind], Phase] = {
    # First start: GetNextBrokerId, then the temp meta file.
    (P.INITIAL, E.GOT_NEXT_ID): P.INITIAL,
    (P.INITIAL, E.TEMP_WRITTEN): P.CREATE_TEMP_META_DONE,
    # After a rejected claim the stale temp file is deleted before asking for a new id.
    (P.INITIAL, E.TEMP_DELETED): P.INITIAL,
    # Restart: what the store dir holds decides where to resume.
    (P.INITIAL, E.RESTART_FOUND_TEMP): P.CREATE_TEMP_META_DONE,
    (P.INITIAL, E.RESTART_FOUND_META): P.CREATE_META_DONE,
    (P.INITIAL, E.NAMES_MISMATCH): P.REFUSED,
    # The claim.
    (P.CREATE_TEMP_META_DONE, E.APPLY_OK): P.CREATE_TEMP_META_DONE,
    (P.CREATE_TEMP_META_DONE, E.APPLY_REJECTED): P.INITIAL,
    (P.CREATE_TEMP_META_DONE, E.META_WRITTEN): P.CREATE_META_DONE,
    # Registration with the current address; a stale temp beside the meta is removed first.
    (P.CREATE_META_DONE, E.TEMP_DELETED): P.CREATE_META_DONE,
    (P.CREATE_META_DONE, E.REGISTER_FAILED): P.CREATE_META_DONE,
    (P.CREATE_META_DONE, E.REGISTER_OK): P.REGISTERED,
}


# ---------------------------------------------------------------------------------------------
# Events


@dataclass(frozen=True)
class GotNextId:
    """GetNextBrokerId answered ``broker_id``; the shell generated ``register_code`` for the claim."""

    broker_id: int
    register_code: str
    kind = EventKind.GOT_NEXT_ID


@dataclass(frozen=True)
class TempWritten:
    """The temp meta file with (broker_id, register_code) is durable."""

    broker_id: int
    register_code: str
    kind = EventKind.TEMP_WRITTEN


@dataclass(frozen=True)
class ApplyOk:
    """ApplyBrokerId succeeded: the controller recorded our id and register code."""

    kind = EventKind.APPLY_OK


@dataclass(frozen=True)
class ApplyRejected:
    """ApplyBrokerId answered CONTROLLER_BROKER_ID_INVALID: the id belongs to another register code."""

    kind = EventKind.APPLY_REJECTED


@dataclass(frozen=True)
class MetaWritten:
    """The meta file is durable (promoted from the temp content)."""

    kind = EventKind.META_WRITTEN


@dataclass(frozen=True)
class TempDeleted:
    """The temp meta file is gone (and the directory fsynced)."""

    kind = EventKind.TEMP_DELETED


@dataclass(frozen=True)
class RegisterOk:
    """RegisterBroker succeeded."""

    kind = EventKind.REGISTER_OK


@dataclass(frozen=True)
class RegisterFailed:
    """RegisterBroker failed in a way worth retrying (the meta file stays)."""

    reason: str = ""
    kind = EventKind.REGISTER_FAILED


@dataclass(frozen=True)
class RestartFoundTemp:
    """At start only a temp meta file was found (its names match the config)."""

    record: TempMetaRecord
    kind = EventKind.RESTART_FOUND_TEMP


@dataclass(frozen=True)
class RestartFoundMeta:
    """At start a meta file was found (names match); ``temp_present`` if a stale temp is beside it."""

    record: MetaRecord
    temp_present: bool = False
    kind = EventKind.RESTART_FOUND_META


@dataclass(frozen=True)
class NamesMismatch:
    """A file in the store dir names another cluster or broker set than the config."""

    detail: str
    kind = EventKind.NAMES_MISMATCH


Event = (
    GotNextId
    | TempWritten
    | ApplyOk
    | ApplyRejected
    | MetaWritten
    | TempDeleted
    | RegisterOk
    | RegisterFailed
    | RestartFoundTemp
    | RestartFoundMeta
    | NamesMismatch
)


# ---------------------------------------------------------------------------------------------
# State


@dataclass(frozen=True)
class RegistrationState:
    """Where registration stands.

    Attributes:
        phase: the table state.
        broker_id: the id being claimed or held (None before GetNextBrokerId answered).
        register_code: the code of the current claim (None once only the meta file matters).
        id_applied: the controller accepted the claim (CREATE_TEMP_META_DONE only).
        temp_stale: a temp file is on disk that must be deleted before going on.
        refused_reason: why the machine is REFUSED.
    """

    phase: Phase = Phase.INITIAL
    broker_id: int | None = None
    register_code: str | None = None
    id_applied: bool = False
    temp_stale: bool = False
    refused_reason: str = ""

    def describe(self) -> str:
        bits = [self.phase.value]
        if self.broker_id is not None:
            bits.append(f"id={self.broker_id}")
        if self.register_code is not None:
            bits.append(f"code={self.register_code}")
        if self.id_applied:
            bits.append("applied")
        if self.temp_stale:
            bits.append("temp-stale")
        if self.refused_reason:
            bits.append(f"refused: {self.refused_reason}")
        return " ".join(bits)


INITIAL_STATE = RegistrationState()


def apply_event(state: RegistrationState, event: Event) -> RegistrationState:
    """The state after ``event``.

    Raises:
        IllegalTransition: (state.phase, event.kind) is not in :data:`TRANSITIONS`, or the event's data
            contradicts the state (e.g. a temp written for another id).  ``state`` is not modified.
    """
    key = (state.phase, event.kind)
    if key not in TRANSITIONS:
        raise IllegalTransition(state.phase.value, event.kind.value)
    target = TRANSITIONS[key]

    def illegal(detail: str) -> IllegalTransition:
        return IllegalTransition(state.phase.value, event.kind.value, detail)

    if isinstance(event, GotNextId):
        if state.temp_stale:
            raise illegal("a stale temp file must be deleted before asking for a new id")
        return replace(state, phase=target, broker_id=event.broker_id, register_code=event.register_code)
    if isinstance(event, TempWritten):
        if (event.broker_id, event.register_code) != (state.broker_id, state.register_code):
            raise illegal(
                f"temp written for id {event.broker_id} code {event.register_code}, but the pending claim is "
                f"id {state.broker_id} code {state.register_code}"
            )
        return replace(state, phase=target)
    if isinstance(event, TempDeleted):
        if not state.temp_stale:
            raise illegal("no stale temp file was pending deletion")
        return replace(state, phase=target, temp_stale=False)
    if isinstance(event, RestartFoundTemp):
        rec = event.record
        return replace(
            INITIAL_STATE, phase=target, broker_id=rec.broker_id, register_code=rec.register_code
        )
    if isinstance(event, RestartFoundMeta):
        return replace(INITIAL_STATE, phase=target, broker_id=event.record.broker_id, temp_stale=event.temp_present)
    if isinstance(event, NamesMismatch):
        return replace(INITIAL_STATE, phase=target, refused_reason=event.detail)
    if isinstance(event, ApplyOk):
        if state.id_applied:
            raise illegal("the claim was already accepted")
        return replace(state, phase=target, id_applied=True)
    if isinstance(event, ApplyRejected):
        if state.id_applied:
            raise illegal("the claim was already accepted")
        return replace(INITIAL_STATE, phase=target, temp_stale=True)
    if isinstance(event, MetaWritten):
        if not state.id_applied:
            raise illegal("the meta file may only be written after ApplyBrokerId succeeded")
        return replace(state, phase=target, register_code=None, id_applied=False)
    if isinstance(event, RegisterOk | RegisterFailed):
        if state.temp_stale:
            raise illegal("the stale temp file must be deleted before RegisterBroker")
        return replace(state, phase=target)
    raise AssertionError(f"unhandled event {event!r}")  # pragma: no cover - the table and this match


# ---------------------------------------------------------------------------------------------
# Actions


@dataclass(frozen=True)
class GetNextBrokerId:
    """Ask the controller for the next id; answer with :class:`GotNextId` (code from :func:`make_register_code`)."""


@dataclass(frozen=True)
class WriteTempMeta:
    """Durably write ``.broker.meta.temp`` with this id and code; answer with :class:`TempWritten`."""

    broker_id: int
    register_code: str


@dataclass(frozen=True)
class ApplyBrokerId:
    """Claim the id; answer :class:`ApplyOk`, :class:`ApplyRejected` (BROKER_ID_INVALID), or retry if transient."""

    broker_id: int
    register_code: str


@dataclass(frozen=True)
class PromoteTempToMeta:
    """Write ``.broker.meta`` atomically from the temp content, then delete the temp; answer :class:`MetaWritten`."""

    broker_id: int


@dataclass(frozen=True)
class DeleteTemp:
    """Delete ``.broker.meta.temp`` and fsync the directory; answer :class:`TempDeleted`."""


@dataclass(frozen=True)
class RegisterBroker:
    """Send RegisterBroker with the current address; answer :class:`RegisterOk` or :class:`RegisterFailed`."""

    broker_id: int


@dataclass(frozen=True)
class Done:
    """Registration finished; ``broker_id`` is this broker's persistent id."""

    broker_id: int


@dataclass(frozen=True)
class Refuse:
    """Stop the broker with ``reason`` (names in the store differ from the config)."""

    reason: str


Action = (
    GetNextBrokerId | WriteTempMeta | ApplyBrokerId | PromoteTempToMeta | DeleteTemp | RegisterBroker | Done | Refuse
)


def _need_id(state: RegistrationState) -> int:
    if state.broker_id is None:
        raise AssertionError(f"registration state {state.describe()} has no broker id (a bug)")
    return state.broker_id


def _need_code(state: RegistrationState) -> str:
    if state.register_code is None:
        raise AssertionError(f"registration state {state.describe()} has no register code (a bug)")
    return state.register_code


def next_action(state: RegistrationState) -> Action:
    """What the shell must do next in ``state`` (see each action's doc for the event to feed back)."""
    phase = state.phase
    if phase is Phase.REFUSED:
        return Refuse(state.refused_reason)
    if phase is Phase.REGISTERED:
        return Done(_need_id(state))
    if state.temp_stale:
        return DeleteTemp()
    if phase is Phase.INITIAL:
        if state.broker_id is None:
            return GetNextBrokerId()
        return WriteTempMeta(state.broker_id, _need_code(state))
    if phase is Phase.CREATE_TEMP_META_DONE:
        if state.id_applied:
            return PromoteTempToMeta(_need_id(state))
        return ApplyBrokerId(_need_id(state), _need_code(state))
    return RegisterBroker(_need_id(state))


# ---------------------------------------------------------------------------------------------
# Restart and register codes


def restart_event(
    cluster: str, broker_name: str, meta: MetaRecord | None, temp: TempMetaRecord | None
) -> Event | None:
    """The event describing what a (re)starting broker found in its store dir; None = nothing, start fresh.

    Args:
        cluster, broker_name: from the broker's config.
        meta, temp: decoded ``.broker.meta`` / ``.broker.meta.temp`` (None if absent).

    The meta file wins over a temp file (the temp is then stale: a crash hit between writing the
    meta and deleting the temp).  Names are compared for whichever file decides.
    """
    deciding: MetaRecord | TempMetaRecord | None = meta if meta is not None else temp
    if deciding is None:
        return None
    which = ".broker.meta" if meta is not None else ".broker.meta.temp"
    if (deciding.cluster, deciding.broker_name) != (cluster, broker_name):
        return NamesMismatch(
            f"{which} in the store dir belongs to cluster={deciding.cluster!r} broker_name={deciding.broker_name!r} "
            f"(broker id {deciding.broker_id}) but the config says cluster={cluster!r} broker_name={broker_name!r}; "
            f"refusing to register under another name. Fix the config, or point the broker at an empty store dir"
        )
    if meta is not None:
        return RestartFoundMeta(meta, temp_present=temp is not None)
    assert temp is not None
    return RestartFoundTemp(temp)


class Rng(Protocol):
    """The part of ``random.Random`` registration uses (injected; never the global RNG)."""

    def getrandbits(self, k: int, /) -> int: ...


def make_register_code(broker_addr: str, now_ms: int, rng: Rng) -> str:
    """A register code ``<broker_addr>;<epoch_millis>;<16 hex digits>`` identifying one id claim.

    The controller reads the address from the part before the first ``;``.
    """
    if not broker_addr or ";" in broker_addr:
        raise ValueError(f"broker_addr must be non-empty and contain no ';', got {broker_addr!r}")
    if now_ms < 0:
        raise ValueError(f"now_ms must be >= 0, got {now_ms}")
    return f"{broker_addr};{now_ms};{rng.getrandbits(64):016x}"


def describe_table() -> list[str]:
    """One line per transition (for docs and golden tests)."""
    return [f"{src.value} --{ev.value}--> {dst.value}" for (src, ev), dst in TRANSITIONS.items()]
