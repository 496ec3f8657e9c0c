"""The harness's small protocols, their validating wrappers, and nemesis composition.

Vocabulary (after Jepsen's ``core.clj``):

* **test** -- a plain dict describing the run (spec, nodes, run dir, remote ...), passed to every hook.
* **DB** -- installs/starts the system on one node (``setup``) and removes it (``teardown``); an adapter's DB
  also keeps the spec it was made for (:class:`Specified`; both: :class:`SystemDB`).  Optional
  capabilities are separate protocols: :class:`Kill` (``kill``/``start``), :class:`Pause`
  (``pause``/``resume``), :class:`Primary` (``primaries``), :class:`LogFiles` (``log_files``),
  :class:`NodeHelpers` (``python``), :class:`RegisterClients` (``register_client``), :class:`CounterClients`
  (``counter_client``), :class:`QueueClients` (``queue_client``; with :class:`DeliveryPromise` and
  :class:`LogQueues`), :class:`WireClients` (our cluster's wire protocol: ``client``, ``controller_addrs``,
  ``token``, ``argv``), :class:`Clocks` (``set_clock``/``read_clock``, offered through ``clock-admin`` or
  ``clock-faketime``) and :class:`Registration` (``registration_failpoints``, ``extra_brokers``: brokers started
  beside the cluster, :class:`ExtraBrokerSlots`).
* **options** -- what a system adapter parsed from the spec's ``cluster:`` map (:meth:`systems.System.options`);
  generic harness code reads only :class:`SystemOptions` of it (``version``, ``revision``), and where a system's
  options say more, the small protocol that names it (:class:`LeaseOptions`, :class:`SafetySettings`).
* **capability** -- what a system under test lets the harness do to it, by name: :data:`CAPABILITIES` is the one
  table of those names (a system adapter offers a set of them, :mod:`systems`; each nemesis fault needs some,
  :mod:`nemesis.faults`).
* **client** -- one per worker; ``open`` binds it to a node, ``invoke(test, op)`` performs one
  invocation dict and returns its *completion* dict (type ``ok``/``fail``/``info``).
* **nemesis** -- injects faults; ``fs`` lists the ``f`` values it handles.
* **checker** -- ``check(test, history, opts)`` returns a result whose ``valid`` is ``True``,
  ``False`` or ``"unknown"``.

Ops travelling between the runner, clients and nemeses are plain dicts with at least ``type``,
``process``, ``f`` and ``value`` (the history module turns them into :class:`checker.history.Op`).

Errors::

    HarnessError                   base of harness-level errors
    ├── InvalidCompletion          a client/nemesis returned a malformed completion (lists problems)
    └── MissingCapability          a workload reached a DB for a capability it does not offer (names both)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from checker.history import OP_TYPES

__all__ = [
    "CAPABILITIES",
    "DB",
    "Capability",
    "Clocks",
    "Checker",
    "ClusterRecord",
    "CounterClients",
    "Client",
    "OperatorRecovery",
    "FailpointRefused",
    "FailpointUnreachable",
    "Failpoints",
    "HarnessError",
    "InvalidCompletion",
    "Kill",
    "LogFiles",
    "MissingCapability",
    "Nemesis",
    "NoopNemesis",
    "Pause",
    "Primary",
    "RegisterClients",
    "StoreFiles",
    "NodeEvents",
    "QueueClients",
    "DeliveryPromise",
    "ExtraBrokerSlots",
    "LeaseOptions",
    "LogQueues",
    "NodeHelpers",
    "Registration",
    "RunSpec",
    "SafetySettings",
    "SpecNodes",
    "Specified",
    "SystemDB",
    "SystemOptions",
    "ValidatingClient",
    "ValidatingNemesis",
    "WireClients",
    "compose_nemeses",
    "validate_completion",
    "verdict_of",
]

COMPLETION_TYPES = tuple(t for t in OP_TYPES if t != "invoke")


class HarnessError(Exception):
    """Base class of harness errors."""


class InvalidCompletion(HarnessError):
    """A client or nemesis returned a completion that breaks the op lifecycle.

    Attributes:
        invocation: the op that was invoked.
        completion: what came back.
        problems: one sentence per violated rule.
    """

    def __init__(self, invocation: Mapping[str, Any], completion: Any, problems: Sequence[str]) -> None:
        self.invocation = dict(invocation)
        self.completion = completion
        self.problems = list(problems)
        lines = "\n  - ".join(self.problems)
        super().__init__(
            f"invalid completion for invocation {self.invocation!r}\n  got {completion!r}\n  problems:\n  - {lines}\n"
            "  (a completion must be a dict with type ok|fail|info and the invocation's process and f; "
            "see docs/history-format.md)"
        )


class MissingCapability(HarnessError):
    """A workload reached the system's DB for a capability the DB does not implement.

    Validation refuses a spec whose system lacks a capability its workloads need, before anything starts
    (:func:`workloads.registry.needs`); this is the second line, for a DB that got past it (an adapter declaring a
    capability its DB does not implement, a test's own DB), so that the run stops naming what is missing instead of
    on an ``AttributeError`` deep in a client.

    Attributes:
        db_type: the DB's class, module included (it names the system: ``systems.etcd.db.EtcdDB``).
        user: the workload that asked.
        missing: the capability names (:data:`CAPABILITIES`) or protocols the DB lacks.
    """

    def __init__(self, db: object, user: str, missing: Sequence[str]) -> None:
        self.db_type = f"{type(db).__module__}.{type(db).__qualname__}"
        self.user = user
        self.missing = list(missing)
        super().__init__(f"{user}: the system's DB ({self.db_type}) does not offer {', '.join(self.missing)}, "
                         f"which {user} needs (docs/systems.md, capabilities)")


@runtime_checkable
class DB(Protocol):
    async def setup(self, test: dict[str, Any], node: str) -> None: ...
    async def teardown(self, test: dict[str, Any], node: str) -> None: ...


class SpecNodes(Protocol):
    """The nodes of a run's spec by role, as generic code reads them (:class:`harness.spec.Nodes`, typed here by
    shape because this module sits below the harness layer that defines it)."""

    @property
    def controllers(self) -> Sequence[str]: ...

    @property
    def broker_sets(self) -> Sequence[Sequence[str]]: ...


class RunSpec(Protocol):
    """What generic code reads of the spec a DB was made for (:class:`harness.spec.TestSpec`): its nodes.  Other
    keys (``nemesis``, ``time_limit_s``, ``source``) are read with defaults, because unit tests fake specs
    without them."""

    @property
    def nodes(self) -> SpecNodes: ...


@runtime_checkable
class Specified(Protocol):
    """A DB made for one run's spec, kept as ``spec``: every adapter's (:meth:`systems.System.make_db`).  The
    nemeses read the topology from it (:class:`nemesis.base.NemesisBase`), and :func:`nemesis.packages.build` the
    nemesis mode and the time limit."""

    @property
    def spec(self) -> RunSpec: ...


@runtime_checkable
class SystemDB(DB, Specified, Protocol):
    """The DB a system adapter makes (:meth:`systems.System.make_db`): :class:`DB` plus the spec it was made for
    (:class:`Specified`).  Its optional capabilities are the protocols below."""


@runtime_checkable
class ClusterRecord(Protocol):
    """A DB whose running cluster ``splitbrain cluster up`` and ``test --leave-running`` can record for a later
    process (:func:`harness.commands._clusters.cluster_record`; ours): each node's ``role`` and pid (``pids``), the
    controllers' addresses and the admin ``token`` that ``splitbrain admin --cluster NAME`` reads back."""

    token: str

    @property
    def pids(self) -> Mapping[str, int]: ...
    def role(self, node: str) -> str: ...
    def controller_addrs(self, test: Mapping[str, Any]) -> list[str]: ...


