"""The packet nemesis's pure half: what a behaviour map means, with one table of defaults.

A ``start-packet`` behaviour map names the faults to combine -- ``delay`` {time_ms, jitter_ms}, ``loss``
{percent}, ``duplicate`` {percent}, ``reorder`` {percent, correlation}, ``corrupt`` {percent}, ``rate``
{rate} -- and may leave any parameter out.  :func:`complete` fills the gaps from :data:`DEFAULTS`, the only
table of defaults, so ``{"delay": {}}`` means the same 50 ms whether the kernel's netem applies it
(:func:`netem_args`) or the NFQUEUE fallback does (:func:`shaper_args`, the arguments of
:mod:`nemesis.netqueue`).  :func:`tc_tree` is the htb tree that carries the netem leaf and the ``rate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_BEHAVIOR", "DEFAULTS", "PRESETS", "REORDER_DELAY_MS", "complete", "netem_args", "rate_of",
           "shaper_args", "tc_tree"]

Behavior = Mapping[str, Mapping[str, Any]]

DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "delay": {"time_ms": 50, "jitter_ms": 0},
    "loss": {"percent": 10},
    "duplicate": {"percent": 10},
    "reorder": {"percent": 20, "correlation": 75},
    "corrupt": {"percent": 10},
    "rate": {"rate": "1mbit"},
}
"""Every behaviour's parameters, each with the value it has when the op leaves it out."""

REORDER_DELAY_MS = 10
"""The delay a ``reorder`` without ``delay`` gets: packets are reordered by delaying the others."""

PRESETS: Mapping[str, dict[str, Any]] = {
    "delay": {"delay": {"time_ms": 50, "jitter_ms": 10}}, "loss": {"loss": {"percent": 20}},
    "duplicate": {"duplicate": {"percent": 20}}, "reorder": {"delay": {"time_ms": 20}, "reorder": {"percent": 25}},
    "rate": {"rate": {"rate": "1mbit"}},
}
"""The behaviours the ``packet`` package draws from, by kind name."""

DEFAULT_BEHAVIOR = PRESETS["delay"]
"""What ``start-packet`` without a ``behavior`` does."""


def complete(behavior: Behavior) -> dict[str, dict[str, Any]]:
    """``behavior`` with every parameter filled from :data:`DEFAULTS` (a ``reorder`` without ``delay`` gets
    :data:`REORDER_DELAY_MS`).

    Raises:
        ValueError: an unknown behaviour or parameter, or a behaviour that is not a mapping (names it).
    """
    unknown = set(behavior) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"start-packet: unknown behaviour(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    out: dict[str, dict[str, Any]] = {}
    for name, params in behavior.items():
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ValueError(f"start-packet: behavior.{name} must be a mapping of {sorted(DEFAULTS[name])}, "
                             f"got {params!r}")
        extra = set(params) - set(DEFAULTS[name])
        if extra:
            raise ValueError(f"start-packet: behavior.{name}: unknown parameter(s) {sorted(extra)}; "
                             f"known: {sorted(DEFAULTS[name])}")
        out[name] = {**DEFAULTS[name], **params}
    if "reorder" in out and "delay" not in out:
        out["delay"] = {**DEFAULTS["delay"], "time_ms": REORDER_DELAY_MS}
    return out


def netem_args(behavior: Behavior) -> list[str]:
    """The netem argument list for a behaviour map (``rate`` is left to the htb class of :func:`tc_tree`).

    Raises:
        ValueError: as :func:`complete`.
    """
    b = complete(behavior)
    args: list[str] = []
    if "delay" in b:
        d = b["delay"]
        args += ["delay", f"{int(d['time_ms'])}ms", f"{int(d['jitter_ms'])}ms"]
        if d["jitter_ms"]:
            args += ["distribution", "normal"]
    for name in ("loss", "duplicate", "corrupt"):
        if name in b:
            args += [name, f"{float(b[name]['percent']):g}%"]
    if "reorder" in b:
        args += ["reorder", f"{float(b['reorder']['percent']):g}%", f"{float(b['reorder']['correlation']):g}%"]
    return args


def shaper_args(behavior: Behavior) -> list[str]:
    """The arguments of :mod:`nemesis.netqueue` for a behaviour map.  The shaper reorders by jitter, so a
    ``reorder`` without ``jitter_ms`` gets half the delay as jitter.

    Raises:
        ValueError: as :func:`complete`; ``corrupt``, which only the kernel's netem can do.
    """
    b = complete(behavior)
    if "corrupt" in b:
        raise ValueError("start-packet: corrupt needs the kernel's sch_netem, which this kernel lacks")
    d = b.get("delay", {"time_ms": 0, "jitter_ms": 0})
    delay = float(d["time_ms"])
    jitter = float(d["jitter_ms"]) or (delay / 2 if "reorder" in b else 0.0)

    def probability(name: str) -> float:
        return float(b[name]["percent"]) / 100 if name in b else 0.0

    return ["--delay-ms", f"{delay:g}", "--jitter-ms", f"{jitter:g}",
            "--loss", f"{probability('loss'):g}", "--duplicate", f"{probability('duplicate'):g}"]


def rate_of(behavior: Behavior) -> str | None:
    """The ``rate`` of a behaviour map (its default filled in), or None without one."""
    return str(complete(behavior)["rate"]["rate"]) if "rate" in behavior else None


def tc_tree(netem: Sequence[str] | None, rate: str | None, dst_ips: Sequence[str]) -> list[list[str]]:
    """The ``tc`` commands (argv after ``tc``) that shape eth0's outgoing traffic -- all of it, or with
    ``dst_ips`` only packets to those addresses (pairs).  An htb root with an unlimited class 1:1 and the
    shaped class 1:2 (``rate`` or unlimited), ``netem`` as 1:2's leaf, and u32 filters sending the chosen
    destinations to 1:2 (without destinations 1:2 is the default)."""
    cmds = [["qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1" if dst_ips else "2"],
            ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit"],
            ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:2", "htb", "rate", rate or "10gbit"]]
    if netem:
        cmds.append(["qdisc", "add", "dev", "eth0", "parent", "1:2", "handle", "20:", "netem", *netem])
    for ip in dst_ips:
        cmds.append(["filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                     "match", "ip", "dst", f"{ip}/32", "flowid", "1:2"])
    return cmds
