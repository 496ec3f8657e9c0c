"""Live progress of a run (rich), or a line at each phase start and end in quiet mode (CI).

The rate shown is client invocations per second *of the current phase* (the main phase's is the one the
spec's ``rate`` promises; ``results.json`` ``load`` has the exact figures, see :mod:`harness.load`)."""

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
    phase_invokes: int = 0  # client invocations since the phase started: the rate shown is this phase's
    faults: list[str] = field(default_factory=list)

    def __rich__(self) -> str:
        return self.line()

    def line(self) -> str:
        now = time.monotonic()
        elapsed = now - self.phase_started
        limit = f"/{self.phase_limit_s:.0f}s" if self.phase_limit_s else "s"
        rate = self.phase_invokes / max(elapsed, 1e-9)  # since setup would dilute the main phase's rate
        faults = ", ".join(self.faults[-3:]) or "none"
        return (f"phase {self.phase} {elapsed:5.1f}{limit} | {rate:8.1f} client ops/s | ok {self.counts['ok']} "
                f"fail {self.counts['fail']} info {self.counts['info']} | faults: {faults}")


class Progress:
    """``quiet=True`` prints a line when each phase starts and ends to stderr; otherwise a rich live status line."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.state = ProgressState()
        self._live: Any = None
        self._phases = 0

    def start(self) -> None:
        if self.quiet:
            return
        from rich.console import Console
        from rich.live import Live

        # The renderable is the state itself (``__rich__``), so each auto-refresh shows fresh counts.
        self._live = Live(self.state, console=Console(stderr=True), refresh_per_second=4, transient=False)
        self._live.start()

    def phase(self, name: str, limit_s: float | None = None) -> None:
        if self.quiet and self._phases:  # the phase that ended, with the client rate it achieved
            print(f"[splitbrain] {self.state.line()} (done)", file=sys.stderr, flush=True)
        self._phases += 1
        self.state.phase, self.state.phase_limit_s, self.state.phase_started = name, limit_s, time.monotonic()
        self.state.phase_invokes = 0
        if self.quiet:
            print(f"[splitbrain] phase {name} starts", file=sys.stderr, flush=True)
        self.refresh()

    def record(self, op_type: str, process: Any, f: str, value: Any) -> None:
        if op_type == "invoke":
            self.state.invokes += 1
            if process != "nemesis":
                self.state.phase_invokes += 1
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