@runtime_checkable
class Kill(Protocol):
    """A DB whose node processes the process nemesis may kill and start again (capability ``kill``): all it calls.

    ``kill`` is SIGKILL, returning once the process is gone; ``start`` starts it on its existing data (a no-op if
    it runs) and returns once it is up far enough to be signalled again -- not necessarily serving, since a node
    restarted while its quorum is down may never be; ``alive`` says whether the process runs (a paused one does);
    ``terminate`` asks for the system's own shutdown (SIGTERM), whose end ``alive`` tells; ``wait_ready`` waits
    until a restarted node serves, raising ``TimeoutError`` naming the node when it does not within ``timeout_s``
    (the DB's own bound when None)."""

    async def kill(self, test: dict[str, Any], node: str) -> None: ...
    async def start(self, test: dict[str, Any], node: str) -> None: ...
    async def alive(self, test: dict[str, Any], node: str) -> bool: ...
    async def terminate(self, test: dict[str, Any], node: str) -> None: ...
    async def wait_ready(self, test: dict[str, Any], node: str, timeout_s: float | None = None) -> None: ...


@runtime_checkable
class Pause(Protocol):
    async def pause(self, test: dict[str, Any], node: str) -> None: ...
    async def resume(self, test: dict[str, Any], node: str) -> None: ...


