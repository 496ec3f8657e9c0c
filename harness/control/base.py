"""The Remote interface: how the harness acts on a node, whatever the backend.

A *node* is a name from the spec (``c1``, ``b1-2``).  Backends map it to a network namespace
(local), a container (docker) or a host (ssh).  Every method is async and takes the node first.

Errors::

    ControlError                 base; names the node, the command and what went wrong
    ├── NotPermitted             the backend needs privileges this process lacks (says what to use)
    └── CommandFailed            ``exec(..., check=True)`` saw a non-zero exit (carries the result)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ["CommandFailed", "ControlError", "ExecResult", "NotPermitted", "Remote"]


class ControlError(Exception):
    """A control-backend operation failed."""


class NotPermitted(ControlError):
    """The backend cannot run with this process's privileges."""


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return f"exit {self.exit_code}; stdout {self.stdout[-400:]!r}; stderr {self.stderr[-400:]!r}"


class CommandFailed(ControlError):
    def __init__(self, node: str, argv: Sequence[str], result: ExecResult) -> None:
        self.node, self.argv, self.result = node, list(argv), result
        super().__init__(f"on {node}: {' '.join(argv)!r} failed: {result.describe()}")


@runtime_checkable
class Remote(Protocol):
    """What a control backend offers.  ``env`` entries are added to the node's base environment."""

    async def exec(
        self, node: str, argv: Sequence[str], *, timeout_s: float = 30.0, env: Mapping[str, str] | None = None,
        cwd: str | None = None, check: bool = False,
    ) -> ExecResult:
        """Run a command to completion on ``node``.  Raises CommandFailed if ``check`` and exit != 0,
        ControlError on timeout (the command is killed)."""
        ...

    async def spawn(
        self, node: str, argv: Sequence[str], *, log_path: str, env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> int:
        """Start a daemon on ``node`` with stdout+stderr appended to ``log_path``; returns its pid."""
        ...

    async def upload(self, node: str, local_path: str, remote_path: str) -> None: ...

    async def download(self, node: str, remote_path: str, local_path: str) -> None: ...

    async def signal(self, node: str, pid: int, sig: int) -> None:
        """Send ``sig`` to process ``pid`` on ``node`` (no error if it already exited)."""
        ...

    async def is_alive(self, node: str, pid: int) -> bool: ...

    def address(self, node: str) -> str:
        """The IP address other nodes and the harness use to reach ``node``."""
        ...

    def node_dir(self, node: str) -> Path:
        """The node's working directory (data, logs), as a path on the node."""
        ...
