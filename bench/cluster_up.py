"""Benchmark: how long the docker backend takes to build its image and to bring up 9 nodes.

Figures:

* ``image_build_s``: ``splitbrain images build`` (debootstrap base + node image).  With
  ``--from-scratch`` both are built anew under scratch tags (a fresh base shares no cached layers),
  which is the cost on a fresh machine, and removed afterwards; otherwise it is whatever is still
  missing (0 when both exist).
  Report only, no target (it depends on the mirror and the index).
* ``docker_cluster_up_s``: ``DockerRemote.create`` of 9 nodes (3 controllers + 2 x 3 brokers) until
  ``exec`` works on every one of them.  Target <= 15 s.
* ``docker_cluster_down_s``: removing those containers and the network (report only).

Usage::

    python3 bench/cluster_up.py [--json] [--from-scratch] [--nodes 9]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.control.docker import DockerRemote
from harness.images import docker_client, ensure_images

TARGETS = {"docker_cluster_up_s": 15.0}
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


def measure(*, from_scratch: bool, nodes: int) -> dict[str, Any]:
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
    return {
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
    args = ap.parse_args(argv)
    figures = measure(from_scratch=args.from_scratch, nodes=args.nodes)
    ok = all(figures[k] <= v for k, v in TARGETS.items())
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