@runtime_checkable
class Primary(Protocol):
    async def primaries(self, test: dict[str, Any]) -> list[str]: ...


@runtime_checkable
class OperatorRecovery(Protocol):
    """A system whose own recovery can leave a node down after every fault is healed, and what an operator would
    do about it.  RabbitMQ 3.10's autoheal stops the losing side's broker app and, when two heals overlap, may never
    start it again; its mirrored queues then stop on every node, so the final drain cannot decide the run.  The
    runner calls ``recover`` once per node after the recovery wait, before the final phase, and records what it
    did (``results.json`` ``operator_recovery``, and a line of the summary): the run never hides that a node had to
    be brought back by hand.  Not a capability: nothing asks for it; a DB without it is left as it is."""

    async def recover(self, test: dict[str, Any], node: str) -> str | None:
        """Bring ``node`` back if the system left it down: None if it needed nothing, else what was done."""
        ...


@runtime_checkable
class LogFiles(Protocol):
    def log_files(self, test: dict[str, Any], node: str) -> Mapping[str, str]:
        """Map of remote path -> file name under ``nodes/<node>/`` in the run directory."""
        ...


@runtime_checkable
class NodeHelpers(Protocol):
    """A DB whose nodes can run this repository's Python helpers (``python -m nemesis.netqueue``, the packet
    shaper used where the kernel lacks ``sch_netem``): ``python`` is the interpreter to run them with."""

    python: str


@runtime_checkable
class WireClients(Protocol):
    """A DB whose controllers and brokers speak splitbrain's own wire protocol (docs/protocol.md; capability
    ``splitbrain-protocol``): what our cluster's own workloads (``queue``, ``controller-register``, ``broker-ids``,
    ``membership``) call of it.  ``token`` authenticates admin requests; ``controllers`` are the controller nodes,
    ``controller_addrs`` their addresses in that order; ``client`` is a controller client (admin requests, leader
    and replica info); ``argv`` is a broker's command line on a node, from which extra brokers of the same cluster
    are started (:mod:`systems.splitbrain.extra_brokers`)."""

    token: str

    @property
    def controllers(self) -> tuple[str, ...]: ...
    def controller_addrs(self, test: Mapping[str, Any]) -> list[str]: ...
    def client(self, test: Mapping[str, Any], timeout_s: float = ...) -> Any: ...
    def argv(self, test: Mapping[str, Any], node: str) -> list[str]: ...


@runtime_checkable
class RegisterClients(Protocol):
    """A DB that makes clients of independent per-key registers (the generic ``register`` workload,
    :mod:`workloads.register`).  The client handles ``read`` / ``write`` / ``cas`` ops of the ``cas-register``
    shape with the register's name in the op's ``key``; ``read_mode`` is ``linearizable`` (the system's strongest
    read) or ``serializable`` (its weakest: a node may answer from its own, possibly stale, state)."""

    def register_client(self, *, read_mode: str, timeout_s: float) -> Client: ...


