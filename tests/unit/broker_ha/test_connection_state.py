"""The HA connection state table: every legal and illegal (state, event) pair."""

from __future__ import annotations

import pytest

from system_under_test.broker.ha.connection_state import (
    CONNECTION_TRANSITIONS,
    ConnEvent,
    ConnState,
    IllegalConnectionTransition,
    next_conn_state,
)

LEGAL = sorted(CONNECTION_TRANSITIONS.items(), key=lambda kv: (kv[0][0].value, kv[0][1].value))
ILLEGAL = [(s, e) for s in ConnState for e in ConnEvent if (s, e) not in CONNECTION_TRANSITIONS]


@pytest.mark.parametrize(("pair", "target"), LEGAL, ids=[f"{s.value}-{e.value}" for (s, e), _ in LEGAL])
def test_legal(pair: tuple[ConnState, ConnEvent], target: ConnState) -> None:
    assert next_conn_state(*pair) is target


@pytest.mark.parametrize("pair", ILLEGAL, ids=[f"{s.value}-{e.value}" for s, e in ILLEGAL])
def test_illegal_names_role_state_event(pair: tuple[ConnState, ConnEvent]) -> None:
    state, event = pair
    with pytest.raises(IllegalConnectionTransition) as info:
        next_conn_state(state, event, role="master")
    msg = str(info.value)
    assert "master" in msg and state.value in msg and event.value in msg


def test_shape() -> None:
    # SHUTDOWN is terminal; every non-terminal state can shut down; transfer is only reached via handshake.
    assert not [k for k in CONNECTION_TRANSITIONS if k[0] is ConnState.SHUTDOWN]
    for s in ConnState:
        if s is not ConnState.SHUTDOWN:
            assert CONNECTION_TRANSITIONS[(s, ConnEvent.SHUTDOWN)] is ConnState.SHUTDOWN
    into_transfer = {k for k, v in CONNECTION_TRANSITIONS.items() if v is ConnState.TRANSFER}
    assert into_transfer == {(ConnState.HANDSHAKE, ConnEvent.HANDSHAKE_DONE)}


def test_happy_path_and_offset_mismatch_reconnect() -> None:
    s = ConnState.READY
    for e in [ConnEvent.CONNECTED, ConnEvent.HANDSHAKE_DONE, ConnEvent.OFFSET_MISMATCH, ConnEvent.CONNECTED]:
        s = next_conn_state(s, e)
    assert s is ConnState.HANDSHAKE
