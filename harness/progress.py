"""Live progress of a run (rich), or one line per phase in quiet mode (CI)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Progress", "ProgressState"]


@dataclass
class ProgressState:
    phase: str = "setup"
    phase_limit_s: float | None = None
    started: float = field(default_factory=time.monotonic)
    phase_started: float = field(default_factory=time.monotonic)
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "fail": 0, "info": 0})
    invokes: int = 0
    faults: list[str] = field(default_factory=list)

    def __rich__(self) -> str:
        return self.line()

    def line(self) -> str:
        now = time.monotonic()
        elapsed = now - self.phase_started
        limit = f"/{self.phase_limit_s:.0f}s" if self.phase_limit_s else "s"
        rate = self.invokes / max(now - self.started, 1e-9)
        faults = ", ".join(self.faults[-3:]) or "none"
        return (f"phase {self.phase} {elapsed:5.1f}{limit} | {rate:8.1f} ops/s | ok {self.counts['ok']} "
                f"fail {self.counts['fail']} info {self.counts['info']} | faults: {faults}")


class Progress:
    """``quiet=True`` prints a line per phase to stderr; otherwise a rich live status line."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.state = ProgressState()
        self._live: Any = None

    def start(self) -> None:
        if self.quiet:
            return
        from rich.console import Console
        from rich.live import Live

        # The renderable is the state itself (``__rich__``), so each auto-refresh shows fresh counts.
        self._live = Live(self.state, console=Console(stderr=True), refresh_per_second=4, transient=False)
        self._live.start()

    def phase(self, name: str, limit_s: float | None = None) -> None:
        self.state.phase, self.state.phase_limit_s, self.state.phase_started = name, limit_s, time.monotonic()
        if self.quiet:
            print(f"[splitbrain] {self.state.line()}", file=sys.stderr, flush=True)
        self.refresh()

    def record(self, op_type: str, process: Any, f: str, value: Any) -> None:
        if op_type == "invoke":
            self.state.invokes += 1
        elif process == "nemesis":
            self.state.faults.append(f"{f} {value!s:.40}")
            del self.state.faults[:-10]
        elif op_type in self.state.counts:
            self.state.counts[op_type] += 1

    def refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def stop(self) -> None:
        if self._live is not None:
            self.refresh()
            self._live.stop()
            self._live = None
            if not sys.stderr.isatty():
                print(file=sys.stderr, flush=True)
        elif self.quiet:
            print(f"[splitbrain] {self.state.line()}", file=sys.stderr, flush=True)