@runtime_checkable
class CounterClients(Protocol):
    """A DB that makes clients of one counter (the generic ``counter`` workload, :mod:`workloads.counter`).  The
    client handles ``add`` (value: the delta; ok once applied) and ``read`` (ok value: the total); an add that
    times out or loses its connection is ``info`` (it may have happened), one the system definitely refused
    ``fail``.  ``timeout_s`` bounds one request in the client."""

    def counter_client(self, *, timeout_s: float) -> Client: ...


@runtime_checkable
class Clocks(Protocol):
    """A DB that can set a running node process's clock: what the clock nemesis calls, whichever way the system lets
    it in.  Two capabilities offer it:

    * ``clock-admin`` -- the process reads time through a clock of its own that the system's admin interface sets
      (our cluster: ``system_under_test/clock.py`` and its ADMIN_CLOCK_SET RPC; monotonic and wall time move);
    * ``clock-faketime`` -- the process runs under libfaketime, reading its offset and rate from a control file the
      DB writes (:class:`harness.node_processes.NodeProcesses`).  Only the wall clock (``CLOCK_REALTIME``) of programs
      that read it through the C library moves: not monotonic clocks, and not Go programs such as etcd, which read
      the clock without the C library (docs/nemeses.md).

    ``set_clock`` sets the offset (a step, like a stepped NTP clock), the rate (from now on, continuous), or resets
    both; ``read_clock`` reads what is in force.  Each returns at least ``offset_ms``, ``rate`` and ``skew_ms`` (the
    process's clock minus real time), and raises when the change did not or could not take effect (the node did not
    answer or refused; for libfaketime :class:`harness.node_processes.FaketimeError`: the file could not be written,
    the process is not running, or it was not started under libfaketime) -- so the nemesis reports it as not
    taken, never as done."""

    async def set_clock(self, test: dict[str, Any], node: str, *, offset_ms: float | None = None,
                             rate: float | None = None, reset: bool = False) -> Mapping[str, Any]: ...

    async def read_clock(self, test: dict[str, Any], node: str) -> Mapping[str, Any]: ...


class FailpointUnreachable(HarnessError):
    """A failpoint request was not sent: no connection to the node (so it certainly did not take effect)."""


class FailpointRefused(HarnessError):
    """The node answered a failpoint request with a refusal (an unknown name, a malformed action)."""


@runtime_checkable
class Failpoints(Protocol):
    """A DB whose processes carry named failpoints -- protocol steps that can be made to crash, fail, delay or pause
    at run time (capability ``failpoints``; our cluster: ``splitbrain admin failpoint list``).  What the failpoint
    and disk nemeses call.

    ``set_failpoint`` arms ``name`` with ``action`` (``1*crash``...) on ``node``, or disarms it (``action`` None;
    ``name`` ``*``: all).  It raises :class:`FailpointUnreachable` when nothing was sent and
    :class:`FailpointRefused` when the node said no; any other exception means the request went out and no answer
    came, so it may still take effect (a stopped process reads it when resumed) -- the nemesis treats that node as
    possibly armed.  ``probe_write`` makes one harmless write through the system's replicated write path, so that a
    failpoint on that path is reached (a quiet cluster writes nothing by itself); True if it completed."""

    async def set_failpoint(self, test: dict[str, Any], node: str, name: str, action: str | None) -> None: ...
    async def alive(self, test: dict[str, Any], node: str) -> bool: ...
    async def probe_write(self, test: dict[str, Any]) -> bool: ...


@runtime_checkable
class StoreFiles(Protocol):
    """A DB whose nodes' stores can be damaged while the process is down (capability ``store-files``; the disk
    nemesis).  ``store_tool`` is the argv of the system's own node-side tool for ``node``'s store -- it knows the
    store's format; the nemesis appends ``lose-unfsynced`` or ``corrupt --mode M --seed S`` and reads the one JSON
    line it prints (our cluster: :mod:`systems.splitbrain.store_tool`).  ``lazy_store`` says whether the stores sit
    on a lazy file system (:mod:`nemesis.lazyfs`) that can itself drop every write never fsynced, which
    ``lazyfs_crash`` makes it do for a node that is down."""

    def store_tool(self, test: Mapping[str, Any], node: str) -> list[str]: ...

    @property
    def lazy_store(self) -> bool: ...

    async def lazyfs_crash(self, test: dict[str, Any], node: str) -> dict[str, Any]: ...


