"""Seeded random faults on a live broker set while 6 producers and a consumer run.

Faults (chosen by the seed): kill -9 / SIGSTOP / SIGTERM of a broker (the master 60% of the time),
SIGSTOP of two brokers, kill -9 / SIGSTOP of a controller, a jump of a broker's process clock
(ADMIN_CLOCK_SET, forward or back); each broker comes back.  Afterwards every
broker holds the same log and: every acknowledged message is there exactly once at its queue offset;
every stored message was acknowledged or had an unknown outcome; nothing a consumer read changed or
vanished.  Replay a failure with ``SPLITBRAIN_SEED=<seed> pytest tests/integration/broker/test_chaos_real.py``.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from pathlib import Path

import pytest

from system_under_test.client.consumer import Consumer
from system_under_test.client.producer import Producer, SendError
from system_under_test.protocol import RequestCode, connect
from systems.splitbrain.local_broker_set import LocalBrokerSet
from systems.splitbrain.local_cluster import LocalQuorum

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

SEED = int(os.environ.get("SPLITBRAIN_SEED", "20261122"))
ROUNDS = int(os.environ.get("SPLITBRAIN_CHAOS_ROUNDS", "6"))
TOPIC = "chaos"


async def set_clock(s: LocalBrokerSet, node: str, token: str, offset_ms: float) -> None:
    """Jump one broker's process clock (leases, watchdog and idle timers run on it)."""
    try:
        conn = await connect(s.addrs[node], timeout_s=1.0)
        try:
            await conn.request(RequestCode.ADMIN_CLOCK_SET, {"token": token, "offset_ms": offset_ms}, timeout_s=2.0)
        finally:
            conn.close()
    except Exception:
        pass  # the broker may be down or restarting: the fault simply did not happen


async def fault(rng: random.Random, q: LocalQuorum, s: LocalBrokerSet, log: list[str]) -> None:
    f = rng.choice(["kill", "kill", "pause", "term", "controller-kill", "controller-pause", "pause-two", "clock"])
    if f == "clock":
        node, offset_ms = rng.choice(s.nodes), rng.choice([-3000.0, -800.0, 800.0, 3000.0])
        log.append(f"clock {node} {offset_ms:+.0f}ms")
        await set_clock(s, node, q.token, offset_ms)
        await asyncio.sleep(rng.uniform(0.5, 2.5))
        await set_clock(s, node, q.token, 0.0)
        return
    if f.startswith("controller"):
        node = rng.choice(q.node_ids)
        log.append(f"{f} {node}")
        q.kill(node, signal.SIGKILL if f == "controller-kill" else signal.SIGSTOP)
        await asyncio.sleep(rng.uniform(0.3, 2.5))
        if f == "controller-kill":
            q.start(node)
        else:
            q.kill(node, signal.SIGCONT)
        return
    if f == "pause-two":
        pair = rng.sample(s.nodes, 2)
        log.append(f"{f} {pair}")
        for n in pair:
            s.procs[n].send_signal(signal.SIGSTOP)
        await asyncio.sleep(rng.uniform(0.5, 3.5))
        for n in pair:
            s.procs[n].send_signal(signal.SIGCONT)
        return
    master = s.master(await s.infos())
    node = master if master is not None and rng.random() < 0.6 else rng.choice(s.nodes)
    log.append(f"{f} {node}{' (master)' if node == master else ''}")
    if f == "kill":
        s.kill(node)
        await asyncio.sleep(rng.uniform(0, 2.5))
        s.start(node)
    elif f == "pause":
        s.procs[node].send_signal(signal.SIGSTOP)
        await asyncio.sleep(rng.uniform(0.5, 3.5))
        s.procs[node].send_signal(signal.SIGCONT)
    else:
        assert s.kill(node, signal.SIGTERM, timeout_s=25) == 0, f"{node} did not shut down cleanly"
        s.start(node)


