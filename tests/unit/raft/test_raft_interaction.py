"""Scripted interaction tests (etcd ``interaction_test.go`` style, STYLE.md rule 13b).

Each ``tests/unit/testdata/raft/*.txt`` file is a list of blocks::

    command arg ...
    ----
    expected output (the Readys the command caused, via describe_ready)

Blocks are separated by a blank line; lines starting with ``#`` between blocks are comments.  Run with
``SPLITBRAIN_REWRITE=1`` to regenerate the expected output, then review the diff.

Commands: ``add-nodes N [pre_vote=false] [check_quorum=false] [batch=N] [inflight=N]``, ``campaign ID``,
``tick ID [N]``, ``propose ID DATA``, ``stabilize``, ``deliver ID`` (only messages to ID, repeatedly),
``drop ID`` (in-flight messages to ID), ``crash ID``, ``restart ID``, ``isolate ID``, ``heal``,
``compact ID``, ``transfer ID TARGET``, ``read-index ID CTX``, ``status ID``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from system_under_test.raft.core import describe_ready
from system_under_test.raft.sim import Cluster
from system_under_test.raft.types import ProposalDropped, Ready

DATA = Path(__file__).resolve().parents[1] / "testdata" / "raft"
FILES = sorted(DATA.glob("*.txt"))


class _Env:
    def __init__(self) -> None:
        self.cluster: Cluster | None = None
        self.out: list[str] = []

    def _ready(self, node_id: str, rd: Ready) -> None:
        text = describe_ready(rd)
        if text:
            self.out.append(f"> {node_id}:")
            self.out.extend("  " + line for line in text.splitlines())

    def run(self, line: str) -> str:
        self.out = []
        cmd, *args = line.split()
        if cmd == "add-nodes":
            kw: dict[str, object] = {}
            for a in args[1:]:
                k, v = a.split("=")
                if k in ("pre_vote", "check_quorum"):
                    kw[k] = v == "true"
                else:
                    kw[{"batch": "max_batch_entries", "inflight": "max_inflight"}[k]] = int(v)
            self.cluster = Cluster(int(args[0]), random.Random(0), drop_rate=0.0, dup_rate=0.0, **kw)  # type: ignore[arg-type]
            self.cluster.on_ready = self._ready
            return "ok"
        c = self.cluster
        assert c is not None, "add-nodes first"
        try:
            if cmd == "campaign":
                c.core(args[0]).campaign()
                c.process(args[0])
            elif cmd == "tick":
                c.tick_node(args[0], int(args[1]) if len(args) > 1 else 1)
            elif cmd == "propose":
                index = c.core(args[0]).propose(args[1].encode())
                self.out.append(f"index {index}")
                c.process(args[0])
            elif cmd == "stabilize":
                c.stabilize()
            elif cmd == "deliver":
                c.deliver_matching(lambda m: m.dst == args[0])
            elif cmd == "drop":
                self.out.append(f"dropped {c.drop_matching(lambda m: m.dst == args[0])}")
            elif cmd == "crash":
                c.crash(args[0])
            elif cmd == "restart":
                c.restart(args[0])
                self.out.append(c.core(args[0]).describe())
            elif cmd == "isolate":
                c.cut |= {(a, b) for a in c.ids for b in c.ids if a != b and args[0] in (a, b)}
            elif cmd == "heal":
                c.heal()
            elif cmd == "compact":
                c.compact(args[0])
                self.out.append(c.core(args[0]).describe())
            elif cmd == "transfer":
                c.core(args[0]).transfer_leadership(args[1])
                c.process(args[0])
            elif cmd == "read-index":
                c.core(args[0]).read_index(args[1].encode())
                c.process(args[0])
            elif cmd == "status":
                self.out.append(c.core(args[0]).describe())
            else:
                raise ValueError(f"unknown command {cmd!r} in {line!r}")
        except ProposalDropped as exc:
            self.out.append(f"ProposalDropped: {exc} (leader hint {exc.leader})")
        return "\n".join(self.out) if self.out else "ok"


def _blocks(text: str) -> list[tuple[list[str], str, str]]:
    """(comment lines, command, expected output) per block."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        comments = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith("#")):
            if lines[i].startswith("#"):
                comments.append(lines[i])
            i += 1
        if i >= len(lines):
            break
        cmd = lines[i]
        i += 1
        if i >= len(lines) or lines[i] != "----":
            raise ValueError(f"expected '----' after command {cmd!r} (line {i + 1})")
        i += 1
        out = []
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        blocks.append((comments, cmd, "\n".join(out)))
    return blocks


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_interaction_script(path: Path) -> None:
    env = _Env()
    blocks = _blocks(path.read_text())
    rewritten = []
    for comments, cmd, expected in blocks:
        got = env.run(cmd)
        if os.environ.get("SPLITBRAIN_REWRITE") == "1":
            rewritten.append("\n".join([*comments, cmd, "----", got]))
        else:
            assert got == expected, f"{path.name}: command {cmd!r}\n--- expected\n{expected}\n--- got\n{got}"
    if rewritten:
        path.write_text("\n\n".join(rewritten) + "\n")


def test_testdata_present() -> None:
    assert len(FILES) >= 3, f"expected interaction scripts in {DATA}"
