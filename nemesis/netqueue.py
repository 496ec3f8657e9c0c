"""A userspace packet shaper on NFQUEUE, for kernels without ``sch_netem``.

Some kernels (this project's CI machines among them) are built without ``CONFIG_NET_SCH_NETEM``,
so ``tc ... netem`` fails.  The packet nemesis then runs this daemon inside the node's network
namespace and sends the node's outgoing packets through it::

    iptables -A OUTPUT -o eth0 -m mark ! --mark 0x5b -j NFQUEUE --queue-num Q --queue-bypass

Every queued packet is held and released after ``delay ± jitter`` (normal distribution; jitter
reorders packets exactly as netem does), dropped with probability ``loss``, and duplicated with
probability ``duplicate`` (the copy is re-sent through a raw socket carrying mark 0x5b, so it is
not queued again).  ``--queue-bypass`` means traffic flows untouched if the daemon dies.

Run: ``python -m nemesis.netqueue --queue 7 --delay-ms 100 --jitter-ms 10 --loss 0 --duplicate 0
--seed 1``.  It prints ``READY`` once bound and exits on SIGTERM.  The packet nemesis passes every flag,
computed by :func:`nemesis.packet_behavior.shaper_args` from the same table of defaults netem's arguments
use; a flag left out here turns that fault off.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import socket
import sys
from typing import Any

MARK = 0x5B


def plan(rng: random.Random, *, delay_ms: float, jitter_ms: float, loss: float, duplicate: float) -> tuple[
        bool, float, bool]:
    """Pure: (drop?, delay in seconds, duplicate?) for one packet."""
    if loss > 0 and rng.random() < loss:
        return True, 0.0, False
    delay = max(0.0, rng.gauss(delay_ms, jitter_ms) if jitter_ms > 0 else delay_ms) / 1000
    return False, delay, duplicate > 0 and rng.random() < duplicate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--queue", type=int, required=True)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--loss", type=float, default=0.0, help="probability 0..1")
    ap.add_argument("--duplicate", type=float, default=0.0, help="probability 0..1")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for name in ("loss", "duplicate"):
        if not 0 <= getattr(args, name) <= 1:
            print(f"--{name} must be a probability in [0, 1]", file=sys.stderr)
            return 2
    try:
        from netfilterqueue import NetfilterQueue
    except ImportError:
        print("netqueue: the NetfilterQueue package is missing (pip install NetfilterQueue; needs "
              "libnetfilter-queue-dev)", file=sys.stderr)
        return 3
    rng = random.Random(args.seed)
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, MARK)
    loop = asyncio.new_event_loop()
    held: set[Any] = set()

    def release(pkt: Any) -> None:
        held.discard(pkt)
        try:
            pkt.accept()
        except Exception:
            pass

    def on_packet(pkt: Any) -> None:
        drop, delay, dup = plan(rng, delay_ms=args.delay_ms, jitter_ms=args.jitter_ms, loss=args.loss,
                                duplicate=args.duplicate)
        if drop:
            pkt.drop()
            return
        if dup:
            payload = pkt.get_payload()
            dst = socket.inet_ntoa(payload[16:20])
            loop.call_later(delay, lambda: raw.sendto(payload, (dst, 0)))
        if delay <= 0:
            pkt.accept()
            return
        pkt.retain()
        held.add(pkt)
        loop.call_later(delay, release, pkt)

    nfq = NetfilterQueue()
    nfq.bind(args.queue, on_packet, max_len=100_000)
    sock = socket.fromfd(nfq.get_fd(), socket.AF_UNIX, socket.SOCK_STREAM)
    loop.add_reader(sock.fileno(), lambda: nfq.run(block=False))
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    print("READY", flush=True)
    try:
        loop.run_until_complete(stop.wait())
    finally:
        for pkt in list(held):
            release(pkt)
        nfq.unbind()
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
