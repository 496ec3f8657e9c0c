"""The one table of queue anomaly types: name -> (invalidates the history?, one-line definition)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AnomalyType:
    name: str
    bad: bool  # False: reported but does not by itself make the history invalid
    doc: str


_TABLE: tuple[AnomalyType, ...] = (
    AnomalyType("lost-write", True,
                "an acknowledged send was never polled although polls read offsets past its offset"),
    AnomalyType("duplicate", True,
                "a value acknowledged once appears at more than one offset of its queue"),
    AnomalyType("unexpected", True,
                "a polled value was never sent to that queue, or only by definitely failed sends (G1a-like)"),
    AnomalyType("inconsistent-offsets", True, "one offset of a queue holds two different values"),
    AnomalyType("poll-skip", True,
                "a consumer's poll started above where it resumed although records exist in between"),
    AnomalyType("int-poll-skip", True, "one poll's records jump over an offset known to hold a record"),
    AnomalyType("nonmonotonic-poll", True,
                "a consumer's poll started at or before an offset it had already consumed, without asking to"),
    AnomalyType("int-nonmonotonic-poll", True, "one poll's records are not in strictly increasing offset order"),
    AnomalyType("nonmonotonic-send", True,
                "a producer's later acknowledged send landed at a lower offset than its earlier one"),
    AnomalyType("nonmonotonic-send-realtime", True,
                "a send landed below a send to the same queue that was acknowledged before it was invoked"),
    AnomalyType("unseen", False,
                "an acknowledged send not read by any poll (yet); invalid once an ok drain of its queue that "
                "began after the acknowledgement missed it"),
)

ANOMALY_TYPES: dict[str, AnomalyType] = {}
for _t in _TABLE:
    if _t.name in ANOMALY_TYPES:
        raise RuntimeError(f"queue anomaly type {_t.name!r} declared twice in checker/queue/_types.py")
    ANOMALY_TYPES[_t.name] = _t
