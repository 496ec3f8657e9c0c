"""Live progress of a run: one status line that fits the terminal, or plain status lines when not on one.

Three modes, chosen by :class:`Progress`:

* **terminal** (stderr is a TTY, not ``--quiet``): a rich live line, cut to the terminal's width at a word
  boundary (never wrapped, never cut inside a word), redrawn 4 times a second.  While it is live, log records
  and anything else written to ``sys.stderr`` are printed above the line by the live display instead of
  into the middle of it.
* **plain** (not a TTY, e.g. CI logs, not ``--quiet``): a status line every ``status_every_s`` seconds and
  at each phase change -- a log that shows a stalled run as stalled, not as silence.
* **quiet**: a line when each phase starts and ends.

The line ends with the faults in effect, in words (``faults: isolate b1-3, c2 | kill b1-2, c1``): the
nemesis's history records go through :func:`nemesis.words.step`, which keeps what is in effect, and
:func:`nemesis.words.in_words` says it -- the same words in every mode.  The rate shown is client invocations
per second *of the current phase* (the main phase's is the one the spec's ``rate`` promises; ``results.json``
``load`` has the exact figures, see :mod:`harness.load`).
:meth:`ProgressState.line` is pure given the time: it takes ``now`` and a width, so it is tested as a
function (see ``tests/unit/harness/test_progress.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from nemesis.words import Fault, in_words, step

__all__ = ["Progress", "ProgressState", "fit"]

STATUS_EVERY_S = 10.0  # plain mode: seconds between status lines


@dataclass
class ProgressState:
    phase: str = "setup"
    phase_limit_s: float | None = None
    started: float = field(default_factory=time.monotonic)
    phase_started: float = field(default_factory=time.monotonic)
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "fail": 0, "info": 0})
    invokes: int = 0
    phase_invokes: int = 0  # client invocations since the phase started: the rate shown is this phase's
    effect: tuple[Fault, ...] = ()  # the faults in effect (nemesis.words)

    def line(self, width: int | None = None, *, now: float | None = None) -> str:
        """The status line, at most ``width`` characters (None: no limit).

        Parts go in order of what a reader needs: phase and time, rate, completions, then the faults in
        effect; when the width is short the faults are cut first (at a word boundary, with an ellipsis), then
        the counts are abbreviated, then the rest is cut at a word boundary."""
        now = time.monotonic() if now is None else now
        elapsed = max(0.0, now - self.phase_started)
        limit = f"/{self.phase_limit_s:.0f}s" if self.phase_limit_s else "s"
        rate = self.phase_invokes / max(elapsed, 1e-9)  # since setup would dilute the main phase's rate
        c = self.counts
        head = f"phase {self.phase} {elapsed:5.1f}{limit} | {rate:6.1f} ops/s"
        full = f"{head} | ok {c['ok']} fail {c['fail']} info {c['info']}"
        faults = " | ".join(in_words(self.effect)) or "none"
        text = f"{full} | faults: {faults}"
        if width is None or len(text) <= width:
            return text
        if len(full) + len(" | faults: …") <= width:
            return fit(text, width)
        short = f"{head} | {c['ok']}/{c['fail']}/{c['info']}"
        return short if len(short) <= width else fit(head, width)


_WORD = re.compile(r"\S+")


def fit(text: str, width: int) -> str:
    """``text`` on one line within ``width``: whole if it fits, else its longest run of whole words that leaves
    room for " …" (a dangling "|" separator dropped).  Never cuts inside a word; "…" alone when not even
    the first word fits."""
    one = " ".join(text.splitlines())
    if len(one) <= width:
        return one
    if width <= 0:
        return ""
    end = 0
    for m in _WORD.finditer(one):
        if m.end() + 2 > width:
            break
        if m.group() != "|":
            end = m.end()
    return f"{one[:end]} …" if end else "…"


class _LiveLine:
    """The rich renderable: the state's line at the console's width, on one line."""

    def __init__(self, state: ProgressState) -> None:
        self.state = state

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        yield Text(self.state.line(options.max_width), no_wrap=True, overflow="ellipsis")


class Progress:
    """See the module docstring.  ``stream``/``is_terminal``/``clock`` are for tests (default: stderr, its
    ``isatty()`` and ``time.monotonic``)."""

    def __init__(self, *, quiet: bool, stream: IO[str] | None = None, is_terminal: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, status_every_s: float = STATUS_EVERY_S) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = self.stream.isatty() if is_terminal is None else is_terminal
        self.clock = clock
        self.status_every_s = status_every_s
        self.state = ProgressState(started=clock(), phase_started=clock())
        self._live: Any = None
        self._phases = 0
        self._last_status = clock()
        self._timer: asyncio.TimerHandle | None = None
        self._swapped: list[tuple[logging.StreamHandler[Any], Any]] = []

    @property
    def mode(self) -> str:
        return "quiet" if self.quiet else ("terminal" if self.terminal else "plain")

    def _print(self, text: str) -> None:
        print(f"[splitbrain] {text}", file=self.stream, flush=True)

    def start(self) -> None:
        if self.mode == "terminal":
            from rich.console import Console
            from rich.live import Live

            # redirect_stderr: a print to sys.stderr (a node's log tail, a warning) goes above the line too
            self._live = Live(_LiveLine(self.state), console=Console(file=self.stream), refresh_per_second=4,
                              transient=False, redirect_stderr=True, redirect_stdout=False)
            self._live.start()
            self._route_logs_through(self._live.console)
        elif self.mode == "plain":
            self._schedule()

    def _route_logs_through(self, console: Any) -> None:
        """Log records written to the live line's stream would splice into it: while it is live, every
        handler writing there prints through the console instead (rich draws them above the line)."""

        class _ConsoleFile:
            def write(self, text: str) -> int:
                if text.strip():
                    console.print(text.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
                return len(text)

            def flush(self) -> None:
                pass

        proxy = _ConsoleFile()
        for h in logging.getLogger().handlers:
            if isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) in (self.stream, sys.stderr):
                self._swapped.append((h, h.stream))
                h.setStream(proxy)

    def _schedule(self) -> None:
        """Plain mode: a status line every ``status_every_s`` even when no op completes (a stalled run)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(self.status_every_s, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.clock() - self._last_status >= self.status_every_s * 0.99:
            self._status()
        self._schedule()

    def _status(self) -> None:
        self._last_status = self.clock()
        self._print(self.state.line(now=self.clock()))

    def phase(self, name: str, limit_s: float | None = None) -> None:
        if self.mode != "terminal" and self._phases:  # the phase that ended, with the client rate it achieved
            self._print(f"{self.state.line(now=self.clock())} (done)")
        self._phases += 1
        self.state.phase, self.state.phase_limit_s, self.state.phase_started = name, limit_s, self.clock()
        self.state.phase_invokes = 0
        if self.mode != "terminal":
            self._print(f"phase {name} starts")
            self._last_status = self.clock()
        self.refresh()

    def record(self, op_type: str, process: Any, f: str, value: Any, error: Any = None) -> None:
        """One history record (``error``: the completion's, if any; a fault that failed never took effect)."""
        if op_type == "invoke":
            self.state.invokes += 1
        if process == "nemesis":
            self.state.effect = step(self.state.effect, op_type, f, value, error)
        elif op_type == "invoke":
            self.state.phase_invokes += 1
        elif op_type in self.state.counts:
            self.state.counts[op_type] += 1
        if self.mode == "plain" and self.clock() - self._last_status >= self.status_every_s:
            self._status()

    def refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for handler, stream in self._swapped:
            with contextlib.suppress(Exception):
                handler.setStream(stream)
        self._swapped.clear()
        if self._live is not None:
            self.refresh()
            self._live.stop()
            self._live = None
        elif self.mode != "terminal":
            self._print(self.state.line(now=self.clock()))