@runtime_checkable
class NodeEvents(Protocol):
    """A DB whose nodes report their own events while running (capability ``event-observation``; the observer,
    :mod:`harness.observe`, and through it guided mode and coverage).

    ``node_events`` asks ``node`` for the events it logged after sequence number ``since`` and returns the node's
    answer: ``boot`` (an id that changes when the process restarts, so its log starts again at 1), ``events`` (each
    with ``kind``, its fields and ``mono_ns``, the node's monotonic clock when it happened), ``next`` (the
    ``since`` of the next call) and ``now_ns`` (the node's monotonic clock when it answered).  ``role`` names the
    node's role (``controller``, ``broker``...), which coverage counts separately.  ``close_observation`` releases
    whatever connections the calls kept open.  A node that does not answer raises; the observer counts it and asks
    again next round."""

    def role(self, node: str) -> str: ...
    async def node_events(self, test: Mapping[str, Any], node: str, since: int) -> Mapping[str, Any]: ...
    def close_observation(self) -> None: ...


@runtime_checkable
class QueueClients(Protocol):
    """A DB that makes clients of named FIFO queues or streams (the generic ``generic-queue`` workload,
    :mod:`workloads.generic_queue`, judged as a total queue by :mod:`checker.total_queue`).

    The client's ops (``op["value"]`` of the invocation; the completion keeps it and adds the fields named)::

        send   {"queue": Q, "value": V}   ok: + "position" (optional: the system's id of the record, opaque)
        poll   {"queue": Q, "max": N}     ok: + "records": [[position, value], ...] (at most N, in the order read)
        drain  {"queue": Q}               ok: + "records": every record (a log), or all that is left (a queue)

    ``V`` is a string unique in the test.  A poll *consumes*: a log system (a Redis stream) advances this
    client's own cursor past what it returned; a queue system (RabbitMQ) dequeues and acknowledges it.  The drain
    runs in the final phase, after the heal; a log returns every record from its start, a queue everything left
    until it is empty.  Two records at one position are one record read twice (a re-read log); ``null`` positions
    are separate deliveries.

    Completions: a poll or drain that errors is ``fail`` (a destructive queue redelivers what it delivered and
    never had acknowledged: that shows up as a duplicate, never as a loss); a send that times out or loses its
    connection is ``info`` (it may have happened); a send the system definitely refused is ``fail``.  A completion
    may name, in ``node``, the node whose server took the op, and in ``client_node`` the worker's node, so that a
    lost write is explained by who acknowledged it.  ``timeout_s`` bounds one request in the client; keep it below
    the runner's op timeout so that the client, not the runner, decides between ``fail`` and ``info``.
    """

    def queue_client(self, *, timeout_s: float) -> Client: ...


@runtime_checkable
class DeliveryPromise(Protocol):
    """A queue DB that says whether it promises exactly-once delivery (``exactly_once``): only then is a
    duplicate an anomaly of the generic-queue workload; a DB without this attribute promises at-least-once."""

    exactly_once: bool


@runtime_checkable
class LogQueues(Protocol):
    """A queue DB whose queues are logs (``log``: True): reading does not remove a record and a drain returns
    every record from the start (a Redis stream).  The generic-queue workload then also counts as lost an
    acknowledged send that a poll read but the final drain no longer holds; a DB without this attribute is a
    queue (RabbitMQ: what a poll consumed is gone by design)."""

    log: bool


