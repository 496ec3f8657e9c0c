"""How a command stops on bad input or a failure of its own: one line on stderr, an exit code, no traceback."""

from __future__ import annotations

import sys

from harness.store import EXIT_UNKNOWN

__all__ = ["refuse"]


def refuse(command: str, problem: object, *, code: int = EXIT_UNKNOWN) -> int:
    """Print ``splitbrain <command>: <problem>`` on stderr and return ``code`` (2, bad input or no verdict, unless
    told otherwise: 255 when the harness itself failed)."""
    print(f"splitbrain {command}: {problem}", file=sys.stderr)
    return code
