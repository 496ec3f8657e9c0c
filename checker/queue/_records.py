"""The wording of every queue anomaly record, one builder per place the pass finds one.

Why a table: the Python pass (``_scan``) and the compiled one (``native/queuescan``) find the same anomalies;
the compiled pass hands back ``(code, queue, ops, args)`` and both word them here, so a record reads the same
whichever engine ran.  ``BUILDERS`` maps a code to its anomaly type (``_types.ANOMALY_TYPES``) and builder;
codes differ from types only where one type is found in two places (``unexpected``, ``unseen``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from checker.compose import Anomaly

Ops = tuple[int, ...]


def inconsistent_offsets(key: Any, ops: Ops, off: int, was: Any, now: Any) -> Anomaly:
    return Anomaly("inconsistent-offsets", key, ops, {"offset": off, "value": was}, {"offset": off, "value": now},
                   f"offset {off} of {key} was seen holding {was!r} and later {now!r}")


def nonmonotonic_poll(key: Any, ops: Ops, start: int, first: int, consumer: Any) -> Anomaly:
    return Anomaly("nonmonotonic-poll", key, ops, {"from_offset": start}, {"first_offset": first},
                   f"consumer {consumer!r} resumed at offset {start} but the poll returned offset {first} first")


def unexpected_unsent(key: Any, ops: Ops, off: int, val: Any) -> Anomaly:
    return Anomaly("unexpected", key, ops, None, {"offset": off, "value": val},
                   f"poll read {val!r} at offset {off} of {key} but no send of that value was ever invoked")


def int_nonmonotonic_poll(key: Any, ops: Ops, last: int, off: int) -> Anomaly:
    return Anomaly("int-nonmonotonic-poll", key, ops, {"after_offset": last}, {"offset": off},
                   f"one poll returned offset {off} after offset {last}")


def nonmonotonic_send(key: Any, ops: Ops, above: int, off: int, val: Any, process: Any) -> Anomaly:
    return Anomaly("nonmonotonic-send", key, ops, {"offset_above": above}, {"offset": off, "value": val},
                   f"process {process} sent {val!r} after a send acknowledged at offset {above}, "
                   f"but it landed at lower offset {off}")


def nonmonotonic_send_realtime(key: Any, ops: Ops, above: int, off: int, val: Any) -> Anomaly:
    return Anomaly("nonmonotonic-send-realtime", key, ops, {"offset_above": above}, {"offset": off, "value": val},
                   f"send of {val!r} was invoked after a send to {key} was acknowledged at offset {above}, "
                   f"yet it landed at lower offset {off}")


def lost_write(key: Any, ops: Ops, ack: int, val: Any, max_polled: int) -> Anomaly:
    return Anomaly("lost-write", key, ops, {"offset": ack, "value": val}, {"max_polled_offset": max_polled},
                   f"{val!r} was acknowledged at offset {ack} of {key} but never polled, "
                   f"although polls read up to offset {max_polled}")


def unexpected_failed(key: Any, ops: Ops, off: int, val: Any) -> Anomaly:
    return Anomaly("unexpected", key, ops, None, {"offset": off, "value": val},
                   f"poll read {val!r} at offset {off} of {key} but every send of it definitely "
                   f"failed (G1a-like aborted read)")


def duplicate(key: Any, ops: Ops, copies: int, offsets: list[int], val: Any) -> Anomaly:
    return Anomaly("duplicate", key, ops, {"copies": copies}, {"offsets": offsets, "value": val},
                   f"{val!r} was acknowledged {copies} time(s) but appears at offsets {offsets} of {key}")


def _at(ack: int | None) -> str:
    return f"at offset {ack}" if ack is not None else "(without an offset)"


def unseen_after_drain(key: Any, ops: Ops, ack: int | None, val: Any, drain_inv: int) -> Anomaly:
    return Anomaly("unseen", key, ops, {"offset": ack, "value": val}, None,
                   f"{val!r} was acknowledged {_at(ack)} of {key} but no poll read it, not even the drain "
                   f"invoked after the acknowledgement (op {drain_inv})")


def unseen(key: Any, ops: Ops, ack: int | None, val: Any) -> Anomaly:
    return Anomaly("unseen", key, ops, {"offset": ack, "value": val}, None,
                   f"{val!r} was acknowledged {_at(ack)} of {key} but no poll read it (yet: no drain of "
                   f"{key} began after the acknowledgement)")


def _gap(kind: str) -> Callable[..., Anomaly]:
    where = "between polls" if kind == "poll-skip" else "inside one poll"

    def build(key: Any, ops: Ops, missing: list[int], lo: int, hi: int, consumer: Any) -> Anomaly:
        return Anomaly(kind, key, ops, {"offsets": missing[:10]}, {"jumped_from": lo, "to": hi},
                       f"consumer {consumer!r} jumped {where} from offset {lo} to {hi} of {key}, skipping "
                       f"known offset(s) {missing[:10]}")
    return build


BUILDERS: dict[str, tuple[str, Callable[..., Anomaly]]] = {
    "inconsistent-offsets": ("inconsistent-offsets", inconsistent_offsets),
    "nonmonotonic-poll": ("nonmonotonic-poll", nonmonotonic_poll),
    "unexpected-unsent": ("unexpected", unexpected_unsent),
    "int-nonmonotonic-poll": ("int-nonmonotonic-poll", int_nonmonotonic_poll),
    "nonmonotonic-send": ("nonmonotonic-send", nonmonotonic_send),
    "nonmonotonic-send-realtime": ("nonmonotonic-send-realtime", nonmonotonic_send_realtime),
    "lost-write": ("lost-write", lost_write),
    "unexpected-failed": ("unexpected", unexpected_failed),
    "duplicate": ("duplicate", duplicate),
    "unseen-after-drain": ("unseen", unseen_after_drain),
    "unseen": ("unseen", unseen),
    "poll-skip": ("poll-skip", _gap("poll-skip")),
    "int-poll-skip": ("int-poll-skip", _gap("int-poll-skip")),
}
