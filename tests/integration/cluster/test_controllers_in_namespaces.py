"""The cluster life cycle (harness/cluster.py) on the local backend: a controller quorum inside
real network namespaces, leader discovery through `primaries`, kill -9 and restart."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from harness.control.local import LocalRemote
from harness.spec import SpecError, spec_from_dict
from systems.splitbrain.db import SplitbrainDB
from systems.splitbrain.options import cluster_options

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]


def test_quorum_in_namespaces_kill_leader_and_restart(tmp_path: Path) -> None:
    spec = spec_from_dict({"name": "ns", "backend": "local", "nodes": {"controllers": 3, "broker_sets": []},
                           "workloads": ["queue"], "seed": 3}, file="<test>")

    async def main() -> None:
        remote = await LocalRemote.create(list(spec.nodes.all), state_dir=tmp_path / "state")
        db = SplitbrainDB(spec, cluster_options({"election_ticks": 6}))
        test = {"remote": remote, "run_dir": str(tmp_path)}
        try:
            await asyncio.gather(*(db.setup(test, n) for n in spec.nodes.controllers))
            leader = (await db.primaries(test))[0]
            assert leader in spec.nodes.controllers
            assert db.controller_addrs(test)[0].startswith("10.77.")  # a namespace address, not loopback
            await db.kill(test, leader)
            assert not await db.alive(test, leader)
            deadline = asyncio.get_running_loop().time() + 20
            new = leader
            while new == leader and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.2)
                prim = await db.primaries(test)
                new = prim[0] if prim else leader
            assert new != leader
            await db.start(test, leader)
            await db.wait_ready(test, leader)
            logs = db.log_files(test, leader)
            assert all(Path(p).exists() for p in logs)
        finally:
            for n in spec.nodes.controllers:
                await db.teardown(test, n)
            await remote.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    "raw, key",
    [({"lease_timeout_ms": 5}, "cluster.lease_timeout_ms"), ({"flush": "never"}, "cluster.flush"),
     ({"bugs": ["nope"]}, "cluster.bugs"), ({"colour": 1}, "cluster.colour"), ({"lease_timeout_ms": True},
                                                                                "cluster.lease_timeout_ms")],
)
def test_cluster_options_errors_name_the_key(raw: dict[str, object], key: str) -> None:
    with pytest.raises(SpecError) as err:
        cluster_options(raw)
    assert err.value.key == key
