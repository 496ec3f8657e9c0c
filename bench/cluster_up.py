"""Benchmark: how long the docker backend takes to build its image and to bring up 9 nodes, and how long
the real cluster (3 controllers + 2 broker sets x 3) takes until ready, on the local and docker backends.

Figures:

* ``image_build_s``: ``splitbrain images build`` (debootstrap base + node image).  With
  ``--from-scratch`` both are built anew under scratch tags (a fresh base shares no cached layers),
  which is the cost on a fresh machine, and removed afterwards; otherwise it is whatever is still
  missing (0 when both exist).
  Report only, no target (it depends on the mirror and the index).
* ``docker_cluster_up_s``: ``DockerRemote.create`` of 9 nodes (3 controllers + 2 x 3 brokers) until
  ``exec`` works on every one of them.  Target <= 15 s.
* ``docker_cluster_down_s``: removing those containers and the network (report only).
* ``local_splitbrain_ready_s`` / ``docker_splitbrain_ready_s``: from creating the nodes (namespaces or
  containers) until every controller has a leader and every broker has its broker id -- what the
  runner's setup phase does (all nodes set up concurrently).  Targets <= 6 s and <= 15 s.
  ``--no-splitbrain`` skips them.

Usage::

    python3 bench/cluster_up.py [--json] [--from-scratch] [--nodes 9] [--no-splitbrain]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.control.docker import DockerRemote
from harness.images import docker_client, ensure_images
from harness.spec import spec_from_dict
from systems.splitbrain.db import SplitbrainDB
from systems.splitbrain.options import cluster_options

TARGETS = {"docker_cluster_up_s": 15.0, "local_splitbrain_ready_s": 6.0, "docker_splitbrain_ready_s": 15.0}
SCRATCH_TAGS = ("splitbrain/node:bench-scratch", "splitbrain/base:bench-scratch")
NODES = ["c1", "c2", "c3", "b1-1", "b1-2", "b1-3", "b2-1", "b2-2", "b2-3"]


def _remove_images(client: Any, tags: list[str]) -> None:
    for tag in tags:
        try:
            client.images.remove(tag, force=True, noprune=False)
        except Exception as exc:
            if "No such image" not in str(exc) and "404" not in str(exc):
                raise


async def _cluster(n: int, image: str) -> tuple[float, float]:
    nodes = NODES[:n] if n <= len(NODES) else [f"n{i}" for i in range(1, n + 1)]
    t0 = time.monotonic()
    remote = await DockerRemote.create(nodes, image=image)
    try:
        await asyncio.gather(*(remote.exec(x, ["true"], check=True) for x in nodes))
        up = time.monotonic() - t0
    finally:
        t1 = time.monotonic()
        await remote.close()
    return up, time.monotonic() - t1


async def _splitbrain_ready(backend: str, image: str) -> float:
    """Seconds from creating the 9 nodes until the whole cluster serves (then it is torn down)."""
    spec = spec_from_dict({"name": "bench-up", "backend": backend, "workloads": ["queue"], "seed": 1,
                           "nodes": {"controllers": 3, "broker_sets": {"count": 2, "replicas": 3}}}, file="<bench>")
    nodes = list(spec.nodes.all)
    with tempfile.TemporaryDirectory(prefix="splitbrain-bench-up-") as tmp:
        t0 = time.monotonic()
        if backend == "local":
            from harness.control.local import LocalRemote

            remote: Any = await LocalRemote.create(nodes, state_dir=Path(tmp) / "state")
        else:
            remote = await DockerRemote.create(nodes, image=image)
        db = SplitbrainDB(spec, cluster_options({}))
        test = {"remote": remote, "run_dir": tmp}
        try:
            await asyncio.gather(*(db.setup(test, n) for n in nodes))
            return time.monotonic() - t0
        finally:
            for n in nodes:
                with contextlib.suppress(Exception):
                    await db.teardown(test, n)
            await remote.close()


def measure(*, from_scratch: bool, nodes: int, splitbrain: bool = True) -> dict[str, Any]:
    client = docker_client()
    t0 = time.monotonic()
    if from_scratch:  # under scratch tags, so images that running tests use are never removed
        _remove_images(client, list(SCRATCH_TAGS))
        try:
            report = ensure_images(rebuild_base=True, node_tag=SCRATCH_TAGS[0], base_tag=SCRATCH_TAGS[1])
            build_s = time.monotonic() - t0
            up, down = asyncio.run(_cluster(nodes, report.node_image))
        finally:
            _remove_images(client, list(SCRATCH_TAGS))
    else:
        report = ensure_images()
        build_s = time.monotonic() - t0
        up, down = asyncio.run(_cluster(nodes, report.node_image))
    ready: dict[str, Any] = {}
    if splitbrain:
        for backend in ("local", "docker"):
            ready[f"{backend}_splitbrain_ready_s"] = round(asyncio.run(_splitbrain_ready(backend,
                                                                                         report.node_image)), 2)
    return {
        **ready,
        "image_build_s": round(build_s, 2), "image_base_s": round(report.base_s, 2),
        "image_node_s": round(report.node_s, 2), "image_reused": not (report.base_built or report.node_built),
        "from_scratch": from_scratch, "nodes": nodes, "docker_cluster_up_s": round(up, 2),
        "docker_cluster_down_s": round(down, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--from-scratch", action="store_true", help="delete our images first and rebuild everything")
    ap.add_argument("--nodes", type=int, default=9)
    ap.add_argument("--no-splitbrain", action="store_true", help="skip the real-cluster ready figures")
    args = ap.parse_args(argv)
    figures = measure(from_scratch=args.from_scratch, nodes=args.nodes, splitbrain=not args.no_splitbrain)
    ok = all(figures[k] <= v for k, v in TARGETS.items() if k in figures)
    if args.json:
        print(json.dumps({"figures": figures, "targets": TARGETS, "meets_targets": ok}))
    else:
        for k, v in figures.items():
            target = f"  (target <= {TARGETS[k]})" if k in TARGETS else ""
            print(f"{k:24} {v}{target}")
        print("meets targets" if ok else "MISSES a target")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
