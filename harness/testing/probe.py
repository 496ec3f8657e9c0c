"""A tiny workload for testing the harness commands: it needs only the controller quorum.

``cli-probe`` reads the controllers' metadata (``CONTROLLER_GET_METADATA_INFO`` through
:class:`~system_under_test.client.controller_client.ControllerClient`) and checks that every answered read
names a leader that is one of the spec's controllers (or none, during an election).  It exists so the
``splitbrain test`` path can run for real against the cluster before the real workloads are finished; call
:func:`register_probe_workload` (idempotent) before building specs that name it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from harness import generator as g
from harness.protocols import WireClients

__all__ = [
    "PROBE_WORKLOAD", "ProbeChecker", "ProbeClient", "probe_workload", "register_probe_workload",
    "unregister_probe_workload",
]

PROBE_WORKLOAD = "cli-probe"


class ProbeClient:
    """One ControllerClient per worker; ``read-meta`` returns the leader id it was told."""

    def __init__(self, db: WireClients, inner: Any = None) -> None:
        self.db = db
        self.inner = inner

    async def open(self, test: dict[str, Any], node: str) -> ProbeClient:
        return ProbeClient(self.db, self.db.client(test, timeout_s=1.0))

    async def setup(self, test: dict[str, Any]) -> None:
        return None

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        try:
            md = await self.inner.get_metadata()
        except Exception as exc:  # a read has no side effect: a failure is definite
            return {**op, "type": "fail", "error": f"{exc.__class__.__name__}: {exc}"}
        return {**op, "type": "ok", "value": {"leader": md.get("leader_id")}}

    async def teardown(self, test: dict[str, Any]) -> None:
        return None

    async def close(self, test: dict[str, Any]) -> None:
        if self.inner is not None:
            await self.inner.close()


class ProbeChecker:
    """Invalid if an ok read names a leader outside the controllers; unknown if no read succeeded."""

    def __init__(self, controllers: Sequence[str]) -> None:
        self.controllers = set(controllers)

    def check(self, test: dict[str, Any], history: Sequence[Any], opts: Mapping[str, Any]) -> dict[str, Any]:
        oks = [op for op in history if getattr(op, "f", None) == "read-meta" and op.type == "ok"]
        strangers = [op.index for op in oks if (op.value or {}).get("leader") not in self.controllers | {None}]
        if not oks:
            return {"valid": "unknown", "error": "no read-meta op succeeded", "reads": 0}
        return {"valid": not strangers, "reads": len(oks), "stranger_leaders": strangers[:20]}


def _build(ctx: Any) -> Any:
    from workloads.registry import Workload

    return Workload(
        name=PROBE_WORKLOAD, client=ProbeClient(ctx.db), generator=g.repeat({"f": "read-meta"}),
        checkers={"leader": ProbeChecker(ctx.spec.nodes.controllers)}, fs=frozenset({"read-meta"}),
        final_generator=g.each_thread(g.once({"f": "read-meta"})),
    )


def register_probe_workload() -> None:
    from workloads import registry

    registry.register(PROBE_WORKLOAD)(_build)


def unregister_probe_workload() -> None:
    """Remove ``cli-probe`` again so later tests in the same session see only the real workloads
    (the registry has no public unregister: this is test-only code)."""
    from workloads import registry

    if registry._BUILDERS.get(PROBE_WORKLOAD) is _build:
        del registry._BUILDERS[PROBE_WORKLOAD]


@contextlib.contextmanager
def probe_workload() -> Iterator[None]:
    """``with probe_workload():`` -- registered inside the block only."""
    register_probe_workload()
    try:
        yield
    finally:
        unregister_probe_workload()
