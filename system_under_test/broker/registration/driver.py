"""Async shell that runs the registration state machine against a controller and the store dir.

Duties, in order, each time round the loop (the core is :mod:`.state_machine`):

1. At start, load ``.broker.meta`` / ``.broker.meta.temp`` (:class:`~.meta_files.MetaFiles`) and feed
   :func:`~.state_machine.restart_event` to the machine (resume per the seed's fault-tolerance section).
2. Ask :func:`~.state_machine.next_action` what to do; do it (an RPC or a durable file step), passing
   the failpoints declared below before and after the step.
3. Feed the outcome back with :func:`~.state_machine.apply_event`; stop at Done (return the outcome)
   or Refuse (raise :class:`RegistrationRefused`).

Transient errors (ConnectionLost, RequestTimeout, NOT_LEADER and other non-definite or "try again"
codes) are retried with bounded exponential backoff and jitter from the injected RNG; the state
is not changed, so a transient ApplyBrokerId error keeps the temp file and retries with the same
register code.  Anything else (including an armed failpoint's error, which simulates a crash)
propagates: the caller "restarts" by calling :func:`register_broker` again on the same dir.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from system_under_test import failpoints
from system_under_test.broker.registration.errors import (
    RegistrationError,
    RegistrationRefused,
    RegistrationRetriesExhausted,
)
from system_under_test.broker.registration.meta_files import MetaFiles
from system_under_test.broker.registration.meta_record import MetaRecord, TempMetaRecord
from system_under_test.broker.registration.state_machine import (
    INITIAL_STATE,
    Action,
    ApplyBrokerId,
    ApplyOk,
    ApplyRejected,
    DeleteTemp,
    Done,
    Event,
    GetNextBrokerId,
    GotNextId,
    MetaWritten,
    PromoteTempToMeta,
    Refuse,
    RegisterBroker,
    RegisterFailed,
    RegisterOk,
    RegistrationState,
    RestartFoundMeta,
    Rng,
    TempDeleted,
    TempWritten,
    WriteTempMeta,
    apply_event,
    make_register_code,
    next_action,
    restart_event,
)
from system_under_test.protocol.codes import ResponseCode
from system_under_test.protocol.errors import ConnectionLost, RequestTimeout, RpcError

log = logging.getLogger("splitbrain.broker.registration")

FP_NEXT_ID_BEFORE = failpoints.declare("broker.get_next_broker_id.before", "before sending GetNextBrokerId")
FP_NEXT_ID_AFTER = failpoints.declare("broker.get_next_broker_id.after_reply", "GetNextBrokerId answered, no temp yet")
FP_TEMP_BEFORE = failpoints.declare("broker.meta_temp.before_write", "about to write .broker.meta.temp")
FP_TEMP_AFTER = failpoints.declare("broker.meta_temp.after_write", ".broker.meta.temp durable, ApplyBrokerId not sent")
FP_APPLY_BEFORE = failpoints.declare("broker.apply_broker_id.before", "before sending ApplyBrokerId")
FP_APPLY_AFTER = failpoints.declare("broker.apply_broker_id.after_reply", "ApplyBrokerId answered, meta not written")
FP_META_BEFORE_RENAME = failpoints.declare("broker.meta.before_rename", ".broker.meta.tmp fsynced, not yet renamed")
FP_META_AFTER_RENAME = failpoints.declare("broker.meta.after_rename", ".broker.meta renamed, temp not yet deleted")
FP_REGISTER_BEFORE = failpoints.declare("broker.register.before", "before sending RegisterBroker")
FP_REGISTER_AFTER = failpoints.declare("broker.register.after_reply", "RegisterBroker answered, not yet acted on")

FAILPOINTS: tuple[str, ...] = (
    FP_NEXT_ID_BEFORE,
    FP_NEXT_ID_AFTER,
    FP_TEMP_BEFORE,
    FP_TEMP_AFTER,
    FP_APPLY_BEFORE,
    FP_APPLY_AFTER,
    FP_META_BEFORE_RENAME,
    FP_META_AFTER_RENAME,
    FP_REGISTER_BEFORE,
    FP_REGISTER_AFTER,
)
"""Every registration failpoint, in the order a first start passes them."""

FIRST_REGISTRATION_POINTS: tuple[str, ...] = FAILPOINTS[:FAILPOINTS.index(FP_REGISTER_BEFORE)]
"""The points only a broker without ``.broker.meta`` passes (a fresh one): GetNextBrokerId to the meta rename.  A
restart with a meta file goes straight to RegisterBroker (``broker.register.*``)."""

PREPARE_META, COMMIT_META, DELETE_TEMP = "prepare-meta", "commit-meta", "delete-temp"
PROMOTE_STEPS: tuple[str, ...] = (PREPARE_META, FP_META_BEFORE_RENAME, COMMIT_META, FP_META_AFTER_RENAME, DELETE_TEMP)
"""The file steps of PromoteTempToMeta in order, with the failpoints between them.  ``.broker.meta`` is put in place
(written beside it, fsynced, renamed) before the claim's ``.broker.meta.temp`` is deleted, so a crash at any point
leaves one of the two and the restarted broker resumes with the id the controller applied for it (the design's
"ApplyBrokerId success, CreateMetaFileFromTemp fail" case).  One table for both shells that perform it: the
driver (:func:`_perform`) and the simulated broker walk it, so a change of the order is a change of both."""

TRANSIENT_CODES: frozenset[int] = frozenset(
    {
        ResponseCode.CONTROLLER_NOT_LEADER,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NOT_READY,
        ResponseCode.TIMEOUT,
        ResponseCode.FORMATION_PENDING,
    }
)
"""Response codes after which the same request is simply retried (plus every non-definite code)."""


class ControllerApi(Protocol):
    """What registration needs from the controller client (leader discovery is the client's job).

    Each method raises RpcError (non-SUCCESS reply), ConnectionLost or RequestTimeout.
    """

    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int: ...

    async def apply_broker_id(
        self, cluster: str, broker_name: str, broker_id: int, register_code: str, broker_addr: str
    ) -> None: ...

    async def register_broker(
        self,
        cluster: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        incarnation_id: str,
        cluster_id: str | None,
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RegistrationConfig:
    """Inputs of registration.

    Attributes:
        cluster: cluster name from the broker config.
        broker_name: broker set name from the broker config.
        broker_addr: this broker's current host:port (goes into the register code and RegisterBroker).
        incarnation_id: random id of this process start (KIP-631), sent with RegisterBroker.
        cluster_id: the cluster id recorded in the store, if any.
        max_attempts: transient failures tolerated in a row on one step before giving up (bounds the run).
        backoff_initial_ms, backoff_max_ms: exponential backoff between retries (half jitter); a larger
            max rides out longer controller elections but delays startup.
        bug_non_atomic_meta: write .broker.meta in place (the ``--bug non-atomic-meta`` switch).
    """

    cluster: str
    broker_name: str
    broker_addr: str
    incarnation_id: str = ""
    cluster_id: str | None = None
    max_attempts: int = 20
    backoff_initial_ms: int = 50
    backoff_max_ms: int = 2000
    bug_non_atomic_meta: bool = False

    def __post_init__(self) -> None:
        for name in ("cluster", "broker_name", "broker_addr"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"RegistrationConfig.{name} must be a non-empty string, got {value!r}")
        if ";" in self.broker_addr:
            raise ValueError(f"RegistrationConfig.broker_addr must not contain ';', got {self.broker_addr!r}")
        if self.max_attempts < 1:
            raise ValueError(f"RegistrationConfig.max_attempts must be >= 1, got {self.max_attempts}")
        if not 0 < self.backoff_initial_ms <= self.backoff_max_ms:
            raise ValueError(
                f"RegistrationConfig backoff must satisfy 0 < backoff_initial_ms <= backoff_max_ms, got "
                f"{self.backoff_initial_ms} and {self.backoff_max_ms}"
            )


@dataclass(frozen=True)
class RegistrationOutcome:
    """Result of a completed registration.

    Attributes:
        broker_id: the persistent broker id (>= 1).
        broker_epoch: the broker epoch from the RegisterBroker reply (None if the controller sent none).
        master_id, master_addr, master_epoch, sync_state_set_epoch: master info from the reply, if any.
        reply: the whole RegisterBroker reply header.
    """

    broker_id: int
    broker_epoch: int | None = None
    master_id: int | None = None
    master_addr: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    reply: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_reply(cls, broker_id: int, reply: Mapping[str, Any]) -> RegistrationOutcome:
        """Pick the known fields out of a RegisterBroker reply header (missing/mistyped ones become None)."""

        def opt_int(key: str) -> int | None:
            v = reply.get(key)
            return v if type(v) is int else None

        addr = reply.get("master_addr")
        return cls(
            broker_id=broker_id,
            broker_epoch=opt_int("broker_epoch"),
            master_id=opt_int("master_id"),
            master_addr=addr if isinstance(addr, str) else None,
            master_epoch=opt_int("master_epoch"),
            sync_state_set_epoch=opt_int("sync_state_set_epoch"),
            reply=dict(reply),
        )


#: What ends one :func:`register_broker` run without a verdict: transient errors that outlasted the retries,
#: a lost connection or timeout outside them, or a failpoint's simulated crash.  The caller runs it again
#: (as a restarted process would); any other RegistrationError is a verdict.
RESTART_ERRORS = (RegistrationRetriesExhausted, ConnectionLost, RequestTimeout, failpoints.FailpointError)


def is_transient(exc: BaseException) -> bool:
    """True if the same request should simply be retried after ``exc``."""
    if isinstance(exc, ConnectionLost | RequestTimeout):
        return True
    if isinstance(exc, RpcError):
        return int(exc.code) in TRANSIENT_CODES or not exc.definite
    return False


def backoff_ms(attempt: int, cfg: RegistrationConfig, rng: Rng) -> int:
    """Backoff before retry number ``attempt`` (1-based): uniform in [cap/2, cap], cap doubling to backoff_max_ms."""
    cap = min(cfg.backoff_max_ms, cfg.backoff_initial_ms * (2 ** min(attempt - 1, 20)))
    return cap // 2 + rng.getrandbits(32) % (cap - cap // 2 + 1)


def _resume_state(files: MetaFiles, cfg: RegistrationConfig) -> RegistrationState:
    meta = files.load_meta()
    event: Event | None
    if meta is not None:
        # The meta file decides; a temp beside it is stale whatever it holds (even torn), so it is
        # not decoded, only deleted before RegisterBroker.
        event = restart_event(cfg.cluster, cfg.broker_name, meta, None)
        if isinstance(event, RestartFoundMeta) and files.temp_path.exists():
            event = RestartFoundMeta(meta, temp_present=True)
    else:
        event = restart_event(cfg.cluster, cfg.broker_name, None, files.load_temp())
    state = INITIAL_STATE if event is None else apply_event(INITIAL_STATE, event)
    log.info("registration resume in %s: %s", files.store_dir, state.describe())
    return state


async def register_broker(
    controller: ControllerApi,
    store_dir: Path,
    cfg: RegistrationConfig,
    *,
    rng: Rng,
    now_ms: Callable[[], int],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> RegistrationOutcome:
    """Obtain (or recover) this broker's persistent id and register it with the controller.

    Args:
        controller: the controller client.
        store_dir: the store root dir holding ``.broker.meta`` / ``.broker.meta.temp`` (must exist).
        cfg: names, address and retry budget.
        rng: seeded RNG (register code randomness and backoff jitter).
        now_ms: wall clock in milliseconds (goes into the register code).
        sleep: coroutine used for backoff (tests pass a fake).

    Returns:
        The outcome, with the id and the RegisterBroker reply.

    Raises:
        RegistrationRefused: the store dir belongs to another cluster/broker name.
        MetaCorruptError: a meta file is torn; the broker must not invent a new id.
        RegistrationRetriesExhausted: transient errors outlasted ``cfg.max_attempts`` on one step.
        RegistrationError: the controller refused definitively (the message names the step and code).
        FailpointError: an armed failpoint (simulated crash); call again to restart.
    """
    files = MetaFiles(store_dir, bug_non_atomic_meta=cfg.bug_non_atomic_meta)
    state = _resume_state(files, cfg)
    reply: dict[str, Any] = {}
    attempt = 0
    # Bound: every step either advances the machine or burns one of max_attempts; a claim is at most
    # 6 steps and each rejected claim restarts it, so this bound is far beyond any legal run.
    for _ in range(64 * 8 * cfg.max_attempts):
        action = next_action(state)
        if isinstance(action, Done):
            log.info("registration done: broker id %d (%s)", action.broker_id, state.describe())
            return RegistrationOutcome.from_reply(action.broker_id, reply)
        if isinstance(action, Refuse):
            raise RegistrationRefused(action.reason)
        try:
            event, reply_or_none = await _perform(action, state, controller, files, cfg, rng, now_ms)
        except Exception as exc:
            if not is_transient(exc):
                raise
            attempt += 1
            if attempt >= cfg.max_attempts:
                raise RegistrationRetriesExhausted(
                    f"broker {cfg.broker_name} ({cfg.broker_addr}): step {type(action).__name__} failed "
                    f"{attempt} times in a row in state {state.describe()}; last error: {exc!r}. "
                    f"Is a controller leader reachable?"
                ) from exc
            if isinstance(action, RegisterBroker):
                state = apply_event(state, RegisterFailed(repr(exc)))
            delay = backoff_ms(attempt, cfg, rng)
            log.warning(
                "registration step %s: transient error %r; retry %d in %d ms",
                type(action).__name__,
                exc,
                attempt,
                delay,
            )
            await sleep(delay / 1000)
            continue
        attempt = 0
        if reply_or_none is not None:
            reply = reply_or_none
        new_state = apply_event(state, event)
        log.info("registration %s --%s--> %s", state.describe(), event.kind.value, new_state.describe())
        state = new_state
    raise RegistrationError(f"registration did not finish within its step bound; last state {state.describe()}")


async def _perform(
    action: Action,
    state: RegistrationState,
    controller: ControllerApi,
    files: MetaFiles,
    cfg: RegistrationConfig,
    rng: Rng,
    now_ms: Callable[[], int],
) -> tuple[Event, dict[str, Any] | None]:
    """Do one action; returns the event to feed back (and the RegisterBroker reply, if any)."""
    where = f"{cfg.cluster}/{cfg.broker_name}"
    if isinstance(action, GetNextBrokerId):
        await failpoints.ahit(FP_NEXT_ID_BEFORE)
        try:
            broker_id = await controller.get_next_broker_id(cfg.cluster, cfg.broker_name)
        except RpcError as exc:
            if is_transient(exc):
                raise
            raise RegistrationError(f"GetNextBrokerId for {where} refused: {exc}") from exc
        await failpoints.ahit(FP_NEXT_ID_AFTER)
        if type(broker_id) is not int or broker_id < 1:
            raise RegistrationError(f"GetNextBrokerId for {where} returned {broker_id!r}; expected an int >= 1")
        return GotNextId(broker_id, make_register_code(cfg.broker_addr, now_ms(), rng)), None
    if isinstance(action, WriteTempMeta):
        await failpoints.ahit(FP_TEMP_BEFORE)
        files.write_temp(TempMetaRecord(cfg.cluster, cfg.broker_name, action.broker_id, action.register_code))
        await failpoints.ahit(FP_TEMP_AFTER)
        return TempWritten(action.broker_id, action.register_code), None
    if isinstance(action, ApplyBrokerId):
        await failpoints.ahit(FP_APPLY_BEFORE)
        outcome: Event
        try:
            await controller.apply_broker_id(
                cfg.cluster, cfg.broker_name, action.broker_id, action.register_code, cfg.broker_addr
            )
            outcome = ApplyOk()
        except RpcError as exc:
            if exc.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                outcome = ApplyRejected()
            elif is_transient(exc):
                raise
            else:
                raise RegistrationError(f"ApplyBrokerId(id={action.broker_id}) for {where} refused: {exc}") from exc
        await failpoints.ahit(FP_APPLY_AFTER)
        return outcome, None
    if isinstance(action, PromoteTempToMeta):
        record = MetaRecord(cfg.cluster, cfg.broker_name, action.broker_id)
        prepared: Path | None = None
        for step in PROMOTE_STEPS:
            if step == PREPARE_META:
                prepared = files.prepare_meta(record)
            elif step == COMMIT_META:
                assert prepared is not None, "PROMOTE_STEPS prepares the meta file before committing it"
                files.commit_meta(prepared, record)
            elif step == DELETE_TEMP:
                files.delete_temp()
            else:
                await failpoints.ahit(step)
        return MetaWritten(), None
    if isinstance(action, DeleteTemp):
        files.delete_temp()
        return TempDeleted(), None
    if isinstance(action, RegisterBroker):
        await failpoints.ahit(FP_REGISTER_BEFORE)
        try:
            reply = await controller.register_broker(
                cfg.cluster, cfg.broker_name, action.broker_id, cfg.broker_addr, cfg.incarnation_id, cfg.cluster_id
            )
        except RpcError as exc:
            if is_transient(exc):
                raise
            raise RegistrationError(
                f"RegisterBroker(id={action.broker_id}) for {where} refused: {exc}. If the controller no longer "
                f"knows this id (was CleanBrokerData run?), the broker will not invent a new one: an operator "
                f"must clear the store dir"
            ) from exc
        await failpoints.ahit(FP_REGISTER_AFTER)
        return RegisterOk(), dict(reply or {})
    raise AssertionError(f"registration action {action!r} is not performed by the shell (state {state.describe()})")
