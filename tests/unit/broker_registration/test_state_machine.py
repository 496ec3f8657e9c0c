"""Table tests of the broker registration state machine (seed: Persistent unique BrokerId)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.broker.registration.errors import IllegalTransition
from system_under_test.broker.registration.meta_record import MetaRecord, TempMetaRecord
from system_under_test.broker.registration.state_machine import (
    INITIAL_STATE,
    TRANSITIONS,
    ApplyBrokerId,
    ApplyOk,
    ApplyRejected,
    DeleteTemp,
    Done,
    Event,
    EventKind,
    GetNextBrokerId,
    GotNextId,
    MetaWritten,
    NamesMismatch,
    Phase,
    PromoteTempToMeta,
    Refuse,
    RegisterBroker,
    RegisterFailed,
    RegisterOk,
    RegistrationState,
    RestartFoundMeta,
    RestartFoundTemp,
    TempDeleted,
    TempWritten,
    WriteTempMeta,
    apply_event,
    describe_table,
    make_register_code,
    next_action,
    restart_event,
)

CODE = "10.0.0.1:10911;1700000000000;00000000deadbeef"


def event_for(kind: EventKind) -> Event:
    return {
        EventKind.GOT_NEXT_ID: GotNextId(3, CODE),
        EventKind.TEMP_WRITTEN: TempWritten(3, CODE),
        EventKind.APPLY_OK: ApplyOk(),
        EventKind.APPLY_REJECTED: ApplyRejected(),
        EventKind.META_WRITTEN: MetaWritten(),
        EventKind.TEMP_DELETED: TempDeleted(),
        EventKind.REGISTER_OK: RegisterOk(),
        EventKind.REGISTER_FAILED: RegisterFailed("timeout"),
        EventKind.RESTART_FOUND_TEMP: RestartFoundTemp(TempMetaRecord("c1", "b1", 3, CODE)),
        EventKind.RESTART_FOUND_META: RestartFoundMeta(MetaRecord("c1", "b1", 3)),
        EventKind.NAMES_MISMATCH: NamesMismatch("names differ"),
    }[kind]


def state_for(phase: Phase, kind: EventKind) -> RegistrationState:
    """A state in ``phase`` that satisfies the data guards of ``kind`` (when the pair is legal)."""
    if phase is Phase.INITIAL:
        if kind is EventKind.TEMP_DELETED:
            return RegistrationState(Phase.INITIAL, temp_stale=True)
        if kind is EventKind.TEMP_WRITTEN:
            return RegistrationState(Phase.INITIAL, broker_id=3, register_code=CODE)
        return INITIAL_STATE
    if phase is Phase.CREATE_TEMP_META_DONE:
        return RegistrationState(phase, broker_id=3, register_code=CODE, id_applied=kind is EventKind.META_WRITTEN)
    if phase is Phase.CREATE_META_DONE:
        return RegistrationState(phase, broker_id=3, temp_stale=kind is EventKind.TEMP_DELETED)
    if phase is Phase.REFUSED:
        return RegistrationState(phase, refused_reason="names differ")
    return RegistrationState(phase, broker_id=3)


LEGAL = sorted(TRANSITIONS.items(), key=lambda kv: (kv[0][0].value, kv[0][1].value))
ILLEGAL = sorted(
    ((p, k) for p in Phase for k in EventKind if (p, k) not in TRANSITIONS), key=lambda pk: (pk[0].value, pk[1].value)
)


@pytest.mark.parametrize(("pair", "target"), LEGAL, ids=[f"{p.value}-{k.value}" for (p, k), _ in LEGAL])
def test_every_legal_transition_reaches_its_table_target(pair: tuple[Phase, EventKind], target: Phase) -> None:
    phase, kind = pair
    after = apply_event(state_for(phase, kind), event_for(kind))
    assert after.phase is target


@pytest.mark.parametrize("pair", ILLEGAL, ids=[f"{p.value}-{k.value}" for p, k in ILLEGAL])
def test_every_illegal_transition_raises_naming_state_and_event(pair: tuple[Phase, EventKind]) -> None:
    phase, kind = pair
    before = state_for(phase, kind)
    snapshot = RegistrationState(**before.__dict__)
    with pytest.raises(IllegalTransition) as info:
        apply_event(before, event_for(kind))
    assert phase.value in str(info.value) and kind.value in str(info.value)
    assert (info.value.phase, info.value.event) == (phase.value, kind.value)
    assert before == snapshot


def test_table_covers_the_seed_rotation() -> None:
    assert len(TRANSITIONS) == 12
    assert "INITIAL --temp_written--> CREATE_TEMP_META_DONE" in describe_table()
    assert all(dst is not None for dst in TRANSITIONS.values())
    # REGISTERED and REFUSED are terminal for this machine.
    assert not [k for k in TRANSITIONS if k[0] in (Phase.REGISTERED, Phase.REFUSED)]


GUARDS = [
    ("temp-for-other-id", RegistrationState(Phase.INITIAL, broker_id=3, register_code=CODE), TempWritten(4, CODE)),
    ("temp-other-code", RegistrationState(Phase.INITIAL, broker_id=3, register_code=CODE), TempWritten(3, "x;1;00")),
    ("meta-before-apply", RegistrationState(Phase.CREATE_TEMP_META_DONE, 3, CODE), MetaWritten()),
    ("apply-ok-twice", RegistrationState(Phase.CREATE_TEMP_META_DONE, 3, CODE, id_applied=True), ApplyOk()),
    ("reject-after-ok", RegistrationState(Phase.CREATE_TEMP_META_DONE, 3, CODE, id_applied=True), ApplyRejected()),
    ("delete-without-stale", RegistrationState(Phase.INITIAL), TempDeleted()),
    ("next-id-with-stale-temp", RegistrationState(Phase.INITIAL, temp_stale=True), GotNextId(2, CODE)),
    ("register-with-stale-temp", RegistrationState(Phase.CREATE_META_DONE, 3, temp_stale=True), RegisterOk()),
]


@pytest.mark.parametrize(("name", "state", "event"), GUARDS, ids=[g[0] for g in GUARDS])
def test_data_guards_reject_contradicting_events(name: str, state: RegistrationState, event: Event) -> None:
    with pytest.raises(IllegalTransition, match=state.phase.value):
        apply_event(state, event)


NEXT = [
    ("fresh", INITIAL_STATE, GetNextBrokerId()),
    ("got-id", RegistrationState(Phase.INITIAL, 3, CODE), WriteTempMeta(3, CODE)),
    ("stale-temp-after-reject", RegistrationState(Phase.INITIAL, temp_stale=True), DeleteTemp()),
    ("temp-done", RegistrationState(Phase.CREATE_TEMP_META_DONE, 3, CODE), ApplyBrokerId(3, CODE)),
    ("applied", RegistrationState(Phase.CREATE_TEMP_META_DONE, 3, CODE, id_applied=True), PromoteTempToMeta(3)),
    ("meta-done", RegistrationState(Phase.CREATE_META_DONE, 3), RegisterBroker(3)),
    ("meta-with-stale-temp", RegistrationState(Phase.CREATE_META_DONE, 3, temp_stale=True), DeleteTemp()),
    ("registered", RegistrationState(Phase.REGISTERED, 3), Done(3)),
    ("refused", RegistrationState(Phase.REFUSED, refused_reason="why"), Refuse("why")),
]


@pytest.mark.parametrize(("name", "state", "action"), NEXT, ids=[n[0] for n in NEXT])
def test_next_action(name: str, state: RegistrationState, action: object) -> None:
    assert next_action(state) == action


def test_first_start_walk_through() -> None:
    s = INITIAL_STATE
    seen = []
    for event in [GotNextId(1, CODE), TempWritten(1, CODE), ApplyOk(), MetaWritten(), RegisterFailed(), RegisterOk()]:
        seen.append(type(next_action(s)).__name__)
        s = apply_event(s, event)
    assert seen == [
        "GetNextBrokerId",
        "WriteTempMeta",
        "ApplyBrokerId",
        "PromoteTempToMeta",
        "RegisterBroker",
        "RegisterBroker",
    ]
    assert s.phase is Phase.REGISTERED and next_action(s) == Done(1)


def test_rejected_claim_deletes_temp_then_asks_for_a_new_id() -> None:
    s = apply_event(INITIAL_STATE, RestartFoundTemp(TempMetaRecord("c1", "b1", 2, CODE)))
    assert next_action(s) == ApplyBrokerId(2, CODE)
    s = apply_event(s, ApplyRejected())
    assert (s.phase, s.broker_id, s.register_code) == (Phase.INITIAL, None, None)
    assert next_action(s) == DeleteTemp()
    s = apply_event(s, TempDeleted())
    assert next_action(s) == GetNextBrokerId()


META = MetaRecord("c1", "b1", 1)
TEMP = TempMetaRecord("c1", "b1", 2, CODE)
RESTART = [
    ("nothing", None, None, None),
    ("meta-only", META, None, RestartFoundMeta(META, temp_present=False)),
    ("meta-and-temp", META, TEMP, RestartFoundMeta(META, temp_present=True)),
    ("temp-only", None, TEMP, RestartFoundTemp(TEMP)),
]


@pytest.mark.parametrize(("name", "meta", "temp", "expected"), RESTART, ids=[r[0] for r in RESTART])
def test_restart_event(name: str, meta: MetaRecord | None, temp: TempMetaRecord | None, expected: object) -> None:
    assert restart_event("c1", "b1", meta, temp) == expected


@pytest.mark.parametrize(
    ("cluster", "broker_name", "meta", "temp"),
    [
        ("c2", "b1", META, None),
        ("c1", "b9", META, None),
        ("c1", "b9", None, TEMP),
        ("c9", "b1", META, TEMP),
    ],
)
def test_restart_with_changed_names_is_refused_naming_both(
    cluster: str, broker_name: str, meta: MetaRecord | None, temp: TempMetaRecord | None
) -> None:
    event = restart_event(cluster, broker_name, meta, temp)
    assert isinstance(event, NamesMismatch)
    for value in (cluster, broker_name, "c1", "b1"):
        assert repr(value) in event.detail
    s = apply_event(INITIAL_STATE, event)
    assert s.phase is Phase.REFUSED and next_action(s) == Refuse(event.detail)


def test_register_code_format_uses_injected_time_and_rng() -> None:
    code = make_register_code("10.0.0.1:10911", 1700000000123, random.Random(7))
    assert re.fullmatch(r"10\.0\.0\.1:10911;1700000000123;[0-9a-f]{16}", code)
    assert code == make_register_code("10.0.0.1:10911", 1700000000123, random.Random(7))
    assert code != make_register_code("10.0.0.1:10911", 1700000000123, random.Random(8))
    assert code.split(";")[0] == "10.0.0.1:10911"


@pytest.mark.parametrize(("addr", "now"), [("", 1), ("a;b", 1), ("h:1", -1)])
def test_register_code_rejects_bad_input(addr: str, now: int) -> None:
    with pytest.raises(ValueError):
        make_register_code(addr, now, random.Random(0))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list(EventKind)), max_size=30))
def test_random_event_sequences_only_follow_the_table(kinds: list[EventKind]) -> None:
    """Feeding arbitrary events: every accepted step is a table row; refused steps leave the state alone."""
    s = INITIAL_STATE
    for kind in kinds:
        event = event_for(kind)
        try:
            after = apply_event(s, event)
        except IllegalTransition:
            continue
        assert TRANSITIONS[(s.phase, kind)] is after.phase
        # next_action is always defined in a reachable state.
        next_action(after)
        s = after
