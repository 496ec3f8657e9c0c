"""Scripted interaction tests (STYLE rule 13b): ``testdata/*.txt`` hold commands (lines starting
with ``> ``) and the expected transcript below each.  The transcript is built from the canonical
describe functions.  ``SPLITBRAIN_REWRITE=1 pytest tests/unit/controller/test_interaction.py``
regenerates the files; review the diff.

Commands: ``join SET``, ``elect SET [ID|-] [designate]``, ``alter SET MASTER IDS``,
``heartbeat SET ID [key=value ...]``, ``register SET ID INCARNATION``, ``shutdown SET ID``,
``clean SET [IDS|-] [force]``, ``advance MS``, ``scan``, ``state``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from system_under_test.controller import describe_state
from system_under_test.protocol.codes import RequestCode

TESTDATA = Path(__file__).with_name("testdata")
FILES = sorted(TESTDATA.glob("*.txt"))
SHOWN = ("master_id", "master_epoch", "sync_state_set_epoch", "new_sync_state_set_epoch", "broker_id", "broker_epoch",
         "fenced", "should_shutdown", "next_broker_id", "message")


def _ids(text: str) -> list[int]:
    return [] if text == "-" else [int(x) for x in text.split(",")]


def _value(text: str) -> Any:
    return {"true": True, "false": False}.get(text, int(text) if text.lstrip("-").isdigit() else text)


def run_command(sim: Any, line: str) -> list[str]:
    words = line.split()
    cmd, args = words[0], words[1:]
    before = sim.index
    if cmd == "join":
        broker_id, epoch = sim.join(args[0])
        reply = None
        out = [f"joined {args[0]}/{broker_id} epoch={epoch}"]
    elif cmd == "elect":
        broker_id = None if len(args) < 2 or args[1] == "-" else int(args[1])
        reply = sim.elect(args[0], broker_id, **({"designate": True} if "designate" in args else {}))
        out = []
    elif cmd == "alter":
        reply, out = sim.alter(args[0], int(args[1]), _ids(args[2])), []
    elif cmd == "heartbeat":
        extra = {k: _value(v) for k, v in (a.split("=", 1) for a in args[2:])}
        reply, out = sim.heartbeat(args[0], int(args[1]), **extra), []
    elif cmd == "register":
        reply, out = sim.register(args[0], int(args[1]), args[2]), []
    elif cmd == "shutdown":
        reply = sim.request(RequestCode.CONTROLLER_CONTROLLED_SHUTDOWN, cluster_name="c1", broker_name=args[0],
                            broker_id=int(args[1]), broker_epoch=sim.state.broker_epoch(args[0], int(args[1])) or 0)
        out = []
    elif cmd == "clean":
        header: dict[str, Any] = {"broker_name": args[0], "broker_ids": _ids(args[1]) if len(args) > 1 else []}
        if "force" in args:
            header["clean_living_broker"] = True
        reply, out = sim.request(RequestCode.CLEAN_BROKER_DATA, **header), []
    elif cmd == "advance":
        sim.advance(int(args[0]))
        reply, out = None, [f"now={sim.now_ms}ms"]
    elif cmd == "scan":
        results = sim.scan()
        reply, out = None, [] if results else ["nothing to do"]
    elif cmd == "state":
        reply, out = None, describe_state(sim.state).splitlines()
    else:
        raise ValueError(f"unknown command {cmd!r} in interaction script")
    if reply is not None:
        code, header, _ = reply
        fields = " ".join(f"{k}={header[k]}" for k in SHOWN if k in header)
        out.insert(0, f"{code.name} {fields}".rstrip())
    if cmd != "join":
        for index in range(before + 1, sim.index + 1):
            out.extend(f"  @{index} {e.describe()}" for e in sim.log[index - 1])
    return out


def transcript(sim: Any, text: str) -> str:
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("> ") or line.startswith("#"):
            lines.append(line)
            if line.startswith("> "):
                lines.extend(run_command(sim, line[2:]))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_interaction(make_sim: Any, path: Path) -> None:
    text = path.read_text()
    got = transcript(make_sim(), text)
    if os.environ.get("SPLITBRAIN_REWRITE") == "1":
        path.write_text(got)
        return
    assert got == text, f"{path.name} differs; rerun with SPLITBRAIN_REWRITE=1 and review the diff"


def test_testdata_present() -> None:
    assert FILES, f"no interaction scripts in {TESTDATA}"