@runtime_checkable
class ExtraBrokerSlots(Protocol):
    """Broker processes started beside a system's own nodes, one per *slot* (one broker identity, its own store
    directory; restarting a slot on another port is the same broker at a changed address), in a broker set of the
    caller's choosing, on the spec's broker nodes.  What the ``registration-crash`` nemesis and the workloads that
    start brokers of their own call (our cluster: :class:`systems.splitbrain.extra_brokers.ExtraBrokers`).

    ``start_slot`` starts a slot and waits until it serves with a broker id: ``{"broker_id", "broker_epoch",
    "addr", "role"}``, or ``{"refused": True, "log": tail}`` if the process exited first, or ``{"timeout": True,
    "log": tail}``.  ``crash_at`` starts a slot armed to crash at registration failpoint ``failpoint`` and records
    the identity files the crash left: ``{"failpoint", "hit", "files"[, "log"]}``.  ``kill`` (SIGKILL, waiting until
    the process is gone), ``terminate`` (SIGTERM), ``alive``, ``runtime_info`` (the broker's own answer) and
    ``kill_all`` (teardown) act on slots; ``pids`` maps (node, slot) to the running process; ``addr`` is where a
    slot on ``port`` listens."""

    pids: dict[tuple[str, str], int]

    def addr(self, test: Mapping[str, Any], node: str, port: int) -> str: ...
    async def start_slot(self, test: Mapping[str, Any], node: str, slot: str, broker_name: str, port: int, *,
                         timeout_s: float = 8.0) -> dict[str, Any]: ...
    async def crash_at(self, test: Mapping[str, Any], node: str, slot: str, broker_name: str, port: int,
                       failpoint: str, *, timeout_s: float = 8.0) -> dict[str, Any]: ...
    async def kill(self, test: Mapping[str, Any], node: str, slot: str) -> None: ...
    async def terminate(self, test: Mapping[str, Any], node: str, slot: str) -> None: ...
    async def alive(self, test: Mapping[str, Any], node: str, slot: str) -> bool: ...
    async def runtime_info(self, test: Mapping[str, Any], node: str, port: int) -> dict[str, Any]: ...
    async def kill_all(self, test: Mapping[str, Any]) -> None: ...


@runtime_checkable
class Registration(Protocol):
    """A DB whose brokers register themselves through named steps that can be crashed (capability
    ``registration``; the ``registration-crash`` nemesis, :mod:`nemesis.registration`).

    ``registration_failpoints`` are the steps' failpoint names in the order a first start passes them;
    ``first_registration_failpoints`` those only a broker without an identity of its own passes (a restart skips
    them, so crashing there needs a fresh broker).  ``broker_nodes`` are the nodes extra brokers may run on, and
    ``extra_brokers(root)`` makes a set of slots whose store directories live under ``root`` in each node's
    directory (:class:`ExtraBrokerSlots`)."""

    @property
    def registration_failpoints(self) -> tuple[str, ...]: ...

    @property
    def first_registration_failpoints(self) -> frozenset[str]: ...

    @property
    def broker_nodes(self) -> tuple[str, ...]: ...

    def extra_brokers(self, root: str) -> ExtraBrokerSlots: ...


@runtime_checkable
class SystemOptions(Protocol):
    """What generic harness code reads of any system's options (the spec's ``cluster:`` map as its adapter parsed
    it, :meth:`systems.System.options`).

    ``version`` is a label only, never passed to the nodes: results.json records it as the run's
    ``cluster_version`` (:mod:`harness.provenance`).  ``revision`` is a git revision of this repository whose node
    commands the nodes run (:mod:`harness.revisions`); None for a system that runs none of them, and for a run of
    the harness's own checkout."""

    @property
    def version(self) -> str | None: ...

    @property
    def revision(self) -> str | None: ...


@runtime_checkable
class LeaseOptions(Protocol):
    """Options of a system whose brokers hold a lease (``lease_timeout_ms``), from which the availability checker
    derives the bounds a spec does not state (:func:`harness.runner.availability_checker`)."""

    @property
    def lease_timeout_ms(self) -> int: ...


