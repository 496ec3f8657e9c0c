"""The one clock every cluster process uses, so the harness can skew it.

Cluster code never calls ``time.time()``/``time.monotonic()`` directly: it asks
:data:`CLOCK` (or a :class:`Clock` passed in).  A clock has an *offset* (added to both wall and
monotonic readings) and a *rate* (how fast its time runs relative to real time), set at start
from the environment (``SPLITBRAIN_CLOCK_OFFSET_MS``, ``SPLITBRAIN_CLOCK_RATE``) or at run time
by the ADMIN_CLOCK_SET RPC.  This is how the clock nemesis bumps, strobes and skews one process
while the host's kernel clock stays untouched.

Changing the rate re-anchors the clock so readings stay continuous at the moment of change;
a *bump* (offset change) is a deliberate discontinuity, exactly what a stepped NTP clock does.
"""

from __future__ import annotations

import os
import random
import threading
import time


class Clock:
    """A skewable clock.  Thread-safe."""

    def __init__(self, offset_ms: float = 0.0, rate: float = 1.0) -> None:
        if rate <= 0:
            raise ValueError(f"clock rate must be > 0, got {rate}")
        self._lock = threading.Lock()
        self._offset_ns = int(offset_ms * 1e6)
        self._rate = float(rate)
        self._anchor_real = time.monotonic_ns()
        self._anchor_virtual = self._anchor_real

    def _virtual_mono_ns(self) -> int:
        real = time.monotonic_ns()
        return self._anchor_virtual + int((real - self._anchor_real) * self._rate)

    def monotonic_ns(self) -> int:
        """Monotonic nanoseconds as this process sees them (rate applied, offset added)."""
        with self._lock:
            return self._virtual_mono_ns() + self._offset_ns

    def monotonic_ms(self) -> int:
        """Monotonic milliseconds (skewed like every reading): what the broker's HA timers compare."""
        return self.monotonic_ns() // 1_000_000

    def monotonic(self) -> float:
        return self.monotonic_ns() / 1e9

    def wall_ns(self) -> int:
        """Wall-clock nanoseconds since the epoch as this process sees them."""
        with self._lock:
            drift = self._virtual_mono_ns() - time.monotonic_ns()
            return time.time_ns() + drift + self._offset_ns

    def wall_ms(self) -> int:
        return self.wall_ns() // 1_000_000

    def set(self, *, offset_ms: float | None = None, rate: float | None = None) -> None:
        """Change offset and/or rate.  ``rate`` must be > 0."""
        with self._lock:
            if rate is not None:
                if rate <= 0:
                    raise ValueError(f"clock rate must be > 0, got {rate}")
                now_virtual = self._virtual_mono_ns()
                self._anchor_real = time.monotonic_ns()
                self._anchor_virtual = now_virtual
                self._rate = float(rate)
            if offset_ms is not None:
                self._offset_ns = int(offset_ms * 1e6)

    def reset(self) -> None:
        """Back to true time (offset 0, rate 1, no accumulated drift)."""
        with self._lock:
            self._offset_ns = 0
            self._rate = 1.0
            self._anchor_real = time.monotonic_ns()
            self._anchor_virtual = self._anchor_real

    def describe(self) -> dict[str, float | int]:
        with self._lock:
            offset_ms = self._offset_ns / 1e6
            rate = self._rate
            drift_ms = (self._virtual_mono_ns() - time.monotonic_ns()) / 1e6
        return {
            "offset_ms": offset_ms,
            "rate": rate,
            "drift_ms": drift_ms,
            "wall_ns": self.wall_ns(),
            "host_wall_ns": time.time_ns(),
            "monotonic_ns": self.monotonic_ns(),
        }


def _from_env() -> Clock:
    def num(name: str, default: float) -> float:
        raw = os.environ.get(name)
        if raw is None or raw == "":
            return default
        try:
            return float(raw)
        except ValueError:
            raise SystemExit(f"environment variable {name} must be a number, got {raw!r}") from None

    return Clock(offset_ms=num("SPLITBRAIN_CLOCK_OFFSET_MS", 0.0), rate=num("SPLITBRAIN_CLOCK_RATE", 1.0))


CLOCK: Clock = _from_env()
"""The process-wide clock."""


def make_rng(seed: int | None = None) -> random.Random:
    """The process's seeded RNG.  ``seed`` None reads SPLITBRAIN_SEED, else uses OS entropy."""
    if seed is None:
        raw = os.environ.get("SPLITBRAIN_SEED")
        seed = int(raw) if raw and raw.lstrip("-").isdigit() else random.SystemRandom().randrange(2**63)
    return random.Random(seed)
