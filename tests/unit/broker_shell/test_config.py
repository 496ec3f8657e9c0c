"""BrokerConfig validation and `splitbrain broker` flag handling: every bad value names its flag."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as cli_main
from system_under_test.broker.config import BrokerConfig, BrokerConfigError, FlushMode
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS

BASE: dict[str, Any] = {
    "cluster_name": "c", "broker_name": "b", "listen": "127.0.0.1:9000", "store_dir": "/tmp/x",
    "controllers": ("127.0.0.1:1", "127.0.0.1:2"), "token": "t",
}


def make(**kw: Any) -> BrokerConfig:
    return BrokerConfig(**{**BASE, **kw})


def test_defaults_are_valid() -> None:
    cfg = make()
    assert cfg.all_ack_in_sync_state_set and cfg.flush is FlushMode.ASYNC
    assert cfg.lease_timeout_ms == DEFAULT_LEASE_TIMEOUT_MS and 4 * cfg.heartbeat_interval_ms <= cfg.lease_timeout_ms
    assert cfg.ha_max_time_slave_not_catchup_ms == 3000
    assert "b" in cfg.describe()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.listen = "x:1"  # type: ignore[misc]


BAD = [
    ("cluster_name", "bad name!", "--cluster-name"),
    ("broker_name", "", "--broker-name"),
    ("listen", "nohost", "--listen"),
    ("listen", "127.0.0.1:0", "--listen"),
    ("listen", "127.0.0.1:70000", "--listen"),
    ("controllers", (), "--controllers"),
    ("controllers", ("a:b",), "--controllers"),
    ("token", "", "--token-file"),
    ("store_dir", "", "--store-dir"),
    ("in_sync_replicas", 0, "--in-sync-replicas"),
    ("min_in_sync_replicas", 0, "--min-in-sync-replicas"),
    ("flush", "sync", "--flush"),
    ("flush_slave_timeout_ms", 1, "--flush-slave-timeout-ms"),
    ("ha_max_time_slave_not_catchup_ms", -5, "--ha-max-time-slave-not-catchup-ms"),
    ("heartbeat_interval_ms", 1500, "--heartbeat-interval-ms"),  # more than half the 2000 ms lease
    ("lease_timeout_ms", 50, "--lease-timeout-ms"),
    ("election_priority", -1, "--election-priority"),
    ("segment_bytes", 10, "--segment-bytes"),
    ("bugs", frozenset({"no-such-bug"}), "--bug"),
    ("lease_timeout_ms", 2000.0, "--lease-timeout-ms"),
]


@pytest.mark.parametrize(("field", "value", "flag"), BAD, ids=[f"{f}={v!r}" for f, v, _ in BAD])
def test_bad_value_names_its_flag(field: str, value: Any, flag: str) -> None:
    with pytest.raises(BrokerConfigError) as err:
        make(**{field: value})
    assert flag in str(err.value)
    assert isinstance(err.value, ValueError)


def test_min_in_sync_above_in_sync_refused_only_without_all_ack() -> None:
    make(min_in_sync_replicas=2, in_sync_replicas=1)  # allAck: the whole set is waited for anyway
    with pytest.raises(BrokerConfigError, match="--min-in-sync-replicas"):
        make(min_in_sync_replicas=2, in_sync_replicas=1, all_ack_in_sync_state_set=False)


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    token = tmp_path / "token"
    token.write_text("secret\n")
    return ["broker", "--cluster-name", "c", "--broker-name", "b", "--listen", "127.0.0.1:9000",
            "--store-dir", str(tmp_path / "s"), "--controllers", "127.0.0.1:1", "--token-file", str(token), *extra]


@pytest.mark.parametrize("extra", [
    ["--lease-timeout-ms", "10"],
    ["--heartbeat-interval-ms", "5000"],
    ["--flush", "sometimes"],
    ["--all-ack-in-sync-state-set", "maybe"],
    ["--bug", "unknown"],
], ids=lambda e: " ".join(e))
def test_cli_bad_flags_exit_2(tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = cli_main(_argv(tmp_path, *extra))
    except SystemExit as exc:  # argparse rejects choices/types itself, also with exit code 2
        code = int(exc.code or 0)
    assert code == 2
    assert extra[0] in capsys.readouterr().err


def test_cli_missing_token_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(tmp_path)
    argv[argv.index("--token-file") + 1] = str(tmp_path / "missing")
    assert cli_main(argv) == 2
    assert "--token-file" in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "want"), [
    ([], True),
    (["--all-ack-in-sync-state-set"], True),
    (["--all-ack-in-sync-state-set", "false"], False),
    (["--no-all-ack-in-sync-state-set"], False),
], ids=["default", "bare", "false", "no-flag"])
def test_all_ack_flag_forms(tmp_path: Path, extra: list[str], want: bool) -> None:
    import argparse

    from system_under_test.broker.main import build_config, configure

    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(_argv(tmp_path, *extra)[1:])
    assert build_config(args).all_ack_in_sync_state_set is want


def test_harness_bug_names_are_accepted() -> None:
    cfg = make(bugs=frozenset({"ack-before-replication", "non-atomic-meta"}))
    assert cfg.has_bug("non-atomic-meta") and cfg.has_bug("ack-before-replication")


@pytest.mark.parametrize(("lease", "want_hb"), [(2000, 500), (1000, 250), (100, 25)])
def test_heartbeat_interval_follows_a_short_lease(tmp_path: Path, lease: int, want_hb: int) -> None:
    import argparse

    from system_under_test.broker.main import build_config, configure

    parser = argparse.ArgumentParser()
    configure(parser)
    cfg = build_config(parser.parse_args(_argv(tmp_path, "--lease-timeout-ms", str(lease))[1:]))
    assert (cfg.lease_timeout_ms, cfg.heartbeat_interval_ms) == (lease, want_hb)
