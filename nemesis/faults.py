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
* :mod:`nemesis.words` has exactly one entry per row (a unit test holds it to that);
* validation (:func:`harness.commands._parts.validate_spec`) refuses a spec whose system does not offer a
  capability its packages need (:func:`package_needs`: the :attr:`FaultRow.needs` of the rows naming the package)
  or guided mode needs (:data:`GUIDED_NEEDS`); what a selector needs is the pool table's
  (:attr:`nemesis.targets.Topology.table`), read at every place a row's value names nodes (:data:`VALUE_SHAPES`);
* guided mode (:mod:`nemesis.guided`) knows which nodes a move aims at from the same places.

tests/unit/nemesis/test_faults.py fails when any nemesis (a nemesis class's ``FS``, a package's planned
faults and undo steps, the heal ops, the simulator's playable steps, guided mode's moves) can emit an ``f``
without a row, when a row disagrees with the classes or packages it names, and when guided mode cannot tell
what a move aims at.

Pure data: nothing here imports a nemesis class or a package (those are shells); rows name them by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EVIDENCE", "FAULTS", "GUIDED_NEEDS", "NEMESES", "ROWS", "VALUE_SHAPES", "AnyOf",
    "FaultRow", "Need", "UnknownFault", "need_met", "need_names", "package_needs", "row",
]

NEMESES = ("partition", "process", "clock", "packet", "failpoint", "disk", "registration")
"""The nemesis families, in the order their classes are built for a run (:mod:`nemesis.packages` maps each to
its class; the order is kept because each class draws from the run's RNG as it is built)."""

VALUE_SHAPES: Mapping[str, tuple[str, ...]] = {
    "partition": ("targets", "from", "to"),
    "process": ("",),
    "clock": ("targets",),
    "packet": ("targets", "to"),
    "failpoint": ("targets",),
    "disk": ("targets",),
    "registration": (),
}
"""The shapes a step's ``value`` is checked as (:mod:`nemesis.schedule` has one check per shape) -> where a value
of that shape names the nodes it hits: the keys holding target selectors (``""``: the value is itself a
selector).  Validation checks those selectors against the system's roles and capabilities, and guided mode reads
from them which nodes a move aims at (:func:`nemesis.schedule.selectors_of`; a partition's kind may aim at a role
by itself: :func:`nemesis.schedule.partition_aims`)."""

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

@dataclass(frozen=True)
class AnyOf:
    """A need any one of several capabilities serves: the clock nemesis sets a process's clock over our admin RPC
    (``clock-admin``) or through libfaketime's control file (``clock-faketime``), whichever the system offers."""

    names: tuple[str, ...]

    def __str__(self) -> str:
        return " or ".join(self.names)


Need = str | AnyOf
"""One entry of :attr:`FaultRow.needs`: a capability name, or alternatives (:class:`AnyOf`)."""


def need_met(need: Need, offered: frozenset[str] | set[str]) -> bool:
    """Whether ``offered`` serves ``need`` (pure)."""
    return need in offered if isinstance(need, str) else any(n in offered for n in need.names)


def need_names(need: Need) -> tuple[str, ...]:
    """The capability names ``need`` mentions (one, or each alternative)."""
    return (need,) if isinstance(need, str) else need.names


# What the nemesis of each family asks of the system (names from harness.protocols.CAPABILITIES).
_NET = ("network",)  # the backend cuts, delays and drops links between the nodes' addresses
_PACKET = ("network", "node-helpers")  # without sch_netem, the shaper runs as `db.python -m nemesis.netqueue`
_KILL = ("kill",)
_PAUSE = ("pause",)
_CLOCK: tuple[Need, ...] = (AnyOf(("clock-admin", "clock-faketime")),)  # our admin RPC, or libfaketime's file
_FAILPOINTS = ("failpoints",)
_CRASH_AT = ("failpoints", "kill")  # arm 1*crash, then start the process that died at the step
_DISK_ARM = ("failpoints", "store-files")  # store.write / before_fsync / read failpoints on the store's paths
_DISK_CUT = ("kill", "store-files")  # kill the broker, then cut or corrupt its store files while it is down
_REGISTRATION = ("registration",)  # drives our broker's registration through its failpoints

