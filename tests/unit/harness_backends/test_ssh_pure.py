"""Pure parts of the ssh backend (shared with docker): target resolution with ~/.ssh/config, nodes
files, argv rewriting, shell command lines, /proc stat parsing, and the spawn/signal shell scripts
(run here with the local /bin/sh against real short-lived processes)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.control.base import ControlError
from harness.control.shell import PID_FILE_SCRIPT, SIGNAL_SCRIPT, SPAWN_SCRIPT, node_argv, parse_proc_stat
from harness.control.ssh import (
    NodesFileError,
    SshTarget,
    load_nodes_file,
    load_nodes_settings,
    resolve_target,
    shell_command,
)

SSH_CONFIG = """\
Host db-*
    User admin
    Port 2222
    IdentityFile ~/.ssh/db_key

Host db-1
    HostName 10.1.2.3

Host *
    User fallback
"""


@pytest.mark.parametrize(("raw", "defaults", "want"), [
    ("db-1", {}, SshTarget("10.1.2.3", 2222, "admin", str(Path("~/.ssh/db_key").expanduser()))),
    ("db-2", {"user": "root"}, SshTarget("db-2", 2222, "admin", str(Path("~/.ssh/db_key").expanduser()))),
    ({"host": "db-1", "user": "me", "port": 22}, {}, SshTarget("10.1.2.3", 22, "me",
                                                                str(Path("~/.ssh/db_key").expanduser()))),
    ("plain", {"port": 2200, "sudo": True}, SshTarget("plain", 2200, "fallback", None, sudo=True)),
    ({"host": "x", "password": "pw"}, {}, SshTarget("x", 22, "fallback", None, password="pw")),
], ids=["alias-hostname", "wildcard-beats-defaults", "explicit-beats-config", "defaults", "password"])
def test_resolve_target_precedence(raw: object, defaults: dict[str, object], want: SshTarget) -> None:
    assert resolve_target("n", raw, defaults=defaults, ssh_config_text=SSH_CONFIG) == want


def test_resolve_target_without_config_uses_defaults() -> None:
    assert resolve_target("n", "h", defaults={"user": "u"}) == SshTarget("h", 22, "u")


@pytest.mark.parametrize("raw", [{"hots": "x"}, {}, {"host": "x", "port": 0}, {"host": "two words"}])
def test_resolve_target_rejects_bad_entries_naming_the_node(raw: object) -> None:
    with pytest.raises(ControlError, match="ssh node c9"):
        resolve_target("c9", raw)


def test_load_nodes_file(tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text("Host alias1\n  HostName 192.0.2.7\n  User bob\n")
    f = tmp_path / "nodes.yaml"
    f.write_text("defaults: {user: root, key_file: /k}\nnodes:\n  c1: alias1\n  c2: {host: 192.0.2.8, sudo: true}\n")
    got = load_nodes_file(f, ssh_config=cfg)
    assert got == {"c1": SshTarget("192.0.2.7", 22, "bob", "/k"), "c2": SshTarget("192.0.2.8", 22, "root", "/k",
                                                                                   sudo=True)}
    f.write_text("nodes: []\n")
    with pytest.raises(NodesFileError, match="non-empty 'nodes' mapping"):
        load_nodes_file(f, ssh_config=cfg)
    f.write_text("nodes: {c1: [\n")
    with pytest.raises(ValueError, match="not valid YAML"):  # NodesFileError is a ValueError too
        load_nodes_file(f, ssh_config=cfg)


def test_node_argv_maps_only_the_harness_interpreter() -> None:
    assert node_argv([sys.executable, "-m", "x"], "/opt/py") == ["/opt/py", "-m", "x"]
    assert node_argv(["python3", "-V"], "/opt/py") == ["python3", "-V"]
    with pytest.raises(ControlError, match="empty argv"):
        node_argv([], "python3")


def test_shell_command_quotes_and_orders_parts() -> None:
    cmd = shell_command(["echo", "a b", "$HOME"], env={"K": "v w"}, cwd="/tmp/x y", timeout_s=5)
    assert cmd == "cd '/tmp/x y' && env 'K=v w' timeout -s KILL 5 echo 'a b' '$HOME'"
    out = subprocess.run(["sh", "-c", shell_command(["sh", "-c", 'echo "$K"; pwd'], env={"K": "v w"}, cwd="/")],
                         capture_output=True, text=True, timeout=10).stdout
    assert out == "v w\n/\n"
    with pytest.raises(ControlError, match="not a valid shell identifier"):
        shell_command(["true"], env={"A-B": "1"})


def test_parse_proc_stat_handles_spaces_and_parens_in_comm() -> None:
    line = "123 (we ird) name) S "  # fields 4..52 follow; field 22 is the start time
    line = line + " ".join(str(i) for i in range(4, 53))
    assert parse_proc_stat(line) == ("S", 22)
    assert parse_proc_stat("garbage") is None


def _sh(script: str, *args: str) -> str:
    return subprocess.run(["sh", "-c", script, "sh", *args], capture_output=True, text=True, timeout=10).stdout


def test_spawn_and_signal_scripts_against_a_real_process(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "d.log"
    out = _sh(SPAWN_SCRIPT, str(log), str(tmp_path), str(tmp_path / "d.pid"), "n0nce", "sh", "-c",
              "echo started; exec sleep 30")
    lines = out.splitlines()
    pid = int(lines[0])
    stat = parse_proc_stat(lines[1])
    assert stat is not None
    start = stat[1]
    try:
        assert (tmp_path / "d.pid").read_text().strip() == str(pid)
        assert (tmp_path / "d.pid.nonce").read_text().strip() == "n0nce"
        # the answer read back from the pid file is the one the spawn printed; another spawn's nonce reads none
        assert _sh(PID_FILE_SCRIPT, str(tmp_path / "d.pid"), "n0nce").splitlines()[0] == str(pid)
        assert _sh(PID_FILE_SCRIPT, str(tmp_path / "d.pid"), "other").strip() == "none"
        assert _sh(PID_FILE_SCRIPT, str(tmp_path / "missing.pid"), "n0nce").strip() == "none"
        assert _sh(SIGNAL_SCRIPT, str(pid), str(start), "0").strip() == "alive"
        assert _sh(SIGNAL_SCRIPT, str(pid), str(start + 1), "9").strip() == "dead"  # wrong start: never signalled
        assert _sh(SIGNAL_SCRIPT, str(pid), str(start), "0").strip() == "alive"
        assert _sh(SIGNAL_SCRIPT, str(pid), str(start), "15").strip() == "alive"
        deadline = time.monotonic() + 15
        while _sh(SIGNAL_SCRIPT, str(pid), str(start), "0").strip() == "alive" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _sh(SIGNAL_SCRIPT, str(pid), str(start), "0").strip() == "dead"
        assert log.read_text() == "started\n"
    finally:
        subprocess.run(["sh", "-c", f"kill -9 {shlex.quote(str(pid))} 2>/dev/null"], check=False)


def test_nodes_settings_python_and_install(tmp_path: Path) -> None:
    f = tmp_path / "nodes.yaml"
    f.write_text("nodes: {c1: 10.0.0.1}\n")
    assert (load_nodes_settings(f).python, load_nodes_settings(f).install) == ("python3", True)
    f.write_text("python: /opt/v/bin/python3\ninstall: false\nnodes: {c1: 10.0.0.1}\n")
    assert (load_nodes_settings(f).python, load_nodes_settings(f).install) == ("/opt/v/bin/python3", False)
    for bad, match in (("install: yes please", "install"), ("python: 'a b'", "python"), ("pyhton: x", "unknown")):
        f.write_text(f"{bad}\nnodes: {{c1: 10.0.0.1}}\n")
        with pytest.raises(NodesFileError, match=match):
            load_nodes_settings(f)


def test_signal_answer_asks_again_on_a_garbled_answer_and_never_reads_it_as_dead() -> None:
    import asyncio

    from harness.control.base import ExecResult
    from harness.control.shell import signal_answer

    def runner(answers: list[str]) -> Any:
        it = iter(answers)

        async def run() -> ExecResult:
            return ExecResult(0, next(it), "")
        return run

    assert asyncio.run(signal_answer(runner(["", "alive\n"]), "n1")) is True
    assert asyncio.run(signal_answer(runner(["garbage", "", "dead\n"]), "n1")) is False
    with pytest.raises(ControlError, match="n1: the process check answered ''"):
        asyncio.run(signal_answer(runner(["", "", ""]), "n1"))


class _LossyShell:
    """A ShellProcesses whose ``_sh`` runs the scripts for real on this machine, but loses the first answer of
    the spawn script (the docker engine's hiccup) -- a pure-enough stand-in for a node reached by a shell."""

    def __init__(self, lose: int) -> None:
        from harness.control.shell import ShellProcesses

        class Shell(ShellProcesses):
            python = sys.executable

            def __init__(self) -> None:
                self.pids = {}
                self.spawn_runs = 0

            async def _sh(self, node: str, script: str, args: Any) -> Any:
                from harness.control.base import ExecResult

                out = _sh(script, *args)
                if script == SPAWN_SCRIPT:
                    self.spawn_runs += 1
                    if self.spawn_runs <= lose:
                        return ExecResult(0, "", "")
                return ExecResult(0, out, "")

            def _default_cwd(self, node: str) -> str:
                return "."

        self.shell = Shell()


def test_a_lost_spawn_answer_is_read_back_from_the_pid_file_not_spawned_twice(tmp_path: Path) -> None:
    import asyncio

    lossy = _LossyShell(lose=1).shell
    pid = asyncio.run(lossy.spawn("n1", ["sh", "-c", "exec sleep 30"], log_path=str(tmp_path / "a.log"),
                                  cwd=str(tmp_path)))
    try:
        assert lossy.spawn_runs == 1 and (tmp_path / "a.log.pid").read_text().splitlines()[0] == str(pid)
        assert asyncio.run(lossy.is_alive("n1", pid))
    finally:
        subprocess.run(["sh", "-c", f"kill -9 {shlex.quote(str(pid))} 2>/dev/null"], check=False)