@runtime_checkable
class SafetySettings(Protocol):
    """Options that can name which of their settings make anomalies expected (``unsafe_settings``: a planted bug,
    an unsafe replication mode).  The release gate treats a cell whose options name none, or that do not
    implement this, as a *safety* cell (:func:`harness.gate_outcome.cell_kind`)."""

    @property
    def unsafe_settings(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Capability:
    """One thing a system may let the harness do to it.

    Attributes:
        name: how adapters (:mod:`systems`) and the fault table (:mod:`nemesis.faults`) spell it.
        means: what a system offering it promises, in one sentence.
        protocol: the protocol its DB then implements, where one is declared here; None where the capability is
            still reached through members of our own cluster's DB that no protocol declares yet (issue 29 moves
            those behind protocols step by step).
    """

    name: str
    means: str
    protocol: type | None = None


CAPABILITIES: Mapping[str, Capability] = {c.name: c for c in (
    Capability("kill", "a node's process can be killed at once and started again on the same data", Kill),
    Capability("pause", "a node's process can be stopped (SIGSTOP) and resumed", Pause),
    Capability("network", "its nodes talk over links between their addresses, so the backend can cut, delay and "
                          "drop them (partitions, packet faults)"),
    Capability("primaries", "it can say which nodes lead right now (role selectors such as masters)", Primary),
    Capability("log-files", "it names the log files to collect from each node", LogFiles),
    Capability("clock-admin", "a running process's clock offset and rate can be set over its admin RPC", Clocks),
    Capability("clock-faketime", "its processes run under libfaketime, so a running process's wall-clock offset and "
                                 "rate can be set through a per-node control file", Clocks),
    Capability("failpoints", "named protocol steps can be armed at run time to crash, fail, delay or pause",
               Failpoints),
    Capability("store-files", "a node's store files can be read, cut and corrupted while it is down", StoreFiles),
    Capability("registration", "its broker registration can be crashed at named steps (our cluster's broker)",
               Registration),
    Capability("event-observation", "its nodes report their events while running (guided mode and coverage)",
               NodeEvents),
    Capability("node-helpers", "its nodes can run this repository's Python helpers (the packet shaper where the "
                               "kernel lacks netem)", NodeHelpers),
    Capability("register-client", "it makes clients of per-key read/write/cas registers with linearizable and "
                                  "serializable reads (the register workload)", RegisterClients),
    Capability("counter-client", "it makes clients of one counter: add a delta, read the total (the counter "
                                 "workload)", CounterClients),
    Capability("queue-client", "it makes clients of named FIFO queues or streams: send, poll, drain (the "
                               "generic-queue workload)", QueueClients),
    Capability("splitbrain-protocol", "its controllers and brokers speak splitbrain's own wire protocol, and it makes "
                                      "clients of it (our cluster's own workloads: queue, controller-register, "
                                      "broker-ids, membership)", WireClients),
)}
"""The one table of capability names (see :class:`Capability`)."""


@runtime_checkable
class Client(Protocol):
    async def open(self, test: dict[str, Any], node: str) -> Client: ...
    async def setup(self, test: dict[str, Any]) -> None: ...
    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]: ...
    async def teardown(self, test: dict[str, Any]) -> None: ...
    async def close(self, test: dict[str, Any]) -> None: ...


@runtime_checkable
class Nemesis(Protocol):
    async def setup(self, test: dict[str, Any]) -> Nemesis: ...
    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]: ...
    async def teardown(self, test: dict[str, Any]) -> None: ...
    def fs(self) -> frozenset[str]: ...


@runtime_checkable
class Checker(Protocol):
    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> Any:
        """Return a result with ``valid`` in {True, False, "unknown"} (attribute or dict key)."""
        ...


def verdict_of(result: Any) -> bool | str:
    """The ``valid`` of a checker result (an object with ``.valid`` or a mapping with ``"valid"``)."""
    valid = result.get("valid") if isinstance(result, Mapping) else getattr(result, "valid", "unknown")
    if valid is True or valid is False:
        return valid
    return "unknown"


