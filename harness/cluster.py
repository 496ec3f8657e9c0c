"""The life cycle of the real cluster under test, over any control backend.

:class:`SplitbrainDB` implements the harness's DB protocol and its optional capabilities (Kill,
Pause, Primary, LogFiles) for splitbrain controllers and brokers.  It only talks to nodes through
the :class:`~harness.control.base.Remote` interface, so the same code drives network namespaces,
docker containers and SSH hosts.

Per node it writes the cluster token into the node's directory, spawns the daemon with its log
file next to its data directory, and waits until it is ready: a controller until the quorum has
a leader, a broker until it answers GET_BROKER_RUNTIME_INFO with a broker id.  ``kill`` is
SIGKILL, ``start`` restarts with the same data directory, ``pause``/``resume`` are
SIGSTOP/SIGCONT, ``primaries`` asks the controllers who leads and which brokers are masters.

Cluster options (the spec's ``cluster:`` map) are validated by :func:`cluster_options` before
anything starts; an unknown key or a bad value raises ``SpecError`` naming ``cluster.<key>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.node_processes import NodeProcesses
from harness.spec import SpecError, TestSpec
from system_under_test.client.controller_client import ControllerClient
from system_under_test.lease_timing import DEFAULT_LEASE_TIMEOUT_MS
from system_under_test.protocol import RequestCode, connect

log = logging.getLogger("splitbrain.cluster")

CONTROLLER_PORT = 9101
BROKER_PORT = 10911


@dataclass(frozen=True)
class ClusterOptions:
    """Options of the cluster under test (the spec's ``cluster:`` map).

    Attributes:
        cluster_name: cluster name of controllers and brokers.
        lease_timeout_ms: broker lease (KIP-631 session); shorter = faster failover, more fencing.
        enable_elect_unclean_master: allow electing a broker outside the SyncStateSet (unsafe).
        all_ack_in_sync_state_set: a send is acked only when every SyncStateSet member has it (safe).
        flush: ``sync`` (fsync before ack) or ``async``.
        dirty_recovery: ``raft`` lets a quorum restart after every controller was killed (the
            harness kills whole quorums on purpose); ``manual`` is the seed's strict rule.
        tick_interval_ms / election_ticks: controller Raft timing.
        bugs: deliberately broken behaviours (``--bug`` switches) for proving the checkers work.
        extra_controller_args / extra_broker_args: passed through verbatim.
        version: a label only (e.g. ``0.3.0-rc1``), never passed to the nodes: results.json records it as the
            run's ``cluster_version`` so the Spark warehouse and ``splitbrain spark gate`` can group runs by
            release (:mod:`harness.provenance`); without it the package version is recorded.
        store_fs: ``plain`` (the broker's store directory is a plain directory) or ``lazyfs``: each broker's store
            is mounted through the lazy file system (:mod:`nemesis.lazyfs`) before the broker starts, so writes
            not yet fsynced live only in its memory and ``lose-unfsynced`` really drops them (docs/nemeses.md,
            *Disks*).  Local backend only; :func:`harness.commands._parts.validate_spec` refuses it elsewhere.
        revision: a git revision of this repository whose cluster code the nodes run (``--sut-revision``), while
            clients, nemeses and checkers stay the harness's; None runs the harness's own checkout.  Resolved to
            a full sha and built before the run (:mod:`harness.revisions`, which also says how wire
            compatibility is checked); the resolved spec in ``test.yaml`` holds the sha.
    """

    cluster_name: str = "splitbrain"
    lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS
    enable_elect_unclean_master: bool = False
    all_ack_in_sync_state_set: bool = True
    flush: str = "sync"
    dirty_recovery: str = "raft"
    tick_interval_ms: int = 50
    election_ticks: int = 4
    bugs: tuple[str, ...] = ()
    extra_controller_args: tuple[str, ...] = ()
    extra_broker_args: tuple[str, ...] = ()
    version: str | None = None
    revision: str | None = None
    store_fs: str = "plain"


STORE_FS = ("plain", "lazyfs")

_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
_VERSION_WHAT = ("a version label string: 1-64 chars of [A-Za-z0-9_.+-] starting with a letter or digit "
                 "(quote numbers in YAML: version: \"0.3\")")

_CHECKS: dict[str, tuple[type, str]] = {
    "cluster_name": (str, "1-64 chars of [A-Za-z0-9_.-]"),
    "lease_timeout_ms": (int, "100..600000"),
    "enable_elect_unclean_master": (bool, "true or false"),
    "all_ack_in_sync_state_set": (bool, "true or false"),
    "flush": (str, "sync or async"),
    "dirty_recovery": (str, "raft or manual"),
    "tick_interval_ms": (int, "5..1000"),
    "election_ticks": (int, "2..100"),
    "bugs": (list, "a list of bug names"),
    "extra_controller_args": (list, "a list of strings"),
    "extra_broker_args": (list, "a list of strings"),
    "version": (str, _VERSION_WHAT),
    "revision": (str, "a git revision of this repository (a sha, tag, branch or e.g. HEAD~2)"),
    "store_fs": (str, "plain or lazyfs"),
}


def cluster_options(raw: Mapping[str, Any], *, file: str = "<spec>") -> ClusterOptions:
    """Validate the spec's ``cluster:`` map.

    Raises:
        SpecError: naming ``cluster.<key>``, the value and what is allowed.
    """
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "bugs" and isinstance(value, list):
            unknown = sorted(set(map(str, value)) - KNOWN_BUGS)
            if unknown:
                raise SpecError(file, "cluster.bugs", unknown, f"bug names from {sorted(KNOWN_BUGS)}")
        if key not in _CHECKS:
            raise SpecError(file, f"cluster.{key}", value, f"one of {sorted(_CHECKS)}")
        typ, allowed = _CHECKS[key]
        if typ is int and (type(value) is not int):
            raise SpecError(file, f"cluster.{key}", value, allowed)
        if typ is not int and not isinstance(value, typ):
            raise SpecError(file, f"cluster.{key}", value, allowed)
        values[key] = tuple(str(v) for v in value) if typ is list else value
    ranges = {"lease_timeout_ms": (100, 600_000), "tick_interval_ms": (5, 1000), "election_ticks": (2, 100)}
    for key, (lo, hi) in ranges.items():
        if key in values and not lo <= values[key] <= hi:
            raise SpecError(file, f"cluster.{key}", values[key], _CHECKS[key][1])
    if "revision" in values:
        from harness.revisions import RevisionError, parse_revision_text

        try:
            parse_revision_text(values["revision"], where="cluster.revision")
        except RevisionError:
            raise SpecError(file, "cluster.revision", values["revision"], _CHECKS["revision"][1]) from None
    if "version" in values and not _VERSION_RE.match(values["version"]):
        raise SpecError(file, "cluster.version", values["version"], _VERSION_WHAT)
    if values.get("flush", "sync") not in ("sync", "async"):
        raise SpecError(file, "cluster.flush", values["flush"], "sync or async")
    if values.get("store_fs", "plain") not in STORE_FS:
        raise SpecError(file, "cluster.store_fs", values["store_fs"], _CHECKS["store_fs"][1])
    if values.get("dirty_recovery", "raft") not in ("raft", "manual"):
        raise SpecError(file, "cluster.dirty_recovery", values["dirty_recovery"], "raft or manual")
    return ClusterOptions(**values)


@dataclass
class SplitbrainDB:
    """DB + Kill + Pause + Primary + LogFiles for controllers and brokers (see the module docstring)."""

    spec: TestSpec
    options: ClusterOptions
    command: Sequence[str] = field(default_factory=lambda: [sys.executable, "-m", "harness.cli"])
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    python: str = sys.executable  # the interpreter on the nodes (helpers such as nemesis.netqueue)
    ready_timeout_s: float = 60.0
    procs: NodeProcesses = field(default_factory=lambda: NodeProcesses("node", error=TimeoutError))
    """Each node's controller or broker process (pid, and whether this DB paused it)."""
    lazyfs_pids: dict[str, int] = field(default_factory=dict)  # node -> its store's lazyfs daemon (store_fs: lazyfs)

    @property
    def pids(self) -> dict[str, int]:
        """node -> pid of its controller or broker."""
        return self.procs.pids

    @property
    def paused(self) -> set[str]:
        """Nodes this DB stopped with SIGSTOP and has not continued: a request sent to one is read only when it
        resumes (:func:`nemesis.failpoint.admin_failpoints` does not arm failpoints there)."""
        return self.procs.paused

    # -- topology --------------------------------------------------------------------------

    @property
    def controllers(self) -> tuple[str, ...]:
        return self.spec.nodes.controllers

    def broker_set_of(self, node: str) -> int | None:
        for i, members in enumerate(self.spec.nodes.broker_sets):
            if node in members:
                return i
        return None

    def role(self, node: str) -> str:
        if node in self.controllers:
            return "controller"
        if self.broker_set_of(node) is not None:
            return "broker"
        raise ValueError(f"node {node!r} has no role in the spec")

    def controller_addrs(self, test: Mapping[str, Any]) -> list[str]:
        remote = test["remote"]
        return [f"{remote.address(c)}:{CONTROLLER_PORT}" for c in self.controllers]

    def broker_addr(self, test: Mapping[str, Any], node: str) -> str:
        return f"{test['remote'].address(node)}:{BROKER_PORT}"

    def admin_addr(self, test: Mapping[str, Any], node: str) -> str:
        """Where a node answers admin RPCs (failpoints, clock, status): its own service port."""
        if self.role(node) == "controller":
            return f"{test['remote'].address(node)}:{CONTROLLER_PORT}"
        return self.broker_addr(test, node)

    def client(self, test: Mapping[str, Any], timeout_s: float = 2.0) -> ControllerClient:
        return ControllerClient(self.controller_addrs(test), token=self.token, timeout_s=timeout_s)

    # -- argv --------------------------------------------------------------------------------

    def _dir(self, test: Mapping[str, Any], node: str) -> Path:
        return Path(test["remote"].node_dir(node))

    def store_dir(self, test: Mapping[str, Any], node: str) -> str:
        """A broker's store directory on its node (the disk nemesis operates on it while the broker is down)."""
        return str(self._dir(test, node) / "store")

    def argv(self, test: Mapping[str, Any], node: str) -> list[str]:
        o = self.options
        d = self._dir(test, node)
        if self.role(node) == "controller":
            remote = test["remote"]
            peers = ",".join(f"{c}={remote.address(c)}:{CONTROLLER_PORT}" for c in self.controllers)
            return [
                *self.command, "controller", "--node-id", node, "--peers", peers, "--data-dir", str(d / "data"),
                "--cluster-name", o.cluster_name, "--token-file", str(d / "token"),
                "--lease-timeout-ms", str(o.lease_timeout_ms), "--dirty-recovery", o.dirty_recovery,
                "--tick-interval-ms", str(o.tick_interval_ms), "--election-ticks", str(o.election_ticks),
                "--seed", str(self.spec.seed + self.controllers.index(node)),
                *(["--enable-elect-unclean-master"] if o.enable_elect_unclean_master else []),
                *[a for b in o.bugs if b in CONTROLLER_BUGS for a in ("--bug", b)],
                *o.extra_controller_args,
            ]
        set_index = self.broker_set_of(node)
        return [
            *self.command, "broker", "--cluster-name", o.cluster_name, "--broker-name", f"broker-{set_index}",
            "--listen", self.broker_addr(test, node), "--store-dir", self.store_dir(test, node),
            "--controllers", ",".join(self.controller_addrs(test)), "--token-file", str(d / "token"),
            "--lease-timeout-ms", str(o.lease_timeout_ms), "--flush", o.flush,
            *([] if o.all_ack_in_sync_state_set else ["--no-all-ack-in-sync-state-set"]),
            *[a for b in o.bugs if b not in CONTROLLER_BUGS for a in ("--bug", b)],
            *o.extra_broker_args,
        ]

    # -- DB protocol -------------------------------------------------------------------------

    async def setup(self, test: dict[str, Any], node: str) -> None:
        remote = test["remote"]
        if hasattr(remote, "note_run_dir") and test.get("run_dir"):  # where to save node logs if we are killed
            remote.note_run_dir(test["run_dir"])
        d = self._dir(test, node)
        await remote.exec(node, ["mkdir", "-p", str(d)], check=True)
        token_local = Path(test["run_dir"]) / f".token-{node}"  # one file per node: setups run concurrently
        token_local.write_text(self.token + "\n")
        await remote.upload(node, str(token_local), str(d / "token"))
        token_local.unlink()
        if self.options.store_fs == "lazyfs" and self.role(node) == "broker":
            await self.mount_store(test, node)
        await self.start(test, node)
        await self.wait_ready(test, node)

    # -- the lazy store file system (cluster.store_fs: lazyfs) ----------------------------------------------------

    def lazyfs_paths(self, test: Mapping[str, Any], node: str) -> tuple[str, str, str]:
        """(backing directory, mount point = the store directory, control socket) of a broker's lazyfs.  The socket
        lives in the node's directory unless that path is too long for a unix socket (deep test directories)."""
        d = self._dir(test, node)
        control = str(d / "lazyfs.sock")
        if len(control.encode()) > 100:
            digest = hashlib.sha1(str(d).encode()).hexdigest()[:16]
            control = str(Path(tempfile.gettempdir()) / f"sblazyfs-{digest}.sock")
        return str(d / "store.backing"), self.store_dir(test, node), control

    def _lazyfs_command(self, *args: str) -> list[str]:
        return [self.python, "-m", "nemesis.lazyfs", *args]

    async def mount_store(self, test: dict[str, Any], node: str, timeout_s: float = 20.0) -> None:
        """Mount the broker's store through lazyfs (before the broker first starts; it stays mounted across
        restarts until :meth:`unmount_store`).

        Raises:
            ControlError: the backend cannot mount for a node, or lazyfs did not come up (with its log's tail).
        """
        from harness.control.base import ControlError

        remote = test["remote"]
        if not hasattr(remote, "spawn_host"):
            raise ControlError(f"cluster.store_fs lazyfs: the {type(remote).__name__} backend cannot mount a file "
                               f"system for {node} (local backend only)")
        backing, mountpoint, control = self.lazyfs_paths(test, node)
        await remote.exec(node, ["mkdir", "-p", backing, mountpoint], check=True)
        log_path = str(self._dir(test, node) / "lazyfs.log")
        pid = await remote.spawn_host(node, self._lazyfs_command("mount", backing, mountpoint, "--control", control),
                                      log_path=log_path)
        self.lazyfs_pids[node] = pid
        deadline = time.monotonic() + timeout_s
        while True:
            res = await remote.exec(node, self._lazyfs_command("status", "--control", control), timeout_s=10)
            if res.exit_code == 0:
                log.info("lazyfs on %s: %s over %s (pid %d)", node, mountpoint, backing, pid)
                return
            if not await remote.is_alive(node, pid) or time.monotonic() > deadline:
                tail = Path(log_path).read_text(errors="replace")[-1500:] if Path(log_path).exists() else ""
                await self.unmount_store(test, node)
                raise ControlError(f"lazyfs for {node} did not come up within {timeout_s}s "
                                   f"({res.stderr.strip()[-300:]}); its log:\n{tail}")
            await asyncio.sleep(0.1)

    async def lazyfs_crash(self, test: dict[str, Any], node: str) -> dict[str, Any]:
        """Tell a broker's lazyfs to drop every write not yet fsynced; its JSON report (``dropped`` bytes,
        ``files``)."""
        _, _, control = self.lazyfs_paths(test, node)
        res = await test["remote"].exec(node, self._lazyfs_command("crash", "--control", control), timeout_s=30)
        if res.exit_code != 0:
            raise RuntimeError(f"lazyfs crash on {node} exited {res.exit_code}: {res.stderr.strip()[-400:]}")
        out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
        return out

    async def unmount_store(self, test: dict[str, Any], node: str) -> None:
        """Stop a broker's lazyfs (SIGTERM: it makes what is pending durable and unmounts) and make sure nothing
        stays mounted (bounded: SIGKILL and a lazy unmount after 10 s).  Idempotent."""
        remote = test["remote"]
        pid = self.lazyfs_pids.pop(node, None)
        if pid is not None:
            await remote.signal(node, pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while await remote.is_alive(node, pid) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if await remote.is_alive(node, pid):
                log.warning("lazyfs on %s (pid %d) ignored SIGTERM for 10 s; killing it", node, pid)
                await remote.signal(node, pid, signal.SIGKILL)
        if hasattr(remote, "unmount_host"):
            await remote.unmount_host(node, self.store_dir(test, node))

    async def start(self, test: dict[str, Any], node: str) -> None:
        d = self._dir(test, node)
        pid = await self.procs.spawn(test, node, self.argv(test, node), log_path=str(d / "node.log"), if_alive="spawn")
        log.info("started %s %s (pid %d)", self.role(node), node, pid)

    async def kill(self, test: dict[str, Any], node: str) -> None:
        """SIGKILL and wait (bounded) until the process is really gone.

        Raises:
            TimeoutError: still alive 10 s after SIGKILL.
        """
        await self.procs.stop(test, node, grace_s=0.0, gone_within_s=10.0)

    async def terminate(self, test: dict[str, Any], node: str) -> None:
        """SIGTERM (and SIGCONT, should it be paused): controlled shutdown (brokers move mastership away first)."""
        await self.procs.terminate(test, node)

    async def pause(self, test: dict[str, Any], node: str) -> None:
        await self.procs.pause(test, node)

    async def resume(self, test: dict[str, Any], node: str) -> None:
        await self.procs.resume(test, node)

    def is_paused(self, node: str) -> bool:
        return self.procs.is_paused(node)

    async def alive(self, test: dict[str, Any], node: str) -> bool:
        return await self.procs.alive(test, node)

    async def teardown(self, test: dict[str, Any], node: str) -> None:
        try:
            if await self.alive(test, node):
                await self.kill(test, node)
        finally:
            if node in self.lazyfs_pids:
                await self.unmount_store(test, node)

    def log_files(self, test: dict[str, Any], node: str) -> Mapping[str, str]:
        out = {str(self._dir(test, node) / "node.log"): "node.log"}
        if self.options.store_fs == "lazyfs" and self.broker_set_of(node) is not None:
            out[str(self._dir(test, node) / "lazyfs.log")] = "lazyfs.log"
        return out

    # -- readiness and primaries ---------------------------------------------------------------

    async def wait_ready(self, test: dict[str, Any], node: str, timeout_s: float | None = None) -> None:
        """Wait until ``node`` serves (controller: the quorum has a leader; broker: it has an id).

        Raises:
            TimeoutError: naming the node, its role and its last answer (or that it exited).
        """
        deadline = time.monotonic() + (timeout_s or self.ready_timeout_s)
        last = "no answer yet"
        role = self.role(node)
        addr = (f"{test['remote'].address(node)}:{CONTROLLER_PORT}" if role == "controller"
                else self.broker_addr(test, node))
        while time.monotonic() < deadline:
            if not await self.alive(test, node):
                tail = await test["remote"].exec(node, ["tail", "-n", "60", str(self._dir(test, node) / "node.log")])
                raise TimeoutError(f"{role} {node} exited during start; last lines of its log:\n{tail.stdout}")
            try:
                conn = await connect(addr, timeout_s=1.0)
                try:
                    if role == "controller":
                        md = (await conn.request(RequestCode.CONTROLLER_GET_METADATA_INFO, timeout_s=2)).header
                        last = f"active={md.get('active')} leader={md.get('leader_id')}"
                        if md.get("active") and md.get("leader_id"):
                            return
                    else:
                        info = (await conn.request(RequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=2)).header
                        last = f"{info}"
                        if info.get("broker_id"):
                            return
                finally:
                    conn.close()
            except Exception as exc:
                last = f"{exc.__class__.__name__}: {exc}"
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{role} {node} not ready after {timeout_s or self.ready_timeout_s}s: {last}")

    async def primaries(self, test: dict[str, Any]) -> list[str]:
        """The controller leader and every broker set's master, as node names (asked now)."""
        out: list[str] = []
        client = self.client(test, timeout_s=1.0)
        try:
            addr_to_node = {f"{test['remote'].address(n)}:{CONTROLLER_PORT}": n for n in self.controllers}
            answers = await asyncio.gather(*(client.get_metadata(a) for a in addr_to_node), return_exceptions=True)
            leader_addr = leader_of({a: md for a, md in zip(addr_to_node, answers, strict=True)
                                     if isinstance(md, dict)})
            if leader_addr in addr_to_node:
                out.append(addr_to_node[leader_addr])
            for i, members in enumerate(self.spec.nodes.broker_sets):
                try:
                    info = await client.get_replica_info(f"broker-{i}")
                except Exception:
                    continue
                by_addr = {self.broker_addr(test, n): n for n in members}
                master = by_addr.get(str(info.get("master_addr")))
                if master:
                    out.append(master)
        except Exception as exc:
            log.info("primaries: %s", exc)
        finally:
            await client.close()
        return out


def leader_of(answers: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The controller leader's address from each controller's metadata answer, keyed by the address asked
    (pure).

    Asking one controller is not enough: one cut off from the others (a partition that isolates the old
    leader) answers, but knows no leader, while the other two have elected one.  A controller that says it
    leads wins, the highest term first (an old leader that has not yet stepped down has a lower term);
    failing that, the leader hint of the answer with the highest term."""
    def term(md: Mapping[str, Any]) -> int:
        t = md.get("term")
        return t if isinstance(t, int) else 0

    claims = [(term(md), addr) for addr, md in answers.items() if md.get("is_leader")]
    if claims:
        return max(claims)[1]
    hints = [(term(md), str(md["leader_addr"])) for md in answers.values() if md.get("leader_addr")]
    return max(hints)[1] if hints else None


class _FlagsOnly:
    """Just enough of a Remote to render argv (addresses and directories are placeholders)."""

    def address(self, node: str) -> str:
        return "127.0.0.1"

    def node_dir(self, node: str) -> Path:
        return Path(node)


def node_flags_used() -> dict[str, frozenset[str]]:
    """Every option :meth:`SplitbrainDB.argv` can pass to each node command (``controller``, ``broker``): its argv
    rendered with every switch set.  A revision of the cluster whose node commands lack one is refused before a
    run (:mod:`harness.revisions`).  ``extra_*_args`` are the spec author's and not included."""
    from harness.spec import spec_from_dict

    spec = spec_from_dict({"name": "flags", "nodes": {"controllers": 1, "broker_sets": {"count": 1, "replicas": 1}},
                           "seed": 0})
    options = ClusterOptions(enable_elect_unclean_master=True, all_ack_in_sync_state_set=False,
                             bugs=tuple(sorted(KNOWN_BUGS)))
    db = SplitbrainDB(spec, options, command=["python"])
    test = {"remote": _FlagsOnly()}
    out: dict[str, frozenset[str]] = {}
    for node in (spec.nodes.controllers[0], spec.nodes.broker_sets[0][0]):
        argv = db.argv(test, node)
        out[argv[1]] = frozenset(a for a in argv[2:] if a.startswith("--"))
    return out


CONTROLLER_BUGS = frozenset({"stale-read", "no-epoch-fencing", "reuse-broker-id", "slow-failover"})
BROKER_BUGS = frozenset({"ack-before-replication", "non-atomic-meta"})
KNOWN_BUGS = CONTROLLER_BUGS | BROKER_BUGS
