"""The harness's small protocols, their validating wrappers, and nemesis composition.

Vocabulary (after Jepsen's ``core.clj``):

* **test** -- a plain dict describing the run (spec, nodes, run dir, remote ...), passed to every hook.
* **DB** -- installs/starts the system on one node (``setup``) and removes it (``teardown``).  Optional
  capabilities are separate protocols: :class:`Kill` (``kill``/``start``), :class:`Pause`
  (``pause``/``resume``), :class:`Primary` (``primaries``), :class:`LogFiles` (``log_files``),
  :class:`NodeHelpers` (``python``), :class:`RegisterClients` (``register_client``) and :class:`FaketimeClocks`
  (``set_fake_clock``/``fake_clock``).
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
    └── InvalidCompletion          a client/nemesis returned a malformed completion (lists problems)
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
    "FaketimeClocks",
    "Checker",
    "Client",
    "HarnessError",
    "InvalidCompletion",
    "Kill",
    "LogFiles",
    "Nemesis",
    "NoopNemesis",
    "Pause",
    "Primary",
    "RegisterClients",
    "NodeHelpers",
    "ValidatingClient",
    "ValidatingNemesis",
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


@runtime_checkable
class DB(Protocol):
    async def setup(self, test: dict[str, Any], node: str) -> None: ...
    async def teardown(self, test: dict[str, Any], node: str) -> None: ...


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
class RegisterClients(Protocol):
    """A DB that makes clients of independent per-key registers (the generic ``register`` workload,
    :mod:`workloads.register`).  The client handles ``read`` / ``write`` / ``cas`` ops of the ``cas-register``
    shape with the register's name in the op's ``key``; ``read_mode`` is ``linearizable`` (the system's strongest
    read) or ``serializable`` (its weakest: a node may answer from its own, possibly stale, state)."""

    def register_client(self, *, read_mode: str, timeout_s: float) -> Client: ...


@runtime_checkable
class FaketimeClocks(Protocol):
    """A DB whose node processes run under libfaketime, each reading its clock's offset and rate from a control file
    the DB writes (capability ``clock-faketime``; :class:`harness.node_processes.NodeProcesses` implements it).
    Only the wall clock (``CLOCK_REALTIME``) of programs that read it through the C library moves: not monotonic
    clocks, and not Go programs such as etcd, which read the clock without the C library (docs/nemeses.md).

    ``set_fake_clock`` sets the offset (a step, like a stepped NTP clock), the rate (from now on, continuous), or
    resets both and any drift; ``fake_clock`` reads what is in force.  Each returns ``offset_ms``, ``rate``,
    ``skew_ms`` (the process's clock minus real time, as set) and the control file's line, and raises
    :class:`harness.node_processes.FaketimeError` when the change did not or could not take effect (the file could
    not be written, the process is not running, or it was not started under libfaketime)."""

    async def set_fake_clock(self, test: dict[str, Any], node: str, *, offset_ms: float | None = None,
                             rate: float | None = None, reset: bool = False) -> Mapping[str, Any]: ...

    async def fake_clock(self, test: dict[str, Any], node: str) -> Mapping[str, Any]: ...


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
    Capability("clock-admin", "a running process's clock offset and rate can be set over its admin RPC"),
    Capability("clock-faketime", "its processes run under libfaketime, so a running process's wall-clock offset and "
                                 "rate can be set through a per-node control file", FaketimeClocks),
    Capability("failpoints", "named protocol steps can be armed at run time to crash, fail, delay or pause"),
    Capability("store-files", "a node's store files can be read, cut and corrupted while it is down"),
    Capability("registration", "its broker registration can be crashed at named steps (our cluster's broker)"),
    Capability("event-observation", "its nodes report their events while running (guided mode and coverage)"),
    Capability("node-helpers", "its nodes can run this repository's Python helpers (the packet shaper where the "
                               "kernel lacks netem)", NodeHelpers),
    Capability("register-client", "it makes clients of per-key read/write/cas registers with linearizable and "
                                  "serializable reads (the register workload)", RegisterClients),
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
