"""A real controller accepts a RAFT_MESSAGE frame only when every message in it comes from the frame's sender
(``from_id``): a frame whose messages claim another node is dropped whole, so one peer cannot speak for
another.  The positive control sends the same message under its true sender and sees it take effect."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from system_under_test.protocol import RequestCode, connect
from system_under_test.raft.types import Message, MessageType, message_to_wire
from systems.splitbrain.local_cluster import LocalQuorum

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def _term(q: LocalQuorum, node: str) -> int:
    client = q.client()
    try:
        return int((await client.call_one(q.peers[node], RequestCode.ADMIN_STATUS)).header["raft"]["term"])
    finally:
        await client.close()


async def _send(q: LocalQuorum, node: str, from_id: str, msg: Message) -> None:
    conn = await connect(q.peers[node], liveness=None)
    try:
        conn.send_oneway(RequestCode.RAFT_MESSAGE, {"from_id": from_id, "token": q.token}, [message_to_wire(msg)])
        await asyncio.sleep(0.2)  # a one-way frame: give it time to arrive before closing
    finally:
        conn.close()


async def _wait_term_at_least(q: LocalQuorum, node: str, term: int, timeout_s: float) -> int:
    deadline, seen = time.monotonic() + timeout_s, -1
    while time.monotonic() < deadline:
        seen = await _term(q, node)
        if seen >= term:
            return seen
        await asyncio.sleep(0.1)
    return seen


def test_a_frame_whose_message_claims_another_sender_is_dropped(tmp_path: Path) -> None:
    async def scenario(q: LocalQuorum) -> dict[str, Any]:
        leader = await q.wait_leader()
        target, other = [n for n in q.node_ids if n != leader][:2]
        term = await _term(q, target)
        # A heartbeat at a much higher term from `other`: Raft makes the target follow that term.
        msg = Message(MessageType.HEARTBEAT, src=other, dst=target, term=term + 50)
        await _send(q, target, leader, msg)  # frame says leader, message says other: spoofed
        await asyncio.sleep(1.0)
        after_spoof = await _term(q, target)
        await _send(q, target, other, msg)  # the same message under its true sender
        after_true = await _wait_term_at_least(q, target, term + 50, timeout_s=10.0)
        return {"term": term, "after_spoof": after_spoof, "after_true": after_true}

    with LocalQuorum(tmp_path) as q:
        q.start_all()
        seen = asyncio.run(scenario(q))
    assert seen["after_spoof"] < seen["term"] + 50, f"a spoofed frame was applied: {seen}"
    assert seen["after_true"] >= seen["term"] + 50, f"the control frame had no effect: {seen}"