GUIDED_NEEDS: tuple[Need, ...] = ()
"""What ``nemesis.mode: guided`` needs of a system beyond its packages' faults: nothing.  It chooses faults from what
it observes while running, and every system's clients report their outcomes in the history; a system that says who
leads (``primaries``, etcd, Redis) adds its leadership changes, one that reports its own events
(``event-observation``, our cluster) far more to aim at and count as coverage (:data:`harness.observe.SOURCES`).  A
system with neither (RabbitMQ) is guided by its clients' outcomes alone (``clients_only`` of
:func:`nemesis.guided.decide`), and its moves are its packages' faults, whose selectors validation checks as for
random mode.  Guided mode without packages is refused on its own (``nemesis.mode``)."""


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
        value: the shape its ``value`` is checked as (:data:`VALUE_SHAPES`, which also says where such a value
            names its nodes); None: the nemesis reads no value.
        heal: the ops the heal phase runs after a run that used this ``f`` (undo whatever it may leave behind).
        packages: the nemesis packages (:data:`nemesis.packages.KINDS`) whose plans inject this fault.
        evidence: for a fault, what its completion must show to count as effective (:data:`EVIDENCE`); a fault
            without it would be counted as effective whatever happened, so the tests require it.
        needs: the capabilities (:data:`harness.protocols.CAPABILITIES`) a system must offer for the nemesis to
            perform it, each a name or alternatives (:class:`AnyOf`: any one serves); a spec whose system lacks
            one is refused before the run instead of failing in it.
    """

    f: str
    nemesis: str
    fault: bool = True
    undo: str | None = None
    value: str | None = None
    heal: tuple[Mapping[str, Any], ...] = ()
    packages: tuple[str, ...] = ()
    evidence: str | None = None
    needs: tuple[Need, ...] = ()

    @property
    def self_healing(self) -> bool:
        return self.fault and self.undo is None

    @property
    def target_keys(self) -> tuple[str, ...]:
        """Where its value names the nodes it hits (:data:`VALUE_SHAPES`; empty for a row without a value)."""
        return VALUE_SHAPES[self.value] if self.value is not None else ()


ROWS: tuple[FaultRow, ...] = (
    # partition
    FaultRow("start-partition", "partition", undo="stop-partition", value="partition", heal=_STOP_PARTITION,
             packages=("partition",), evidence="grudge", needs=_NET),
    FaultRow("stop-partition", "partition", fault=False, heal=_STOP_PARTITION, needs=_NET),
    # process
    FaultRow("kill", "process", undo="start", value="process", heal=_START, packages=("kill",),
             evidence="live-nodes", needs=_KILL),
    FaultRow("terminate", "process", undo="start", value="process", heal=_START, packages=("kill",),
             evidence="live-nodes", needs=_KILL),
    FaultRow("pause", "process", undo="resume", value="process", heal=_RESUME, packages=("pause",),
             evidence="live-nodes", needs=_PAUSE),
    FaultRow("restart", "process", value="process", evidence="live-nodes", needs=_KILL),
    FaultRow("start", "process", fault=False, value="process", needs=_KILL),
    FaultRow("resume", "process", fault=False, value="process", needs=_PAUSE),
    # clock
    FaultRow("bump-clock", "clock", undo="reset-clock", value="clock", heal=_RESET_CLOCK, packages=("clock",),
             evidence="nodes", needs=_CLOCK),
    FaultRow("skew-clock", "clock", undo="reset-clock", value="clock", heal=_RESET_CLOCK, packages=("clock",),
             evidence="nodes", needs=_CLOCK),
    FaultRow("strobe-clock", "clock", undo="reset-clock", value="clock", heal=_RESET_CLOCK, packages=("clock",),
             evidence="nodes", needs=_CLOCK),
    FaultRow("reset-clock", "clock", fault=False, heal=_RESET_CLOCK, needs=_CLOCK),
    FaultRow("check-clock-offsets", "clock", fault=False, heal=_RESET_CLOCK, needs=_CLOCK),  # a read: undoes nothing
    # packet
    FaultRow("start-packet", "packet", undo="stop-packet", value="packet", heal=_STOP_PACKET, packages=("packet",),
             evidence="nodes", needs=_PACKET),
    FaultRow("stop-packet", "packet", fault=False, heal=_STOP_PACKET, needs=_PACKET),
    # disk
    FaultRow("start-disk", "disk", undo="stop-disk", value="disk", heal=_STOP_DISK, packages=("disk", "disk-corrupt"),
             evidence="arm-results", needs=_DISK_ARM),
    FaultRow("stop-disk", "disk", fault=False, heal=_STOP_DISK, needs=_DISK_ARM),
    FaultRow("lose-unfsynced", "disk", value="disk", heal=_STOP_DISK, packages=("disk", "disk-corrupt"),
             evidence="node-report", needs=_DISK_CUT),
    FaultRow("corrupt-file", "disk", value="disk", heal=_STOP_DISK, packages=("disk", "disk-corrupt"),
             evidence="node-report", needs=_DISK_CUT),
    # failpoints
    FaultRow("arm-failpoint", "failpoint", undo="disarm-failpoint", value="failpoint", heal=_DISARM,
             evidence="arm-results", needs=_FAILPOINTS),
    FaultRow("disarm-failpoint", "failpoint", fault=False, value="failpoint", heal=_DISARM, needs=_FAILPOINTS),
    FaultRow("crash-at", "failpoint", value="failpoint", heal=_DISARM, packages=("protocol-crash",),
             evidence="crash-report", needs=_CRASH_AT),
    # registration
    FaultRow("registration-crash", "registration", value="registration", packages=("registration-crash",),
             evidence="registration-crash", needs=_REGISTRATION),
)
"""Every nemesis ``f``, grouped by family.  See docs/nemeses.md, "Adding a fault"."""

FAULTS: Mapping[str, FaultRow] = {r.f: r for r in ROWS}
"""``f`` -> its row."""


def package_needs(package: str) -> tuple[Need, ...]:
    """The capabilities a nemesis package needs: those of every row naming it and of those rows' undo steps (once
    each, in table order; empty for a name no row names)."""
    out: list[Need] = []
    for r in ROWS:
        if package in r.packages:
            for need in (*r.needs, *(FAULTS[r.undo].needs if r.undo else ())):
                if need not in out:
                    out.append(need)
    return tuple(out)


def row(f: Any, where: str = "") -> FaultRow:
    """The row of ``f``.

    Raises:
        UnknownFault: ``f`` has no row (the message names it, and ``where`` it was met).
    """
    r = FAULTS.get(f) if isinstance(f, str) else None
    if r is None:
        raise UnknownFault(f, where)
    return r