def validate_completion(invocation: Mapping[str, Any], completion: Any) -> list[str]:
    """Problems with ``completion`` as the answer to ``invocation`` (empty if it is fine)."""
    if not isinstance(completion, Mapping):
        return [f"completion must be a dict, got {type(completion).__name__}"]
    problems = []
    if completion.get("type") not in COMPLETION_TYPES:
        problems.append(f"type must be one of {COMPLETION_TYPES}, got {completion.get('type')!r}")
    if completion.get("process") != invocation.get("process"):
        problems.append(
            f"process must be the invocation's {invocation.get('process')!r}, got {completion.get('process')!r}"
        )
    if completion.get("f") != invocation.get("f"):
        problems.append(f"f must be the invocation's {invocation.get('f')!r}, got {completion.get('f')!r}")
    return problems


class ValidatingClient:
    """Wraps a :class:`Client`; raises :class:`InvalidCompletion` on a malformed completion."""

    def __init__(self, inner: Client) -> None:
        self.inner = inner

    async def open(self, test: dict[str, Any], node: str) -> ValidatingClient:
        return ValidatingClient(await self.inner.open(test, node))

    async def setup(self, test: dict[str, Any]) -> None:
        await self.inner.setup(test)

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        completion = await self.inner.invoke(test, op)
        problems = validate_completion(op, completion)
        if problems:
            raise InvalidCompletion(op, completion, problems)
        return completion

    async def teardown(self, test: dict[str, Any]) -> None:
        await self.inner.teardown(test)

    async def close(self, test: dict[str, Any]) -> None:
        await self.inner.close(test)


class ValidatingNemesis:
    """Wraps a :class:`Nemesis`; checks completions and that ``f`` is one the nemesis declares."""

    def __init__(self, inner: Nemesis) -> None:
        self.inner = inner

    async def setup(self, test: dict[str, Any]) -> ValidatingNemesis:
        return ValidatingNemesis(await self.inner.setup(test))

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        if op.get("f") not in self.inner.fs():
            raise InvalidCompletion(op, None, [f"f {op.get('f')!r} is not handled; known: {sorted(self.inner.fs())}"])
        completion = await self.inner.invoke(test, op)
        problems = validate_completion(op, completion)
        if problems:
            raise InvalidCompletion(op, completion, problems)
        return completion

    async def teardown(self, test: dict[str, Any]) -> None:
        await self.inner.teardown(test)

    def fs(self) -> frozenset[str]:
        return self.inner.fs()


class NoopNemesis:
    """Handles nothing; the nemesis of a fault-free run."""

    async def setup(self, test: dict[str, Any]) -> NoopNemesis:
        return self

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        return {**op, "type": "info", "value": "noop"}

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    def fs(self) -> frozenset[str]:
        return frozenset()


@dataclass
class _ComposedNemesis:
    routes: dict[str, Nemesis]
    members: list[Nemesis]

    async def setup(self, test: dict[str, Any]) -> _ComposedNemesis:
        members = [await m.setup(test) for m in self.members]
        index = {id(old): new for old, new in zip(self.members, members)}
        return _ComposedNemesis({f: index[id(n)] for f, n in self.routes.items()}, members)

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        target = self.routes.get(op.get("f", ""))
        if target is None:
            known = sorted(self.routes)
            raise InvalidCompletion(op, None, [f"no composed nemesis handles f {op.get('f')!r}; known: {known}"])
        return await target.invoke(test, op)

    async def teardown(self, test: dict[str, Any]) -> None:
        for m in self.members:
            await m.teardown(test)

    def fs(self) -> frozenset[str]:
        return frozenset(self.routes)


def compose_nemeses(nemeses: Iterable[Nemesis]) -> Nemesis:
    """One nemesis that routes each op to the member whose ``fs()`` contains its ``f``.

    Raises:
        HarnessError: two members claim the same ``f``.
    """
    members = list(nemeses)
    routes: dict[str, Nemesis] = {}
    for m in members:
        for f in sorted(m.fs()):
            if f in routes:
                raise HarnessError(
                    f"compose_nemeses: f {f!r} is handled by both {type(routes[f]).__name__} and {type(m).__name__}"
                )
            routes[f] = m
    return _ComposedNemesis(routes, members)
