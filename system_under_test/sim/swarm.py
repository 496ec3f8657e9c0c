"""Swarm testing for the simulator: each seed runs a random subset of the fault kinds and workloads, at drawn
intensities.

Why (Groce et al., *Swarm Testing*, ISSTA 2012): a run that always enables every feature at fixed intensities
explores less than runs that each enable a random subset -- one fault masks another (a kill restarts the
master before a partition's stale lease can act; a packet fault's drops make a narrow race's messages time
out), and every kind present dilutes the others' share of the schedule.  A swarm seed gives some runs only
partitions, some only pauses and clock skew, some long holds with no overlap, some dense short faults.

The draw is pure and comes from an RNG of its own, seeded from the run's seed alone (:func:`draw`), so the
same seed gives the same draw on any machine and leaves the world's and the nemesis's streams as they were:
a swarm seed replays exactly.  The draw is recorded with the run (``results.json``'s ``swarm``, the sweep's
line) so a failing seed says which faults it ran.

:class:`Intensity` holds the nemesis's knobs; its defaults are the fixed draws of a run without swarm, and a
nemesis given the defaults draws exactly as before (``tests/unit/simulation`` pins default seeds).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PARTITION_SHAPES", "SWARM_SHAPES", "Intensity", "SwarmDraw", "draw"]

PARTITION_SHAPES = ("master-all", "master-slaves", "leader-all", "any-node", "halves")
"""The partition shapes a run without swarm draws (with fixed weights, :func:`faults._draw_partition`)."""

SWARM_SHAPES = (*PARTITION_SHAPES, "master-controllers", "leader-controllers")
"""Every shape a swarm draw may enable: those above, plus the master cut from the controllers only (it keeps
replicating to its slaves while the controller lets its lease lapse: the window of a controller that expires
leases early) and the controller leader cut from the other controllers only (brokers and clients still reach
the deposed leader)."""


@dataclass(frozen=True)
class Intensity:
    """The nemesis's knobs.  The defaults are a run without swarm; ``partition_shapes`` None means that run's
    weighted shape draw, a tuple a uniform choice among the shapes named (each in :data:`SWARM_SHAPES`)."""

    gap_scale: float = 1.0
    """Multiplies the quiet gap before each fault (1-4 s or 5-10 s)."""
    hold_scale: float = 1.0
    """Multiplies how long a fault is held (kills and pauses 1-15 s, others 1-10 s)."""
    overlap: float = 0.3
    """Chance that a second fault joins the first while it is held."""
    packet_loss: tuple[int, ...] = (2, 5, 10, 30)
    packet_duplicate: tuple[int, ...] = (0, 5, 20)
    packet_delay: tuple[int, ...] = (0, 20, 100, 400)
    """Percentages of loss and duplication, and delays (ms: half fixed, half jitter) a packet fault chooses among."""
    clock_rates: tuple[float, ...] = (0.5, 0.8, 1.25, 2.0)
    partition_shapes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("packet_loss", "packet_duplicate", "packet_delay", "clock_rates"):
            if not getattr(self, name):
                raise ValueError(f"Intensity.{name} must not be empty")
        if self.partition_shapes is not None:
            bad = [s for s in self.partition_shapes if s not in SWARM_SHAPES]
            if bad or not self.partition_shapes:
                raise ValueError(f"Intensity.partition_shapes: unknown or none {bad}; known: {', '.join(SWARM_SHAPES)}")
        if not (self.gap_scale > 0 and self.hold_scale > 0 and 0 <= self.overlap <= 1):
            raise ValueError("Intensity: gap_scale and hold_scale must be > 0, overlap in [0, 1]")

    def describe(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class SwarmDraw:
    """What one swarm seed runs: the fault kinds and workloads drawn from the pools, and the intensities."""

    faults: tuple[str, ...]
    workloads: tuple[str, ...]
    intensity: Intensity

    def describe(self) -> dict[str, Any]:
        return {"faults": list(self.faults), "workloads": list(self.workloads), **self.intensity.describe()}

    def label(self) -> str:
        """One short line for a sweep's output."""
        i = self.intensity
        return (f"swarm faults={','.join(self.faults) or 'none'} workloads={','.join(self.workloads)} "
                f"gap x{i.gap_scale:g} hold x{i.hold_scale:g} overlap {i.overlap:g}")


def _subset(rng: random.Random, pool: Sequence[Any], p: float = 0.5) -> tuple[Any, ...]:
    """Each of ``pool`` kept with probability ``p``, at least one (order kept)."""
    if not pool:
        return ()
    kept = tuple(x for x in pool if rng.random() < p)
    return kept or (pool[rng.randrange(len(pool))],)


def draw(seed: int, faults: Sequence[str], workloads: Sequence[str]) -> SwarmDraw:
    """The swarm draw of ``seed`` from the pools ``faults`` and ``workloads`` (pure; ``queue`` is always kept).

    Each fault kind and each workload but ``queue`` is enabled with probability 1/2 (at least one fault kind when
    the pool has any); the gap and hold scales, the overlap, the packet fault's loss, duplication and delay sets,
    the clock rates and the partition shapes are drawn too.  The RNG is seeded from ``seed`` alone.
    """
    rng = random.Random(f"swarm-{int(seed)}")
    kinds = _subset(rng, tuple(faults))
    others = tuple(w for w in workloads if w != "queue")
    chosen = tuple(w for w in others if rng.random() < 0.5)
    wl = ("queue", *chosen) if "queue" in workloads else chosen
    base = Intensity()
    intensity = Intensity(
        gap_scale=rng.choice((0.25, 0.5, 1.0, 1.0)),
        hold_scale=rng.choice((0.5, 1.0, 1.0, 2.0)),
        overlap=rng.choice((0.0, 0.3, 0.6)),
        packet_loss=_subset(rng, base.packet_loss),
        packet_duplicate=_subset(rng, base.packet_duplicate),
        packet_delay=_subset(rng, (*base.packet_delay, 800)),
        clock_rates=_subset(rng, base.clock_rates),
        partition_shapes=_subset(rng, SWARM_SHAPES, p=0.4),
    )
    return SwarmDraw(kinds, wl, intensity)