async def scenario(q: LocalQuorum, s: LocalBrokerSet) -> None:
    rng = random.Random(SEED)
    await q.wait_leader()
    s.start_all()
    await s.wait_for(lambda i: (m := s.master(i)) is not None and len(i[m].get("sync_state_set") or []) == 3,
                     "a SyncStateSet of 3", 30)
    p = Producer(q.addrs, q.token, timeout_s=5)
    c = Consumer(q.addrs, q.token)
    acked: dict[int, bytes] = {}
    unknown: set[bytes] = set()
    seen: dict[int, bytes] = {}
    stop = asyncio.Event()

    async def produce(w: int) -> None:
        k = 0
        while not stop.is_set():
            body = f"{w}-{k}".encode()
            k += 1
            try:
                res = await p.send("bs", TOPIC, 0, body, timeout_s=5)
            except SendError as exc:
                if not exc.definite:
                    unknown.add(body)
                await asyncio.sleep(0.05)
                continue
            assert res.queue_offset not in acked, f"offset {res.queue_offset} acknowledged twice"
            acked[res.queue_offset] = body

    async def consume() -> None:
        pick = random.Random(SEED + 1)  # its own stream: the fault sequence depends on the seed only
        offset = 0
        while not stop.is_set():
            node = pick.choice(s.nodes)
            try:
                res = await c.pull("bs", TOPIC, 0, offset, 256, addr=s.addrs[node])
            except Exception:
                await asyncio.sleep(0.05)
                continue
            for m in res.messages:
                assert seen.setdefault(m.queue_offset, m.body) == m.body, f"record at {m.queue_offset} changed"
            offset = res.next_offset
            await asyncio.sleep(0.02)

    tasks = [asyncio.create_task(produce(w)) for w in range(6)] + [asyncio.create_task(consume())]
    log: list[str] = []
    try:
        for _ in range(ROUNDS):
            await asyncio.sleep(rng.uniform(0.5, 2.0))
            await fault(rng, q, s, log)
        await asyncio.sleep(1.5)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    print(f"seed {SEED}: faults {log}; acked {len(acked)}, unknown {len(unknown)}, read {len(seen)}")
    for t in tasks:
        if t.done() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
    await s.wait_for(lambda i: len(i) == 3 and s.master(i) is not None and not any(x.get("fenced") for x in i.values())
                     and len({x.get("max_offset") for x in i.values()}) == 1
                     and len({x.get("confirm_offset") for x in i.values()}) == 1, "every broker to converge", 60)
    final: dict[int, bytes] = {}
    for m in await c.pull_all("bs", TOPIC, 0):
        assert m.queue_offset not in final
        final[m.queue_offset] = m.body
    for node in s.nodes:
        on_node = {m.queue_offset: m.body for m in await c.pull_all("bs", TOPIC, 0, addr=s.addrs[node])}
        assert on_node == final, f"seed {SEED}: {node} differs from the master"
    lost = [qo for qo, body in acked.items() if final.get(qo) != body]
    assert not lost, f"seed {SEED}: acknowledged messages lost at offsets {lost[:10]}"
    assert len(set(final.values())) == len(final), f"seed {SEED}: a message is stored twice"
    changed = [qo for qo, body in seen.items() if final.get(qo) != body]
    assert not changed, f"seed {SEED}: records read by the consumer later truncated at {changed[:10]}"
    unexpected = set(final.values()) - set(acked.values()) - unknown
    assert not unexpected, f"seed {SEED}: stored but never sent or definitely failed: {sorted(unexpected)[:5]}"
    await p.close()
    await c.close()


def test_random_faults_keep_acknowledged_messages(tmp_path: Path) -> None:
    print(f"seed {SEED} (replay: SPLITBRAIN_SEED={SEED})")
    with LocalQuorum(tmp_path / "q") as q:
        q.start_all()
        with LocalBrokerSet(tmp_path / "b", q.addrs, tmp_path / "q" / "token", broker_name="bs") as s:
            try:
                asyncio.run(scenario(q, s))
            except BaseException:
                print(f"FAILED with seed {SEED}; replay: SPLITBRAIN_SEED={SEED} pytest {__file__}")
                for node in s.nodes:
                    if s.alive(node):
                        s.procs[node].send_signal(signal.SIGCONT)
                    path = s.log_path(node)
                    if path.exists():
                        print(f"--- {node} ---\n" + "\n".join(path.read_text(errors="replace").splitlines()[-30:]))
                raise
