"""docker-compose.yml: valid for Debian's docker-compose, and the cluster shape the docs promise."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
REPO = Path(__file__).resolve().parents[2]


def _config() -> dict:  # type: ignore[type-arg]
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose is not installed")
    res = subprocess.run(["docker-compose", "-f", str(REPO / "docker-compose.yml"), "config"], capture_output=True,
                         text=True, timeout=60, cwd=REPO)
    assert res.returncode == 0, res.stderr
    return yaml.safe_load(res.stdout)  # type: ignore[no-any-return]


def test_compose_config_is_valid_and_has_the_cluster_shape() -> None:
    services = _config()["services"]
    assert sorted(services) == sorted(["c1", "c2", "c3", "b1-1", "b1-2", "b1-3", "b2-1", "b2-2", "b2-3", "control"])
    for name, svc in services.items():
        assert svc["image"].startswith("splitbrain/node:"), name
        assert svc["cap_add"] == ["NET_ADMIN"], name
        assert list(svc["networks"]) == ["splitbrain"], name
    for c in ("c1", "c2", "c3"):
        cmd = services[c]["command"]
        assert cmd[:2] == ["splitbrain", "controller"] and f"--node-id={c}" in cmd
        assert "--peers=c1=c1:9101,c2=c2:9101,c3=c3:9101" in cmd
    for b in ("b1-1", "b1-2", "b1-3", "b2-1", "b2-2", "b2-3"):
        cmd = services[b]["command"]
        assert cmd[:2] == ["splitbrain", "broker"]
        flags = {a.split("=", 1)[0] for a in cmd[2:]}
        assert flags == {"--cluster-name", "--broker-name", "--listen", "--store-dir", "--controllers", "--token-file"}
        assert f"--broker-name=bs{b[1]}" in cmd and f"--listen={b}:9201" in cmd
    assert services["control"]["environment"]["SPLITBRAIN_SSHD"] == "1"


def test_compose_commands_parse_with_the_real_clis() -> None:
    """Every command's flags are accepted by the controller/broker argument parsers."""
    import argparse
    import importlib

    from harness.cli import command_module

    services = _config()["services"]
    for svc in services.values():
        cmd = svc["command"]
        if cmd[0] != "splitbrain":
            continue
        parser = argparse.ArgumentParser()
        importlib.import_module(command_module(cmd[1])).configure(parser)
        parser.parse_args(cmd[2:])  # SystemExit (a test error) on an unknown or missing flag
