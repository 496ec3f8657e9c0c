"""The ports a Spark standalone daemon really bound, read from its log.

A test picks free ports for a master and its workers, but a free port can be taken by someone else before the
JVM binds it (another test's Spark driver UI, for one); Spark then binds the next port and says so only in its
log.  Asking the port the test picked would reach the other process -- a CI run once read a driver's HTML page
where it expected the master's JSON.  So the tests read the ports Spark reports.
"""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

from harness.testing.wait import wait_until

__all__ = ["free_port", "start_master", "started_port"]


def started_port(log: Path, service: str, proc: subprocess.Popen[bytes], *, timeout_s: float = 120.0) -> int:
    """The port of ``service`` ('sparkMaster', 'MasterUI', 'WorkerUI') once ``proc``'s ``log`` says it started.

    Raises:
        AssertionError: ``proc`` exited first, or the line did not come within ``timeout_s`` (names the log).
    """
    pattern = re.compile(rf"Successfully started service '{re.escape(service)}' on port (\d+)")
    found: list[int] = []

    def started() -> bool:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise AssertionError(f"{log.name}: the daemon exited ({proc.returncode}) before {service} started:\n"
                                 f"{tail}")
        match = pattern.search(log.read_text(errors="replace")) if log.exists() else None
        if match:
            found.append(int(match.group(1)))
        return bool(found)

    wait_until(started, timeout_s, f"{service} started (see {log})")
    return found[0]


def free_port() -> int:
    """A port free on 127.0.0.1 now (Spark may still find it taken: read the bound port with started_port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_master(spark_class: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    """A standalone master on 127.0.0.1 logging to ``log``: (process, RPC port, web UI port), the ports it bound."""
    with open(log, "wb") as out:
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(free_port()),
             "--webui-port", str(free_port())], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        return master, started_port(log, "sparkMaster", master), started_port(log, "MasterUI", master)
    except BaseException:
        master.kill()
        master.wait()
        raise
