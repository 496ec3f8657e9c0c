"""Our cluster's DB: the life cycle of the real controllers and brokers under test, over any control backend.

:class:`SplitbrainDB` implements the harness's DB protocol and the capability protocols our cluster offers
(:mod:`harness.protocols`: Kill, Pause, Primary, LogFiles, Clocks over the admin RPC, Failpoints, StoreFiles,
NodeEvents, Registration) for splitbrain controllers and brokers.  It only talks to nodes through the
:class:`~harness.control.base.Remote` interface, so the same code drives network namespaces, docker containers
and SSH hosts.

Per node it writes the cluster token into the node's directory, spawns the daemon with its log
file next to its data directory, and waits until it is ready: a controller until the quorum has
a leader, a broker until it answers GET_BROKER_RUNTIME_INFO with a broker id.  ``kill`` is
SIGKILL, ``start`` restarts with the same data directory, ``pause``/``resume`` are
SIGSTOP/SIGCONT, ``primaries`` asks the controllers who leads and which brokers are masters.

Its options (the spec's ``cluster:`` map) are :class:`systems.splitbrain.options.ClusterOptions`, validated by
:func:`systems.splitbrain.options.cluster_options` before anything starts.  The ports each node role listens on are
:data:`CONTROLLER_PORT` and :data:`BROKER_PORT`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
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
from harness.protocols import FailpointRefused, FailpointUnreachable
from harness.spec import TestSpec
from system_under_test.broker.registration import FAILPOINTS, FIRST_REGISTRATION_POINTS
from system_under_test.client.controller_client import ControllerClient
from system_under_test.protocol import RequestCode, RpcError, connect
from systems.splitbrain.extra_brokers import ExtraBrokers
from systems.splitbrain.options import CONTROLLER_BUGS, KNOWN_BUGS, ClusterOptions

__all__ = ["BROKER_PORT", "CONTROLLER_PORT", "PROBE_BROKER_SET", "SplitbrainDB", "leader_of", "node_flags_used",
           "quorum_status"]

log = logging.getLogger("splitbrain.cluster")

CONTROLLER_PORT = 9101
BROKER_PORT = 10911
PROBE_BROKER_SET = "nemesis-probe"
"""The broker set :meth:`SplitbrainDB.probe_write` applies ids in: no broker of a test belongs to it."""


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
    _kept_conns: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    """(purpose, node) -> an admin connection the observer's frequent requests reuse (:meth:`_kept`)."""

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

    # -- NodeEvents (event-observation) and the brokers' runtime info ---------------------------

    async def _kept(self, test: Mapping[str, Any], node: str, purpose: str, code: int,
                    header: Mapping[str, Any]) -> dict[str, Any]:
        """One admin request to ``node`` on a connection kept per (purpose, node) -- the observer asks every node
        several times a second -- opened on demand, closed and forgotten when a request fails (the next call dials
        again)."""
        key = (purpose, node)
        conn = self._kept_conns.get(key)
        if conn is None or conn.closed:
            conn = await connect(self.admin_addr(test, node), timeout_s=0.5)
            self._kept_conns[key] = conn
        try:
            return dict((await conn.request(code, dict(header), timeout_s=1.0)).header)
        except Exception:
            conn.close()
            self._kept_conns.pop(key, None)
            raise

    async def node_events(self, test: Mapping[str, Any], node: str, since: int) -> Mapping[str, Any]:
        """The node's event log after ``since`` (ADMIN_EVENTS; :mod:`system_under_test.node_events`)."""
        return await self._kept(test, node, "events", RequestCode.ADMIN_EVENTS, {"since": since})

    async def runtime_info(self, test: Mapping[str, Any], node: str) -> Mapping[str, Any]:
        """A broker's runtime info (GET_BROKER_RUNTIME_INFO: its set, id, role and, for a master, ``slave_lag``)."""
        return await self._kept(test, node, "runtime", RequestCode.GET_BROKER_RUNTIME_INFO, {})

    def close_observation(self) -> None:
        for conn in self._kept_conns.values():
            conn.close()
        self._kept_conns.clear()

    # -- Failpoints ------------------------------------------------------------------------------

    async def set_failpoint(self, test: dict[str, Any], node: str, name: str, action: str | None) -> None:
        """Arm (``action``) or disarm (None) failpoint ``name`` on ``node`` over ADMIN_FAILPOINT_ARM / _DISARM.

        Raises:
            FailpointUnreachable: no connection, nothing sent.
            FailpointRefused: the node answered with an error.
            Exception: anything else (a timeout, a lost connection): sent, no answer -- it may still be applied.
        """
        try:
            conn = await connect(self.admin_addr(test, node), timeout_s=2.0)
        except Exception as exc:
            raise FailpointUnreachable(str(exc)) from exc
        try:
            if action is not None:
                header = {"name": name, "action": action, "token": self.token}
                await conn.request(RequestCode.ADMIN_FAILPOINT_ARM, header, timeout_s=5.0)
            else:
                await conn.request(RequestCode.ADMIN_FAILPOINT_DISARM, {"name": name, "token": self.token},
                                   timeout_s=5.0)
        except RpcError as exc:
            raise FailpointRefused(str(exc)) from exc
        finally:
            conn.close()

    async def probe_write(self, test: dict[str, Any]) -> bool:
        """One harmless replicated controller write: ApplyBrokerId of a fresh id in the broker set
        :data:`PROBE_BROKER_SET`, which no broker ever joins.  It makes the controller leader decide, propose,
        persist, commit, apply and reply -- every step a controller or Raft failpoint sits on."""
        client = self.client(test, timeout_s=1.0)
        try:
            cluster = self.options.cluster_name
            broker_id = await client.get_next_broker_id(cluster, PROBE_BROKER_SET)
            await client.apply_broker_id(cluster, PROBE_BROKER_SET, broker_id, f"probe{secrets.token_hex(4)}",
                                         "127.0.0.1:1")
            return True
        except Exception as exc:  # the leader may be the process a nemesis is crashing
            log.debug("probe write: %r", exc)
            return False
        finally:
            await client.close()

    # -- Registration (registration-crash) ------------------------------------------------------

    @property
    def registration_failpoints(self) -> tuple[str, ...]:
        """Our broker's registration failpoints, in the order a first start passes them."""
        return FAILPOINTS

    @property
    def first_registration_failpoints(self) -> frozenset[str]:
        """The points only a broker without ``.broker.meta`` passes (GetNextBrokerId to the meta rename)."""
        return frozenset(FIRST_REGISTRATION_POINTS)

    @property
    def broker_nodes(self) -> tuple[str, ...]:
        """Every broker node of the spec, set by set: where extra brokers run."""
        return tuple(n for s in self.spec.nodes.broker_sets for n in s)

    def extra_brokers(self, root: str) -> ExtraBrokers:
        """Extra broker processes of this cluster, their slots under ``<node dir>/<root>/`` (a caller's own root
        keeps its slots apart from another's)."""
        return ExtraBrokers(self, root=root)

    # -- Clocks (clock-admin) ------------------------------------------------------------------

    async def _admin(self, test: Mapping[str, Any], node: str, code: int, header: Mapping[str, Any]) -> dict[str, Any]:
        conn = await connect(self.admin_addr(test, node), timeout_s=2.0)
        try:
            return dict((await conn.request(code, dict(header), timeout_s=5.0)).header)
        finally:
            conn.close()

    @staticmethod
    def _clock_reply(reply: Mapping[str, Any]) -> dict[str, Any]:
        return {**reply, "skew_ms": (int(reply["wall_ns"]) - int(reply["host_wall_ns"])) / 1e6}

    async def set_clock(self, test: dict[str, Any], node: str, *, offset_ms: float | None = None,
                        rate: float | None = None, reset: bool = False) -> Mapping[str, Any]:
        """Set ``node``'s process clock over ADMIN_CLOCK_SET (every cluster process reads time through
        ``system_under_test/clock.py``); ``reset``: offset 0, rate 1.  Returns what the process then reports, with
        ``skew_ms``.  Raises whatever the request met (unreachable, refused, no answer): the change is then not
        known to have taken effect."""
        change = {"offset_ms": 0.0, "rate": 1.0} if reset else {
            k: v for k, v in (("offset_ms", offset_ms), ("rate", rate)) if v is not None}
        return self._clock_reply(await self._admin(test, node, RequestCode.ADMIN_CLOCK_SET,
                                                   {**change, "token": self.token}))

    async def read_clock(self, test: dict[str, Any], node: str) -> Mapping[str, Any]:
        """``node``'s process clock as it reports it (ADMIN_CLOCK_GET), with ``skew_ms``."""
        return self._clock_reply(await self._admin(test, node, RequestCode.ADMIN_CLOCK_GET, {}))

    # -- argv --------------------------------------------------------------------------------

    def _dir(self, test: Mapping[str, Any], node: str) -> Path:
        return Path(test["remote"].node_dir(node))

    def store_dir(self, test: Mapping[str, Any], node: str) -> str:
        """A broker's store directory on its node (the disk nemesis operates on it while the broker is down)."""
        return str(self._dir(test, node) / "store")

    def store_tool(self, test: Mapping[str, Any], node: str) -> list[str]:
        """The node-side tool that damages ``node``'s store while the broker is down (the disk nemesis appends
        ``lose-unfsynced`` or ``corrupt --mode M --seed S``): :mod:`systems.splitbrain.store_tool`, which knows the
        commit log's format."""
        return [self.python, "-m", "systems.splitbrain.store_tool", "--store", self.store_dir(test, node)]

    @property
    def lazy_store(self) -> bool:
        """Whether the brokers' stores sit on lazyfs (``cluster.store_fs: lazyfs``), which can drop the writes a broker
        never fsynced (:meth:`lazyfs_crash`)."""
        return self.options.store_fs == "lazyfs"

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

    def node_flags(self) -> dict[str, frozenset[str]]:
        """Every option :meth:`argv` can pass to each node command (:func:`node_flags_used`); a revision of this
        repository whose node commands lack one is refused before a run (``cluster.revision``)."""
        return node_flags_used()

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


async def quorum_status(controllers: Sequence[str], token: str | None) -> str:
    """One line on a running cluster's controller quorum (``splitbrain cluster status``): the leader and whether
    it is active, asked of the controllers at ``controllers`` (addresses), or why nobody answered within 3 s."""
    client = ControllerClient(list(controllers), token=token, timeout_s=1.0)
    try:
        md = await asyncio.wait_for(client.get_metadata(), 3.0)
        return f"leader={md.get('leader_id')} active={md.get('active')}"
    except Exception as exc:
        return f"no answer ({exc.__class__.__name__})"
    finally:
        try:
            await client.close()
        except Exception as exc:  # closing a client that never connected; the status line is already made
            log.debug("quorum_status: close: %r", exc)
