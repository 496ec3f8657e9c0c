"""Extra broker processes: brokers a nemesis or a workload starts beside the spec's cluster.

In a nutshell.  :class:`ExtraBrokers` spawns *extra* broker processes on the spec's broker nodes (their own
store dir under ``<node dir>/<root>/<slot>``, their own port, a broker set name of the caller's choosing)
through the control backend, so the same code runs on network namespaces, docker and SSH hosts.  A *slot* is
one broker identity (one store dir): restarting a slot on another port is "the same broker with a changed
address".

:meth:`ExtraBrokers.start_slot` starts a slot and waits until it serves with a broker id (or exits: ``refused``,
with the tail of its log).  :meth:`ExtraBrokers.crash_at` starts a slot with
``SPLITBRAIN_FAILPOINTS="<point>=1*crash"`` and waits for the failpoint to kill it (the process exits 86 and logs
``FAILPOINT <point>: crash``), then records which identity files the crash left behind (``.broker.meta``,
``.broker.meta.temp`` and their ``.tmp`` halves, each decoded: the id it holds, or ``corrupt``).

Our cluster's DB hands one out for its ``registration`` capability (:meth:`SplitbrainDB.extra_brokers
<systems.splitbrain.db.SplitbrainDB.extra_brokers>`, the protocol :class:`harness.protocols.ExtraBrokerSlots`): the
``registration-crash`` nemesis (:mod:`nemesis.registration`) and the workloads that start brokers of their own
(``broker-ids``, ``membership``) reach it through the DB, so neither imports this module.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Protocol

from system_under_test.broker.registration import FAILPOINTS
from system_under_test.broker.registration.errors import MetaCorruptError
from system_under_test.broker.registration.meta_record import decode_meta, decode_temp_meta
from system_under_test.protocol import RequestCode, connect

__all__ = ["IDENTITY_FILES", "BrokerCommand", "ExtraBrokers", "decode_identity_files", "replace_flag"]

log = logging.getLogger("splitbrain.extra_brokers")

IDENTITY_FILES = (".broker.meta", ".broker.meta.temp", ".broker.meta.tmp", ".broker.meta.temp.tmp")
_LIST_FILES = ('for f in .broker.meta .broker.meta.temp .broker.meta.tmp .broker.meta.temp.tmp; do '
               'if [ -e "$1/$f" ]; then printf "%s " "$f"; base64 -w0 "$1/$f"; printf "\\n"; fi; done')


def replace_flag(argv: Sequence[str], flag: str, value: str) -> list[str]:
    """``argv`` with the value after ``flag`` replaced (pure).

    Raises:
        ValueError: ``flag`` is not in ``argv`` or has no value (names the flag and the argv).
    """
    out = list(argv)
    try:
        i = out.index(flag)
    except ValueError:
        raise ValueError(f"flag {flag} not found in argv {out!r}; expected a broker command line") from None
    if i + 1 >= len(out):
        raise ValueError(f"flag {flag} has no value in argv {out!r}")
    out[i + 1] = value
    return out


def decode_identity_files(listing: str) -> dict[str, dict[str, Any]]:
    """Decode the ``name base64`` lines of :data:`_LIST_FILES` into {name: {"broker_id": I} | {"corrupt": msg}}."""
    out: dict[str, dict[str, Any]] = {}
    for line in listing.splitlines():
        name, _, b64 = line.strip().partition(" ")
        if name not in IDENTITY_FILES:
            continue
        try:
            data = base64.b64decode(b64, validate=True)
        except ValueError as exc:
            out[name] = {"corrupt": f"not base64: {exc}"}
            continue
        try:
            temp = name.startswith(".broker.meta.temp")
            rec: Any = decode_temp_meta(data, where=name) if temp else decode_meta(data, where=name)
            out[name] = {"broker_id": rec.broker_id, "bytes": len(data)}
        except (MetaCorruptError, ValueError) as exc:
            out[name] = {"corrupt": str(exc)[:200], "bytes": len(data)}
    return out


class BrokerCommand(Protocol):
    """What :class:`ExtraBrokers` needs of its DB: the broker command line of a broker node, whose
    ``--broker-name``, ``--listen`` and ``--store-dir`` it replaces per slot."""

    def argv(self, test: Mapping[str, Any], node: str) -> list[str]: ...


@dataclass
class ExtraBrokers:
    """Spawns and tracks extra broker processes (see the module docstring).  Shell: talks to ``test["remote"]``."""

    db: BrokerCommand
    root: str = "extra"
    pids: dict[tuple[str, str], int] = field(default_factory=dict)

    def slot_dir(self, test: Mapping[str, Any], node: str, slot: str) -> PurePosixPath:
        return PurePosixPath(str(test["remote"].node_dir(node))) / self.root / slot

    def addr(self, test: Mapping[str, Any], node: str, port: int) -> str:
        return f"{test['remote'].address(node)}:{port}"

    def argv(self, test: Mapping[str, Any], node: str, slot: str, broker_name: str, port: int) -> list[str]:
        argv = self.db.argv(test, node)
        argv = replace_flag(argv, "--broker-name", broker_name)
        argv = replace_flag(argv, "--listen", self.addr(test, node, port))
        return replace_flag(argv, "--store-dir", str(self.slot_dir(test, node, slot) / "store"))

    def log_path(self, test: Mapping[str, Any], node: str, slot: str) -> str:
        return str(self.slot_dir(test, node, slot) / "node.log")

    async def _log_size(self, test: Mapping[str, Any], node: str, slot: str) -> int:
        res = await test["remote"].exec(node, ["sh", "-c", 'wc -c < "$1" 2>/dev/null || echo 0', "sh",
                                               self.log_path(test, node, slot)])
        try:
            return int(res.stdout.strip() or 0)
        except ValueError:
            return 0

    async def log_since(self, test: Mapping[str, Any], node: str, slot: str, offset: int, limit: int = 4000) -> str:
        res = await test["remote"].exec(node, ["tail", "-c", f"+{offset + 1}", self.log_path(test, node, slot)])
        return str(res.stdout)[-limit:]

    async def spawn(self, test: Mapping[str, Any], node: str, slot: str, broker_name: str, port: int,
                    env: Mapping[str, str] | None = None) -> int:
        """Start the slot's broker (after killing a previous process of the slot); returns the log offset."""
        await self.kill(test, node, slot)
        remote = test["remote"]
        await remote.exec(node, ["mkdir", "-p", str(self.slot_dir(test, node, slot) / "store")], check=True)
        offset = await self._log_size(test, node, slot)
        pid = await remote.spawn(node, self.argv(test, node, slot, broker_name, port),
                                 log_path=self.log_path(test, node, slot), env=dict(env or {}))
        self.pids[(node, slot)] = pid
        return offset

    async def alive(self, test: Mapping[str, Any], node: str, slot: str) -> bool:
        pid = self.pids.get((node, slot))
        return pid is not None and bool(await test["remote"].is_alive(node, pid))

    async def kill(self, test: Mapping[str, Any], node: str, slot: str) -> None:
        """SIGKILL the slot's process (if any) and wait (bounded, 10 s) until it is gone."""
        pid = self.pids.get((node, slot))
        if pid is None:
            return
        remote = test["remote"]
        await remote.signal(node, pid, 9)
        for _ in range(500):
            if not await remote.is_alive(node, pid):
                break
            await asyncio.sleep(0.02)
        self.pids.pop((node, slot), None)

    async def terminate(self, test: Mapping[str, Any], node: str, slot: str) -> None:
        pid = self.pids.get((node, slot))
        if pid is not None:
            await test["remote"].signal(node, pid, 15)

    async def kill_all(self, test: Mapping[str, Any]) -> None:
        for node, slot in list(self.pids):
            try:
                await self.kill(test, node, slot)
            except Exception as exc:  # teardown goes on; the backend reaps leftovers
                log.warning("killing extra broker %s/%s: %r", node, slot, exc)

    async def files(self, test: Mapping[str, Any], node: str, slot: str) -> dict[str, dict[str, Any]]:
        store = str(self.slot_dir(test, node, slot) / "store")
        res = await test["remote"].exec(node, ["sh", "-c", _LIST_FILES, "sh", store])
        return decode_identity_files(str(res.stdout))

    async def runtime_info(self, test: Mapping[str, Any], node: str, port: int) -> dict[str, Any]:
        conn = await connect(self.addr(test, node, port), timeout_s=1.0)
        try:
            return dict((await conn.request(RequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=1.0)).header)
        finally:
            conn.close()

    async def crash_at(self, test: Mapping[str, Any], node: str, slot: str, broker_name: str, port: int,
                       failpoint: str, *, timeout_s: float = 8.0) -> dict[str, Any]:
        """Start the slot armed to crash at ``failpoint``; wait for the crash; record the identity files.

        Returns ``{"failpoint", "hit", "files"[, "log"]}``; ``hit`` is False if the process had not crashed at the
        point within ``timeout_s`` (it is then killed, and ``log`` holds its log tail).
        """
        if failpoint not in FAILPOINTS:
            raise ValueError(f"unknown registration failpoint {failpoint!r}; expected one of {FAILPOINTS}")
        offset = await self.spawn(test, node, slot, broker_name, port,
                                  {"SPLITBRAIN_FAILPOINTS": f"{failpoint}=1*crash"})
        deadline = time.monotonic() + timeout_s
        while await self.alive(test, node, slot) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        still = await self.alive(test, node, slot)
        await self.kill(test, node, slot)
        text = await self.log_since(test, node, slot, offset)
        hit = not still and f"FAILPOINT {failpoint}: crash" in text
        out: dict[str, Any] = {"failpoint": failpoint, "hit": hit, "files": await self.files(test, node, slot)}
        if not hit:
            out["log"] = text[-1500:]
        return out

    async def start_slot(self, test: Mapping[str, Any], node: str, slot: str, broker_name: str,
                         port: int, *, timeout_s: float = 8.0) -> dict[str, Any]:
        """Start the slot and wait until it serves with a broker id.

        Returns ``{"broker_id", "broker_epoch", "addr", "role"}``; ``{"refused": True, "log": tail}`` if the process
        exited first; ``{"timeout": True, "log": tail}`` (process killed) if neither happened within ``timeout_s``.
        """
        offset = await self.spawn(test, node, slot, broker_name, port)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not await self.alive(test, node, slot):
                await asyncio.sleep(0.1)  # let the last log lines land
                return {"refused": True, "addr": self.addr(test, node, port),
                        "log": (await self.log_since(test, node, slot, offset))[-1500:]}
            try:
                info = await self.runtime_info(test, node, port)
            except Exception:
                info = {}
            if info.get("broker_id"):
                return {"broker_id": int(info["broker_id"]), "broker_epoch": info.get("broker_epoch"),
                        "addr": self.addr(test, node, port), "role": info.get("role")}
            await asyncio.sleep(0.1)
        await self.kill(test, node, slot)
        return {"timeout": True, "addr": self.addr(test, node, port),
                "log": (await self.log_since(test, node, slot, offset))[-1500:]}
