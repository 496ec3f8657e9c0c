"""Three real `splitbrain controller` processes on 127.0.0.1: failover, catch-up, formation refusals,
tokens, leases and hostile input.  Each test names what it pins down."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from system_under_test.protocol import RequestCode, RequestTimeout, ResponseCode, RpcError
from systems.splitbrain.demo import heartbeat, register_broker, sync_state
from systems.splitbrain.local_cluster import LocalQuorum

pytestmark = pytest.mark.integration


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _status(q: LocalQuorum, node: str) -> dict[str, Any]:
    client = q.client()
    try:
        return (await client.call_one(q.peers[node], RequestCode.ADMIN_STATUS)).header["raft"]
    finally:
        await client.close()


async def _wait_applied(q: LocalQuorum, node: str, index: int, timeout_s: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            last = await _status(q, node)
            if last.get("applied_index", 0) >= index:
                return last
        except Exception as exc:
            last = {"error": str(exc)}
        await asyncio.sleep(0.1)
    raise AssertionError(f"{node} did not apply index {index}: {last}\n{q.tail_logs()}")


def wait_exit(q: LocalQuorum, node: str, timeout_s: float = 30) -> int:
    proc = q.procs[node]
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{node} still running after {timeout_s}s\n{q.tail_logs()}") from None


def test_leader_kill_new_leader_serves_identical_metadata_and_restart_catches_up_by_snapshot(tmp_path: Path) -> None:
    with LocalQuorum(tmp_path, extra_args=["--snapshot-every", "20"]) as q:
        q.start_all()

        async def main() -> None:
            leader = await q.wait_leader()
            client = q.client()
            brokers = [await register_broker(client, "splitbrain", f"set-{i % 3}", f"10.1.0.{i}:1") for i in range(9)]
            assert sorted((b["broker_name"], b["broker_id"]) for b in brokers) == sorted(
                (f"set-{s}", i) for s in range(3) for i in (1, 2, 3))
            before = await sync_state(client)
            follower = next(n for n in q.node_ids if n != leader)
            q.kill(follower)
            for i in range(40):  # enough entries to force snapshots + compaction on the live nodes
                await register_broker(client, "splitbrain", "bulk", f"10.2.0.{i}:1")
            q.kill(leader)
            q.start(follower)  # two of three up again: a leader can be elected
            new_leader = await q.wait_leader(exclude={leader})
            after = await sync_state(client)
            assert [r for r in after if r["broker_name"] != "bulk"] == before
            assert len(next(r for r in after if r["broker_name"] == "bulk")["members"]) == 40
            lead_status = await _status(q, new_leader)
            st = await _wait_applied(q, follower, lead_status["commit_index"])
            assert st["snapshot_index"] > 0 or lead_status["snapshot_index"] > 0
            q.start(leader)
            await _wait_applied(q, leader, lead_status["commit_index"])
            await client.close()

        run(main())


def test_foreign_store_and_mismatched_options_exit_nonzero_with_reason(tmp_path: Path) -> None:
    import shutil

    with LocalQuorum(tmp_path / "a") as a:
        a.start_all()
        run(a.wait_leader())
    with LocalQuorum(tmp_path / "b") as b:
        b.start_all()
        run(b.wait_leader())
        b.kill("c1")
        shutil.rmtree(b.data_dir("c1"))
        shutil.copytree(a.data_dir("c1"), b.data_dir("c1"))  # a store of another cluster
        b.start("c1")
        assert wait_exit(b, "c1") == 3
        text = b.log_path("c1").read_text()
        assert "formation refused" in text and "cluster id" in text, text[-2000:]
    with LocalQuorum(tmp_path / "c") as c:
        c.start("c1")
        c.start("c2")
        c.start("c3", extra=["--lease-timeout-ms", "3000"])
        assert wait_exit(c, "c3") == 3
        assert "option 'lease_timeout_ms' differs" in c.log_path("c3").read_text()


def test_bad_flags_exit_2_naming_the_flag(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "harness.cli", "controller", "--data-dir", str(tmp_path), "--cluster-name", "x"]
    cases = [
        (["--node-id", "c9", "--peers", "c1=127.0.0.1:1"], "c9"),
        (["--node-id", "c1", "--peers", "c1=nohost"], "host:port"),
        (["--node-id", "c1", "--peers", "c1=127.0.0.1:1", "--wait-for", "5"], "--wait-for"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "SPLITBRAIN_TOKEN"}
    for extra, fragment in cases:
        proc = subprocess.run(base + extra + ["--token-file", "/nonexistent"], capture_output=True, text=True,
                              timeout=60, env=env)
        assert proc.returncode == 2, proc.stderr
        proc = subprocess.run(base + extra, capture_output=True, text=True, timeout=60, env={**env,
                              "SPLITBRAIN_TOKEN": "t"})
        assert proc.returncode == 2 and fragment in proc.stderr, (extra, proc.stderr)
    proc = subprocess.run(base + ["--node-id", "c1", "--peers", "c1=127.0.0.1:1"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 2 and "cluster token is required" in proc.stderr


def test_token_required_for_writes_and_admin_cli_errors(tmp_path: Path) -> None:
    with LocalQuorum(tmp_path) as q:
        q.start_all()

        async def main() -> None:
            await q.wait_leader()
            bad = q.client()
            bad.token = "wrong"
            with pytest.raises(RpcError) as err:
                await bad.apply_broker_id("splitbrain", "s", 1, "code", "h:1")
            assert err.value.code == ResponseCode.UNAUTHORIZED
            assert await bad.get_next_broker_id("splitbrain", "s") == 1  # reads need no token
            await bad.close()

        run(main())
        cli = [sys.executable, "-m", "harness.cli", "admin", "--controllers", ",".join(q.addrs)]
        env = {**os.environ, "SPLITBRAIN_TOKEN": "wrong"}
        proc = subprocess.run(cli + ["elect-master", "-b", "nope"], capture_output=True, text=True, env=env,
                              timeout=60)
        assert proc.returncode == 1 and "UNAUTHORIZED" in proc.stderr and "token" in proc.stderr
        env["SPLITBRAIN_TOKEN"] = q.token
        proc = subprocess.run(cli + ["replica-info", "-b", "nope"], capture_output=True, text=True, env=env,
                              timeout=60)
        assert proc.returncode == 1 and "BROKER_METADATA_NOT_EXIST" in proc.stderr
        proc = subprocess.run(cli + ["--json", "metadata"], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0 and '"is_leader": true' in proc.stdout
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "admin", "--controllers", "127.0.0.1:1",
                               "metadata"], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 1 and "no controller reachable" in proc.stderr
        assert proc.stderr.count("\n") == 1


def test_lease_expiry_fences_broker_and_reelects_master(tmp_path: Path) -> None:
    with LocalQuorum(tmp_path, extra_args=["--lease-timeout-ms", "1000", "--scan-interval-ms", "100"]) as q:
        q.start_all()

        async def main() -> None:
            await q.wait_leader()
            client = q.client()
            b1 = await register_broker(client, "splitbrain", "s", "10.0.0.1:1")
            b2 = await register_broker(client, "splitbrain", "s", "10.0.0.2:1")
            assert b1["fenced"] and b2["fenced"]  # KIP-631: brokers start fenced
            hb = await heartbeat(client, "splitbrain", b1)
            assert hb["fenced"] is False
            await client.elect_master("s", b1["broker_id"])
            await client.call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {
                "cluster_name": "splitbrain", "broker_name": "s", "master_id": b1["broker_id"], "master_epoch": 1,
                "sync_state_set": [b1["broker_id"], b2["broker_id"]], "sync_state_set_epoch": 1})
            # only b2 keeps heartbeating; b1's lease expires -> fenced, b2 becomes master
            deadline = time.monotonic() + 15
            info: dict[str, Any] = {}
            while time.monotonic() < deadline:
                await heartbeat(client, "splitbrain", b2)
                info = await client.get_replica_info("s")
                if info["master_id"] == b2["broker_id"]:
                    break
                await asyncio.sleep(0.2)
            # b2 is master in a later master epoch than b1's 1 (more than one election can happen when b2's own
            # heartbeats are late on a busy machine: the epoch only has to move forward)
            assert info["master_id"] == b2["broker_id"] and info["master_epoch"] >= 2, info
            epochs = (await client.call(RequestCode.CONTROLLER_GET_BROKER_EPOCHS, {"broker_name": "s"})).body
            fenced = {e["broker_id"]: e["fenced"] for e in epochs}
            assert fenced == {b1["broker_id"]: True, b2["broker_id"]: False}
            # KIP-380: a heartbeat carrying an old broker epoch is refused
            with pytest.raises(RpcError) as err:
                await heartbeat(client, "splitbrain", {**b2, "broker_epoch": b2["broker_epoch"] - 1})
            assert err.value.code == ResponseCode.STALE_BROKER_EPOCH
            await client.close()

        run(main())


def test_total_failure_needs_manual_recovery_then_mark_clean_restarts(tmp_path: Path) -> None:
    with LocalQuorum(tmp_path) as q:
        q.start_all()
        run(q.wait_leader())

        async def write() -> None:
            client = q.client()
            await register_broker(client, "splitbrain", "s", "10.0.0.1:1")
            await client.close()

        run(write())
        for n in q.node_ids:
            q.kill(n, signal.SIGKILL)
        q.start_all()
        for n in q.node_ids:
            assert wait_exit(q, n) == 3
        assert "manual recovery needed" in q.log_path("c1").read_text()
        cli = [sys.executable, "-m", "harness.cli", "admin", "--json", "store"]
        proc = subprocess.run(cli + ["inspect", *map(str, (q.data_dir(n) for n in q.node_ids))],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        import json

        report = json.loads(proc.stdout)
        assert report["same_cluster"] and all(s["state"] == "dirty" for s in report["stores"])
        proc = subprocess.run(cli + ["mark-clean", report["latest"]], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        q.start_all()

        async def check() -> None:
            await q.wait_leader()
            client = q.client()
            assert (await client.get_replica_info("s"))["body"]["brokers"][0][0] == 1
            await client.close()

        run(check())


def test_failpoint_armed_by_admin_cli_crashes_leader_between_commit_and_reply(tmp_path: Path) -> None:
    """A controller killed after commit but before the reply: the client sees an unknown outcome,
    and the new leader has the write (it was committed)."""
    with LocalQuorum(tmp_path) as q:
        q.start_all()
        leader = run(q.wait_leader())
        env = {**os.environ, "SPLITBRAIN_TOKEN": q.token}
        cli = [sys.executable, "-m", "harness.cli", "admin", "--controllers", ",".join(q.addrs)]
        proc = subprocess.run([*cli, "failpoint", "arm", "controller.after_commit_before_reply", "1*crash",
                               "--node", q.peers[leader]], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        proc = subprocess.run([*cli, "--json", "failpoint", "list", "--node", q.peers[leader]], capture_output=True,
                              text=True, env=env, timeout=60)
        assert '"1*crash"' in proc.stdout

        async def main() -> None:
            client = q.client()
            client.route = client.route.accepted(q.peers[leader])  # aim the write at the armed leader
            from system_under_test.protocol import ConnectionLost as Lost

            with pytest.raises((Lost, RequestTimeout)):
                await client.apply_broker_id("splitbrain", "s", 1, "code-1", "10.0.0.1:1")
            assert wait_exit(q, leader) == 86  # failpoints.CRASH_EXIT_CODE
            await q.wait_leader(exclude={leader})
            # the write was committed before the crash: the same code's retry is idempotent, another code is refused
            await client.apply_broker_id("splitbrain", "s", 1, "code-1", "10.0.0.1:1")
            with pytest.raises(RpcError) as err:
                await client.apply_broker_id("splitbrain", "s", 1, "code-2", "10.0.0.2:1")
            assert err.value.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
            assert await client.get_next_broker_id("splitbrain", "s") == 2
            await client.close()

        run(main())
        proc = subprocess.run([*cli, "--json", "sync-state-set"], capture_output=True, text=True, env=env,
                              timeout=60)
        assert proc.returncode == 0 and '"broker_name": "s"' in proc.stdout, proc.stderr
        proc = subprocess.run([*cli, "broker-epoch"], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("data_dir_gone", [False, True])
def test_sigterm_stops_a_controller_whose_peers_are_dead(tmp_path: Path, data_dir_gone: bool) -> None:
    """An operator's SIGTERM ends the process within seconds even when its peers are gone and, worse, its data
    directory was removed under it (the clean marker cannot be written then: exit status 1, reason logged)."""
    import shutil

    with LocalQuorum(tmp_path) as q:
        q.start_all()
        leader = run(q.wait_leader())
        last = next(n for n in q.node_ids if n != leader)
        for n in q.node_ids:
            if n != last:
                q.kill(n, signal.SIGKILL)
        if data_dir_gone:
            shutil.rmtree(q.data_dir(last))
        q.procs[last].send_signal(signal.SIGTERM)
        code = wait_exit(q, last, timeout_s=60)  # it exits at all without a quorum (a bound for hangs, not a speed)
        if data_dir_gone:
            assert code == 1, q.tail_logs()
            assert "stop failed" in q.log_path(last).read_text()
        else:
            assert code == 0, q.tail_logs()
            assert "wrote clean marker" in q.log_path(last).read_text()


def test_a_member_that_asks_late_joins_peers_that_formed_while_their_raft_starts(tmp_path: Path) -> None:
    """c1 and c3 hear c2 (it answers while its own first round is delayed), form, and hold for 3 s between
    writing the cluster id and starting Raft.  c2 then sees two dirty stores: it must join them, not refuse
    to form as if the whole quorum had crashed (seen once in CI: "no clean store among c3")."""
    with LocalQuorum(tmp_path) as q:
        slow_raft = {"SPLITBRAIN_FAILPOINTS": "controller.formation.formed=1*delay(3000)"}
        for node in ("c1", "c3"):
            q.start(node, env=slow_raft)
        q.start("c2", env={"SPLITBRAIN_FAILPOINTS": "controller.formation.before_round=1*delay(1500)"})
        run(q.wait_leader())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "active (cluster" not in q.log_path("c2").read_text():
            assert q.alive("c2"), q.tail_logs()
            time.sleep(0.1)
        log = q.log_path("c2").read_text()
        assert "joining active member" in log, q.tail_logs()
        assert q.alive("c2")
