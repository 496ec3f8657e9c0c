"""Control backends: how the harness runs commands and daemons on nodes.

Three backends implement :class:`harness.control.base.Remote`: :mod:`harness.control.local` (network
namespaces on this machine), :mod:`harness.control.docker` (one container per node) and
:mod:`harness.control.ssh` (hosts reached over SSH).  See docs/backends.md.
"""

from harness.control.base import CommandFailed, ControlError, ExecResult, NotPermitted, Remote

__all__ = ["CommandFailed", "ControlError", "ExecResult", "NotPermitted", "Remote"]
