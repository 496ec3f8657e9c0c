"""The broker registration driver against a real controller quorum, with real crashes (os._exit)
at every registration failpoint: each restart ends REGISTERED with the same id and no id is consumed
twice (seed: persistent-unique-broker-id.md, "Fault tolerance")."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from system_under_test.broker.registration import FAILPOINTS
from systems.splitbrain.local_cluster import LocalQuorum

pytestmark = pytest.mark.integration

SCRIPT = """
import asyncio, json, random, sys, time
from pathlib import Path
from system_under_test import failpoints
from system_under_test.broker.registration import RegistrationConfig, register_broker
from system_under_test.client.controller_client import ControllerClient

async def main():
    failpoints.load_env()
    client = ControllerClient(sys.argv[1].split(","), token=sys.argv[2], timeout_s=2)
    cfg = RegistrationConfig(cluster="splitbrain", broker_name="s", broker_addr=sys.argv[4], incarnation_id="i")
    out = await register_broker(client, Path(sys.argv[3]), cfg, rng=random.Random(1),
                                now_ms=lambda: int(time.time() * 1000))
    print(json.dumps({"broker_id": out.broker_id, "broker_epoch": out.broker_epoch}))
    await client.close()

asyncio.run(main())
"""


def register(q: LocalQuorum, store: Path, addr: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPLITBRAIN_FAILPOINTS": f"{failpoint}=crash" if failpoint else ""}
    return subprocess.run([sys.executable, "-c", SCRIPT, ",".join(q.addrs), q.token, str(store), addr],
                          capture_output=True, text=True, timeout=120, env=env)


def test_crash_at_every_registration_step_then_restart_keeps_one_id(tmp_path: Path) -> None:
    with LocalQuorum(tmp_path / "q") as q:
        q.start_all()
        asyncio.run(q.wait_leader())
        assert len(FAILPOINTS) == 10
        for i, fp in enumerate(FAILPOINTS):
            store = tmp_path / f"b{i}"
            store.mkdir()
            crashed = register(q, store, f"10.0.0.{i}:1", fp)
            assert crashed.returncode == 86, (fp, crashed.stderr[-2000:])
            assert f"FAILPOINT {fp}: crash" in crashed.stderr
            again = register(q, store, f"10.0.1.{i}:1")  # restart, possibly with a new address
            assert again.returncode == 0, (fp, again.stderr[-2000:])
            assert (store / ".broker.meta").exists() and not (store / ".broker.meta.temp").exists()
            third = register(q, store, f"10.0.2.{i}:1")  # a normal restart registers directly
            assert json.loads(third.stdout)["broker_id"] == json.loads(again.stdout)["broker_id"] == i + 1

        async def ids() -> tuple[int, list[int]]:
            client = q.client()
            nxt = await client.get_next_broker_id("splitbrain", "s")
            info = await client.get_replica_info("s")
            await client.close()
            return nxt, sorted(b[0] for b in info["body"]["brokers"])

        nxt, assigned = asyncio.run(ids())
        # ten brokers, ten ids, none consumed twice, none lost
        assert assigned == list(range(1, 11)) and nxt == 11
