"""Control backends: how the harness runs commands and daemons on nodes (local netns; docker and ssh later)."""

from harness.control.base import CommandFailed, ControlError, ExecResult, NotPermitted, Remote

__all__ = ["CommandFailed", "ControlError", "ExecResult", "NotPermitted", "Remote"]
