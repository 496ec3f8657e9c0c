"""The one fault table: one row per nemesis ``f``, from which every other per-``f`` table derives.

Adding a fault used to mean editing parallel tables in several files (the undo map and the value checks of
:mod:`nemesis.schedule`, the heal ops and nemesis classes of :mod:`nemesis.packages`, the words of
:mod:`nemesis.words`), and an ``f`` missing from one of them was skipped without a word by replay and fault
accounting.  Now each ``f`` has one :class:`FaultRow` here, and:

* :mod:`nemesis.schedule` derives ``UNDO``, ``SELF_HEALING_FS``, ``FAULT_FS``, ``UNDO_FS``, ``KNOWN_FS`` and
  its value checks (by :attr:`FaultRow.value`) from it;
* :mod:`nemesis.packages` derives which nemesis class performs an ``f`` (by :attr:`FaultRow.nemesis`), the
  heal ops a run that used the ``f`` ends with, and each package's heal (the heals of the faults it plans);
* :mod:`nemesis.accounting` judges a fault effective by the evidence its row names (:data:`EVIDENCE`; a
  new fault used to be judged effective by default), and it and :mod:`nemesis.replay` raise
  :class:`UnknownFault` for a nemesis op whose ``f`` has no row, instead of skipping it;
* :mod:`nemesis.words` has exactly one entry per row (a unit test holds it to that).

tests/unit/nemesis/test_faults.py fails when any nemesis (a nemesis class's ``FS``, a package's planned
faults and undo steps, the heal ops, the simulator's playable steps) can emit an ``f`` without a row, and
when a row disagrees with the classes or packages it names.

Pure data: nothing here imports a nemesis class or a package (those are shells); rows name them by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["EVIDENCE", "FAULTS", "NEMESES", "ROWS", "VALUE_SHAPES", "FaultRow", "UnknownFault", "row"]

NEMESES = ("partition", "process", "clock", "packet", "failpoint", "disk", "registration")
"""The nemesis families, in the order their classes are built for a run (:mod:`nemesis.packages` maps each to
its class; the order is kept because each class draws from the run's RNG as it is built)."""

VALUE_SHAPES = ("partition", "process", "clock", "packet", "failpoint", "disk", "registration")
"""The shapes a step's ``value`` is checked as (:mod:`nemesis.schedule` has one check per shape)."""

EVIDENCE = ("grudge", "live-nodes", "nodes", "crash-report", "arm-results", "node-report", "registration-crash")
"""What a fault's completion must show to have taken effect (:func:`nemesis.accounting.judge` has one rule per
entry): a non-empty grudge, a live node acted on, a node acted on, a crash at the armed failpoint, a node where
arming succeeded, a per-node report, a registration crash that hit."""

_STOP_PARTITION: tuple[Mapping[str, Any], ...] = ({"f": "stop-partition"},)
_START: tuple[Mapping[str, Any], ...] = ({"f": "start", "value": "dead"},)
"""The final heal starts every node that is down, whatever stopped it (:class:`nemesis.process.ProcessNemesis`)."""
_RESUME: tuple[Mapping[str, Any], ...] = ({"f": "resume"},)
_RESET_CLOCK: tuple[Mapping[str, Any], ...] = ({"f": "reset-clock"},)
_STOP_PACKET: tuple[Mapping[str, Any], ...] = ({"f": "stop-packet"},)
_DISARM: tuple[Mapping[str, Any], ...] = ({"f": "disarm-failpoint", "value": {"targets": "all", "name": "*"}},)
_STOP_DISK: tuple[Mapping[str, Any], ...] = ({"f": "stop-disk"},)


class UnknownFault(ValueError):
    """A nemesis op whose ``f`` has no row: a history from elsewhere, or an ``f`` added to a nemesis without
    its row (tests/unit/nemesis/test_faults.py exists to catch the second before a run does)."""

    def __init__(self, f: Any, where: str = "") -> None:
        self.f = f
        super().__init__(f"{where + ': ' if where else ''}nemesis op f {f!r} has no row in the fault table "
                         f"(nemesis/faults.py); known: {', '.join(sorted(FAULTS))}")


@dataclass(frozen=True)
class FaultRow:
    """One nemesis ``f``.

    Attributes:
        f: the op's name, as schedules, histories and the nemesis classes' ``FS`` spell it.
        nemesis: the family (:data:`NEMESES`) whose nemesis class performs it.
        fault: True for an op that injects something (counted by accounting and coverage, shrunk as a unit);
            False for an undo step or a read (``check-clock-offsets``).
        undo: for a fault, the ``f`` that takes it back; None for a fault that heals itself (it crashes and
            restarts what it hit within the op: ``crash-at``, ``restart``, ``lose-unfsynced``...).
        value: the shape its ``value`` is checked as (:data:`VALUE_SHAPES`); None: the nemesis reads no value.
        heal: the ops the heal phase runs after a run that used this ``f`` (undo whatever it may leave behind).
        packages: the nemesis packages (:data:`nemesis.packages.KINDS`) whose plans inject this fault.
        evidence: for a fault, what its completion must show to count as effective (:data:`EVIDENCE`); a fault
            without it would be counted as effective whatever happened, so the tests require it.
    """

    f: str
    nemesis: str
    fault: bool = True
    undo: str | None = None
    value: str | None = None
    heal: tuple[Mapping[str, Any], ...] = ()
    packages: tuple[str, ...] = ()
    evidence: str | None = None

    @property
    def self_healing(self) -> bool:
        return self.fault and self.undo is None


ROWS: tuple[FaultRow, ...] = (
    # partition
    FaultRow("start-partition", "partition", undo="stop-partition", value="partition", heal=_STOP_PARTITION,
             packages=("partition",), evidence="grudge"),
    FaultRow("stop-partition", "partition", fault=False, heal=_STOP_PARTITION),
    # process
    FaultRow("kill", "process", undo="start", value="process", heal=_START, packages=("kill",),
             evidence="live-nodes"),
    FaultRow("terminate", "process", undo="start", value="process", heal=_START, packages=("kill",),
             evidence="live-nodes"),
    FaultRow("pause", "process", undo="resume", value="process", heal=_RESUME, packages=("pause",),
             evidence="live-nodes"),
    FaultRow("restart", "process", value="process", evidence="live-nodes"),
    FaultRow("start", "process", fault=False, value="process"),
    FaultRow("resume", "process", fault=False, value="process"),
    # clock
    FaultRow("bump-clock", "clock", undo="reset-clock", value="clock", heal=_RESET_CLOCK, packages=("clock",),
             evidence="nodes"),
    FaultRow("skew-clock", "clock", undo="reset-clock", value="clock", heal=_RESET_CLOCK, packages=("clock",),
             evidence="nodes"),
    FaultRow("strobe-clock", "clock", undo="reset-clock", value="clock", heal=_RESET_CLOCK, packages=("clock",),
             evidence="nodes"),
    FaultRow("reset-clock", "clock", fault=False, heal=_RESET_CLOCK),
    FaultRow("check-clock-offsets", "clock", fault=False, heal=_RESET_CLOCK),  # a read: undoes nothing
    # packet
    FaultRow("start-packet", "packet", undo="stop-packet", value="packet", heal=_STOP_PACKET, packages=("packet",),
             evidence="nodes"),
    FaultRow("stop-packet", "packet", fault=False, heal=_STOP_PACKET),
    # disk
    FaultRow("start-disk", "disk", undo="stop-disk", value="disk", heal=_STOP_DISK, packages=("disk", "disk-corrupt"),
             evidence="arm-results"),
    FaultRow("stop-disk", "disk", fault=False, heal=_STOP_DISK),
    FaultRow("lose-unfsynced", "disk", value="disk", heal=_STOP_DISK, packages=("disk", "disk-corrupt"),
             evidence="node-report"),
    FaultRow("corrupt-file", "disk", value="disk", heal=_STOP_DISK, packages=("disk", "disk-corrupt"),
             evidence="node-report"),
    # failpoints
    FaultRow("arm-failpoint", "failpoint", undo="disarm-failpoint", value="failpoint", heal=_DISARM,
             evidence="arm-results"),
    FaultRow("disarm-failpoint", "failpoint", fault=False, value="failpoint", heal=_DISARM),
    FaultRow("crash-at", "failpoint", value="failpoint", heal=_DISARM, packages=("protocol-crash",),
             evidence="crash-report"),
    # registration
    FaultRow("registration-crash", "registration", value="registration", packages=("registration-crash",),
             evidence="registration-crash"),
)
"""Every nemesis ``f``, grouped by family.  See docs/nemeses.md, "Adding a fault"."""

FAULTS: Mapping[str, FaultRow] = {r.f: r for r in ROWS}
"""``f`` -> its row."""


def row(f: Any, where: str = "") -> FaultRow:
    """The row of ``f``.

    Raises:
        UnknownFault: ``f`` has no row (the message names it, and ``where`` it was met).
    """
    r = FAULTS.get(f) if isinstance(f, str) else None
    if r is None:
        raise UnknownFault(f, where)
    return r
